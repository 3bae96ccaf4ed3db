// EtcdStore over TLS with etcd's authentication, on a real etcd: one member serving
// https with client certificates required (--client-cert-auth), a throwaway CA and
// certificates made with the openssl command line, and auth enabled by etcdctl with user
// `tessera` allowed readwrite on /tessera/ only. The member is shared by this binary's
// tests and killed with it.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "store/etcd/etcd_store.h"

extern char** environ;

namespace tessera {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr char kPassword[] = "tessera-secret";
constexpr char kRootPassword[] = "root-secret";

std::string FindOnPath(const std::string& name) {
  const char* path = getenv("PATH");
  std::stringstream dirs(path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
  }
  return "";
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Starts args[0] (an absolute path) with stdout and stderr appended to `log` and
// ETCDCTL_API=3 in its environment; it dies with this process. -1 when fork fails.
pid_t Spawn(std::vector<std::string> args, const std::string& log) {
  std::vector<char*> argv;
  for (std::string& arg : args) {
    argv.push_back(arg.data());
  }
  argv.push_back(nullptr);
  std::vector<std::string> env_strings = {"ETCDCTL_API=3"};
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::string(*e).rfind("ETCDCTL_", 0) != 0) {
      env_strings.emplace_back(*e);
    }
  }
  std::vector<char*> envp;
  for (std::string& e : env_strings) {
    envp.push_back(e.data());
  }
  envp.push_back(nullptr);
  const int out = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (out < 0) {
    return -1;
  }
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid == 0) {
    // The child: only async-signal-safe calls until exec.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) {
      _exit(127);
    }
    dup2(out, STDOUT_FILENO);
    dup2(out, STDERR_FILENO);
    const int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) {
      dup2(devnull, STDIN_FILENO);
    }
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  close(out);
  return pid;
}

// Runs a command to its end (killed after `timeout`); OK or why not, with its output.
Status Run(const std::vector<std::string>& args, const std::string& log,
           milliseconds timeout = milliseconds(5000)) {
  std::filesystem::resize_file(log, 0);
  const pid_t pid = Spawn(args, log);
  if (pid < 0) {
    return UnavailableError("cannot start " + args[0]);
  }
  const auto until = Clock::now() + timeout;
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) != pid) {
    if (Clock::now() >= until) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return UnavailableError(args[0] + " " + args[1] + " did not finish in time: " + ReadAll(log));
    }
    std::this_thread::sleep_for(milliseconds(5));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::string command;
    for (const std::string& arg : args) {
      command += arg + " ";
    }
    return UnavailableError(command + "failed: " + ReadAll(log));
  }
  return Status::Ok();
}

// The CA, server and client certificates, the member and its users.
class TlsEtcd {
 public:
  static StatusOr<std::unique_ptr<TlsEtcd>> Start() {
    std::unique_ptr<TlsEtcd> e(new TlsEtcd);
    for (const char* tool : {"etcd", "etcdctl", "openssl"}) {
      if (FindOnPath(tool).empty()) {
        return FailedPreconditionError(std::string(tool) +
                                       " is not installed: run scripts/setup.sh");
      }
    }
    e->etcd_ = FindOnPath("etcd");
    e->etcdctl_ = FindOnPath("etcdctl");
    e->openssl_ = FindOnPath("openssl");
    std::string pattern =
        (std::filesystem::temp_directory_path() / "tessera_etcd_tls_XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) {
      return UnavailableError("cannot make a temporary directory");
    }
    e->dir_ = pattern;
    e->tool_log_ = e->dir_ + "/tool.log";
    std::ofstream(e->tool_log_).flush();
    TESSERA_RETURN_IF_ERROR(e->MakeCertificates());
    TESSERA_RETURN_IF_ERROR(e->StartMember());
    TESSERA_RETURN_IF_ERROR(e->EnableAuth());
    return e;
  }

  ~TlsEtcd() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      int status = 0;
      waitpid(pid_, &status, 0);
    }
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  std::string endpoint() const { return "127.0.0.1:" + std::to_string(client_port_); }
  std::string File(const std::string& name) const { return dir_ + "/" + name; }
  std::string Log() const { return ReadAll(File("etcd.log")); }

  // etcdctl over TLS as root, once auth is on.
  Status Etcdctl(std::vector<std::string> args, bool as_root = true) {
    std::vector<std::string> full = {etcdctl_,
                                     "--endpoints=https://" + endpoint(),
                                     "--cacert=" + File("ca.pem"),
                                     "--cert=" + File("client.pem"),
                                     "--key=" + File("client.key"),
                                     "--dial-timeout=2s",
                                     "--command-timeout=3s"};
    if (as_root) {
      full.push_back(std::string("--user=root:") + kRootPassword);
    }
    full.insert(full.end(), args.begin(), args.end());
    return Run(full, tool_log_);
  }
  std::string ToolOutput() const { return ReadAll(tool_log_); }

 private:
  TlsEtcd() = default;

  // EC P-256 keys: made in milliseconds, unlike RSA.
  Status MakeCertificates() {
    const std::vector<std::string> ec = {"-newkey", "ec", "-pkeyopt",
                                         "ec_paramgen_curve:prime256v1", "-nodes"};
    auto req = [&](std::vector<std::string> args) {
      std::vector<std::string> full = {openssl_, "req"};
      full.insert(full.end(), ec.begin(), ec.end());
      full.insert(full.end(), args.begin(), args.end());
      return Run(full, tool_log_);
    };
    auto sign = [&](const std::string& name, const std::string& extensions) {
      std::ofstream(File(name + ".ext")) << extensions;
      return Run({openssl_, "x509", "-req", "-in", File(name + ".csr"), "-CA", File("ca.pem"),
                  "-CAkey", File("ca.key"), "-CAcreateserial", "-out", File(name + ".pem"), "-days",
                  "2", "-extfile", File(name + ".ext")},
                 tool_log_);
    };
    TESSERA_RETURN_IF_ERROR(req({"-x509", "-keyout", File("ca.key"), "-out", File("ca.pem"),
                                 "-days", "2", "-subj", "/CN=tessera-test-ca"}));
    TESSERA_RETURN_IF_ERROR(
        req({"-keyout", File("server.key"), "-out", File("server.csr"), "-subj", "/CN=127.0.0.1"}));
    // etcd's own gateway connects to the member with the server certificate: clientAuth too.
    TESSERA_RETURN_IF_ERROR(sign("server",
                                 "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n"
                                 "extendedKeyUsage=serverAuth,clientAuth\n"));
    // A CN that names no etcd user: the certificate alone grants nothing once auth is on.
    TESSERA_RETURN_IF_ERROR(req({"-keyout", File("client.key"), "-out", File("client.csr"), "-subj",
                                 "/CN=tessera-test-client"}));
    TESSERA_RETURN_IF_ERROR(
        sign("client", "basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n"));
    // Another CA, which did not sign the server's certificate.
    return req({"-x509", "-keyout", File("other-ca.key"), "-out", File("other-ca.pem"), "-days",
                "2", "-subj", "/CN=some-other-ca"});
  }

  Status StartMember() {
    TESSERA_ASSIGN_OR_RETURN(client_port_, FreePort());
    TESSERA_ASSIGN_OR_RETURN(peer_port_, FreePort());
    const std::string client = "https://127.0.0.1:" + std::to_string(client_port_);
    const std::string peer = "http://127.0.0.1:" + std::to_string(peer_port_);
    pid_ = Spawn({etcd_,
                  "--name",
                  "tls0",
                  "--data-dir",
                  File("tls0.etcd"),
                  "--listen-client-urls",
                  client,
                  "--advertise-client-urls",
                  client,
                  "--listen-peer-urls",
                  peer,
                  "--initial-advertise-peer-urls",
                  peer,
                  "--initial-cluster",
                  "tls0=" + peer,
                  "--initial-cluster-state",
                  "new",
                  "--heartbeat-interval",
                  "50",
                  "--election-timeout",
                  "500",
                  "--cert-file",
                  File("server.pem"),
                  "--key-file",
                  File("server.key"),
                  "--trusted-ca-file",
                  File("ca.pem"),
                  "--client-cert-auth",
                  "--logger",
                  "zap",
                  "--log-outputs",
                  "stderr"},
                 File("etcd.log"));
    if (pid_ < 0) {
      return UnavailableError("cannot start etcd");
    }
    const auto until = Clock::now() + milliseconds(10000);
    for (;;) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return UnavailableError("etcd exited while starting: " + Log());
      }
      Status health = Etcdctl({"endpoint", "health"}, /*as_root=*/false);
      if (health.ok()) {
        return Status::Ok();
      }
      if (Clock::now() >= until) {
        return UnavailableError("etcd did not serve within 10 s: " + health.message() +
                                "\nits log:\n" + Log());
      }
      std::this_thread::sleep_for(milliseconds(50));
    }
  }

  Status EnableAuth() {
    const std::vector<std::vector<std::string>> steps = {
        {"user", "add", std::string("root:") + kRootPassword},
        {"role", "add", "root"},
        {"user", "grant-role", "root", "root"},
        {"user", "add", std::string("tessera:") + kPassword},
        {"role", "add", "tessera"},
        {"role", "grant-permission", "tessera", "readwrite", "/tessera/", "--prefix=true"},
        {"user", "grant-role", "tessera", "tessera"},
        {"auth", "enable"},
    };
    for (const auto& step : steps) {
      TESSERA_RETURN_IF_ERROR(Etcdctl(step, /*as_root=*/false));
    }
    return Status::Ok();
  }

  // A port the kernel considers free now on 127.0.0.1.
  static StatusOr<int> FreePort() {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    const bool bound = fd >= 0 && bind(fd, reinterpret_cast<sockaddr*>(&addr), len) == 0 &&
                       getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
    if (fd >= 0) {
      close(fd);
    }
    if (!bound) {
      return UnavailableError("cannot bind a free loopback port");
    }
    return static_cast<int>(ntohs(addr.sin_port));
  }

  std::string etcd_, etcdctl_, openssl_;
  std::string dir_, tool_log_;
  int client_port_ = 0, peer_port_ = 0;
  pid_t pid_ = -1;
};

JobRow Job(uint64_t id) {
  JobRow job;
  job.id = id;
  job.tenant = "team-a";
  job.queue = "q";
  job.name = "job-" + std::to_string(id);
  job.state = "pending";
  job.submit_us = static_cast<int64_t>(id);
  return job;
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) {
    ++n;
  }
  return n;
}

class EtcdTlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto etcd = TlsEtcd::Start();
    if (etcd.ok()) {
      etcd_ = std::move(etcd).value().release();
    } else {
      start_error_ = new std::string(etcd.status().ToString());
    }
  }
  static void TearDownTestSuite() {
    delete etcd_;  // kills the member
    etcd_ = nullptr;
  }

  void SetUp() override { ASSERT_NE(etcd_, nullptr) << *start_error_; }

  // TLS with the client certificate, user tessera, keys under /tessera/<test>/.
  static EtcdStoreOptions Options() {
    EtcdStoreOptions options;
    options.endpoints = {etcd_->endpoint()};
    options.prefix = "/tessera/" +
                     std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) +
                     "/";
    options.ca_file = etcd_->File("ca.pem");
    options.cert_file = etcd_->File("client.pem");
    options.key_file = etcd_->File("client.key");
    options.user = "tessera";
    options.password = kPassword;
    options.deadline_ms = 1000;
    return options;
  }

  // Opening with `options` fails within the deadline (and a margin); its status.
  static Status OpenFails(EtcdStoreOptions options) {
    const auto start = Clock::now();
    auto store = EtcdStore::Open(std::move(options));
    EXPECT_LT(Clock::now() - start, milliseconds(1000 + 1000));
    EXPECT_FALSE(store.ok());
    return store.ok() ? Status::Ok() : store.status();
  }

  static std::vector<uint64_t> JobIds(EtcdStore& store) {
    auto jobs = store.LoadJobs();
    EXPECT_TRUE(jobs.ok()) << jobs.status().ToString();
    std::vector<uint64_t> ids;
    for (const JobRow& job : jobs.ok() ? *jobs : std::vector<JobRow>{}) {
      ids.push_back(job.id);
    }
    return ids;
  }

  static TlsEtcd* etcd_;
  static std::string* start_error_;
};

TlsEtcd* EtcdTlsTest::etcd_ = nullptr;
std::string* EtcdTlsTest::start_error_ = nullptr;

TEST_F(EtcdTlsTest, CommitsAndLoadsOverTlsAsTheAuthenticatedUser) {
  auto store = EtcdStore::Open(Options());
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  WriteBatch batch;
  batch.jobs = {Job(1), Job(2), Job(3)};
  batch.kv = {{"k", "v"}};
  ASSERT_TRUE((*store)->Commit(batch).ok());
  EXPECT_EQ(JobIds(**store), (std::vector<uint64_t>{1, 2, 3}));
  auto job = (*store)->LoadJob(2);
  ASSERT_TRUE(job.ok() && job->has_value()) << job.status().ToString();
  EXPECT_EQ((*job)->name, "job-2");
  auto kv = (*store)->GetKv("k");
  ASSERT_TRUE(kv.ok()) << kv.status().ToString();
  EXPECT_EQ(kv->value_or(""), "v");
  // The rows are on this member, where etcdctl (as root) sees them.
  ASSERT_TRUE(etcd_->Etcdctl({"get", "--prefix", "--keys-only", Options().prefix + "jobs/"}).ok())
      << etcd_->ToolOutput();
  EXPECT_EQ(Count(etcd_->ToolOutput(), Options().prefix + "jobs/"), 3u) << etcd_->ToolOutput();
  EXPECT_TRUE((*store)->Close().ok());
}

TEST_F(EtcdTlsTest, WrongPasswordFailsNamingAuthentication) {
  EtcdStoreOptions options = Options();
  options.password = "not-the-password";
  Status status = OpenFails(options);
  EXPECT_EQ(status.code(), StatusCode::kUnauthenticated) << status.ToString();
  EXPECT_NE(status.message().find("authenticat"), std::string::npos) << status.ToString();
  EXPECT_NE(status.message().find("tessera"), std::string::npos) << status.ToString();
}

TEST_F(EtcdTlsTest, AUserWithoutPermissionOnThePrefixIsDenied) {
  EtcdStoreOptions options = Options();
  options.prefix = "/elsewhere/";
  Status status = OpenFails(options);
  EXPECT_EQ(status.code(), StatusCode::kPermissionDenied) << status.ToString();
  EXPECT_NE(status.message().find("permission denied"), std::string::npos) << status.ToString();
}

TEST_F(EtcdTlsTest, WithoutAUserTheCertificateAloneIsDenied) {
  EtcdStoreOptions options = Options();
  options.user.clear();
  options.password.clear();
  Status status = OpenFails(options);
  EXPECT_EQ(status.code(), StatusCode::kPermissionDenied) << status.ToString();
}

TEST_F(EtcdTlsTest, WithoutTheClientCertificateFailsWithinTheDeadline) {
  EtcdStoreOptions options = Options();
  options.cert_file.clear();
  options.key_file.clear();
  Status status = OpenFails(options);
  EXPECT_EQ(status.code(), StatusCode::kUnavailable) << status.ToString();
  EXPECT_NE(status.message().find(etcd_->endpoint()), std::string::npos) << status.ToString();
  EXPECT_NE(status.message().find("over TLS without a client certificate"), std::string::npos)
      << status.ToString();
}

TEST_F(EtcdTlsTest, WithoutTheCaFailsWithinTheDeadline) {
  // The system's roots, which do not hold the test CA.
  EtcdStoreOptions options = Options();
  options.ca_file.clear();
  Status status = OpenFails(options);
  EXPECT_EQ(status.code(), StatusCode::kUnavailable) << status.ToString();
  EXPECT_NE(status.message().find(etcd_->endpoint()), std::string::npos) << status.ToString();
  EXPECT_NE(status.message().find("certificate verify failed"), std::string::npos)
      << status.ToString();
  EXPECT_NE(status.message().find("system's CA roots"), std::string::npos) << status.ToString();
}

TEST_F(EtcdTlsTest, AServerSignedByAnotherCaFailsWithinTheDeadline) {
  EtcdStoreOptions options = Options();
  options.ca_file = etcd_->File("other-ca.pem");
  Status status = OpenFails(options);
  EXPECT_EQ(status.code(), StatusCode::kUnavailable) << status.ToString();
  EXPECT_NE(status.message().find("certificate verify failed"), std::string::npos)
      << status.ToString();
}

TEST_F(EtcdTlsTest, PlaintextToATlsMemberFailsWithinTheDeadline) {
  EtcdStoreOptions options = Options();
  options.ca_file.clear();
  options.cert_file.clear();
  options.key_file.clear();
  Status status = OpenFails(options);
  EXPECT_EQ(status.code(), StatusCode::kUnavailable) << status.ToString();
  EXPECT_NE(status.message().find("over plaintext"), std::string::npos) << status.ToString();
}

TEST_F(EtcdTlsTest, AMissingCertificateFileIsNamed) {
  EtcdStoreOptions options = Options();
  options.cert_file = etcd_->File("absent.pem");
  auto store = EtcdStore::Open(options);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(store.status().message().find("absent.pem"), std::string::npos)
      << store.status().ToString();
}

TEST_F(EtcdTlsTest, ATokenEtcdInvalidatedIsRenewedOnTheNextCall) {
  auto store = EtcdStore::Open(Options());
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  WriteBatch first;
  first.jobs = {Job(1)};
  ASSERT_TRUE((*store)->Commit(first).ok());
  // Turning auth off and on again drops every simple token etcd handed out.
  ASSERT_TRUE(etcd_->Etcdctl({"auth", "disable"}).ok()) << etcd_->ToolOutput();
  ASSERT_TRUE(etcd_->Etcdctl({"auth", "enable"}, /*as_root=*/false).ok()) << etcd_->ToolOutput();
  const size_t rejected_before = Count(etcd_->Log(), "invalid auth token");

  WriteBatch second;
  second.jobs = {Job(2)};
  Status status = (*store)->Commit(second);
  EXPECT_TRUE(status.ok()) << status.ToString();
  EXPECT_EQ(JobIds(**store), (std::vector<uint64_t>{1, 2}));
  // etcd did refuse the old token: the renewal was exercised, not skipped.
  EXPECT_GT(Count(etcd_->Log(), "invalid auth token"), rejected_before);
  EXPECT_TRUE((*store)->Close().ok());
}

}  // namespace
}  // namespace tessera
