#include "cli/run_command.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/strings.h"
#include "cli/pty_client.h"

namespace tessera {

namespace {

using json = nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

bool Terminal(const std::string& state) {
  return state == "succeeded" || state == "failed" || state == "cancelled";
}

int64_t Int(const json& j, const char* key, int64_t fallback) {
  const auto it = j.find(key);
  return it != j.end() && it->is_number_integer() ? it->get<int64_t>() : fallback;
}

std::string Text(const json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

// One foreground job: its wait, its output, signals and the controller's absences.
class Runner {
 public:
  Runner(ApiClient& client, const RunOptions& o, std::ostream& out, std::ostream& err,
         SignalPipe& signals)
      : client_(client), o_(o), out_(out), err_(err), signals_(signals) {}

  StatusOr<int64_t> Submit(const std::string& body);
  int Run(int64_t id);

 private:
  // Calls `call` again while the controller is unreachable, up to reconnect_ms each time;
  // never a second submission (the POST carries its idempotency key).
  StatusOr<ApiResponse> Call(const std::function<StatusOr<ApiResponse>()>& call);
  StatusOr<json> GetJob();
  // Waits up to `ms`, acting on the signals that come meanwhile.
  void Pause(int64_t ms);
  void OnSignal(int sig);
  void MaybeCancel();
  int Interrupted() const { return 128 + signal_; }
  int GiveUp(const Status& status);
  int Follow();
  int Attach();
  int WaitForEnd(std::optional<int32_t> status_seen);
  int Finish(const json& job);

  ApiClient& client_;
  const RunOptions& o_;
  std::ostream& out_;
  std::ostream& err_;
  SignalPipe& signals_;
  int64_t id_ = 0;
  std::string path_;
  int signal_ = 0;  // the first SIGINT/SIGTERM/SIGHUP: cancel the job
  bool cancel_sent_ = false;
  bool abort_ = false;  // a second one: exit without waiting
};

StatusOr<int64_t> Runner::Submit(const std::string& body) {
  const ExtraHeaders headers{{"Idempotency-Key", o_.job.idempotency_key.empty()
                                                     ? NewIdempotencyKey()
                                                     : o_.job.idempotency_key}};
  TESSERA_ASSIGN_OR_RETURN(ApiResponse response, Call([&] {
                             return client_.Post("/v1/jobs", body, "application/json", headers);
                           }));
  TESSERA_ASSIGN_OR_RETURN(json job, ParseJsonBody(response.body, "POST /v1/jobs"));
  const int64_t id = Int(job, "id", 0);
  if (id <= 0) {
    return InternalError("the controller's answer to POST /v1/jobs has no job id");
  }
  return id;
}

StatusOr<ApiResponse> Runner::Call(const std::function<StatusOr<ApiResponse>()>& call) {
  const auto deadline = SteadyClock::now() + std::chrono::milliseconds(o_.reconnect_ms);
  bool lost = false;
  while (true) {
    StatusOr<ApiResponse> r = call();
    if (r.ok() || r.status().code() != StatusCode::kUnavailable) {
      if (lost && r.ok()) {
        err_ << "tessera: the controller answers again\n";
      }
      return r;
    }
    if (!lost) {
      err_ << "tessera: " << r.status().message() << "; trying again for up to "
           << o_.reconnect_ms / 1000 << "s\n";
      lost = true;
    }
    if (SteadyClock::now() >= deadline || abort_) {
      return r;
    }
    Pause(500);
  }
}

StatusOr<json> Runner::GetJob() {
  TESSERA_ASSIGN_OR_RETURN(ApiResponse r, Call([&] { return client_.Get(path_); }));
  return ParseJsonBody(r.body, "GET " + path_);
}

void Runner::Pause(int64_t ms) {
  const int sig = signals_.Wait(static_cast<int>(ms));
  if (sig != 0) {
    OnSignal(sig);
  }
  for (int more = signals_.Take(); more != 0; more = signals_.Take()) {
    OnSignal(more);
  }
}

void Runner::OnSignal(int sig) {
  if (sig == SIGWINCH) {
    return;
  }
  if (signal_ == 0) {
    signal_ = sig;
    err_ << "tessera: cancelling job " << id_ << " (again to stop waiting)\n";
    MaybeCancel();
  } else {
    abort_ = true;
  }
}

void Runner::MaybeCancel() {
  if (signal_ == 0 || cancel_sent_ || id_ == 0) {
    return;
  }
  // One try at a time: the loops call again until it went through.
  StatusOr<ApiResponse> r = client_.Post(path_ + "/cancel", "", "application/json");
  cancel_sent_ = r.ok() || r.status().code() != StatusCode::kUnavailable;
  if (!r.ok() && cancel_sent_) {
    err_ << "tessera: cannot cancel job " << id_ << ": " << r.status().message() << "\n";
  }
}

int Runner::GiveUp(const Status& status) {
  const int code = ReportError(status, err_);
  err_ << "tessera: job " << id_ << " goes on without this command: `tessera logs -f " << id_
       << "` follows it, `tessera cancel " << id_ << "` ends it\n";
  return code;
}

int Runner::Run(int64_t id) {
  id_ = id;
  path_ = "/v1/jobs/" + std::to_string(id);
  std::string last_reason;
  while (true) {
    MaybeCancel();
    if (abort_) {
      return Interrupted();
    }
    StatusOr<json> job = GetJob();
    if (!job.ok()) {
      return GiveUp(job.status());
    }
    const std::string state = Text(*job, "state");
    if (state != "pending") {
      if (Terminal(state)) {
        return Follow();  // ended before we looked: its output, then its code
      }
      break;
    }
    const std::string reason = Text(*job, "reason");
    if (reason != last_reason) {
      err_ << "tessera: job " << id_ << " pending" << (reason.empty() ? "" : ": " + reason) << "\n";
      last_reason = reason;
    }
    Pause(o_.poll_interval_ms);
  }
  return o_.pty ? Attach() : Follow();
}

int Runner::Follow() {
  std::vector<int64_t> tasks = {o_.task};
  if (o_.all_tasks) {
    StatusOr<json> job = GetJob();
    if (!job.ok()) {
      return GiveUp(job.status());
    }
    tasks.clear();
    for (int64_t t = 0; t < Int(*job, "replicas", 1); ++t) {
      tasks.push_back(t);
    }
  }
  std::map<int64_t, int64_t> offset;
  std::map<int64_t, std::string> partial;  // --all-tasks: a line not yet ended
  auto print = [&](int64_t task, const std::string& bytes) {
    if (!o_.all_tasks) {
      out_ << bytes;
      return;
    }
    std::string& line = partial[task];
    for (char c : bytes) {
      line += c;
      if (c == '\n') {
        out_ << task << ": " << line;
        line.clear();
      }
    }
  };
  const std::string logs = path_ + "/logs";
  while (true) {
    MaybeCancel();
    if (abort_) {
      return Interrupted();
    }
    bool progress = false;
    bool ended = true;
    for (int64_t task : tasks) {
      StatusOr<ApiResponse> r = Call([&] {
        return client_.Get(
            logs, {{"task", std::to_string(task)}, {"offset", std::to_string(offset[task])}});
      });
      if (!r.ok()) {
        return GiveUp(r.status());
      }
      StatusOr<int64_t> next = ParseInt64(r->Header("X-Log-Offset"));
      const int64_t moved = next.ok() && *next > offset[task]
                                ? *next
                                : offset[task] + static_cast<int64_t>(r->body.size());
      if (!r->body.empty() && moved > offset[task]) {
        print(task, r->body);
        progress = true;
      }
      offset[task] = moved;
      ended = ended && Terminal(r->Header("X-Job-State"));
    }
    out_.flush();
    if (progress) {
      continue;
    }
    if (ended) {
      break;
    }
    Pause(o_.poll_interval_ms);
  }
  for (const auto& [task, line] : partial) {
    if (!line.empty()) {
      out_ << task << ": " << line << "\n";
    }
  }
  out_.flush();
  StatusOr<json> job = GetJob();
  if (!job.ok()) {
    return GiveUp(job.status());
  }
  return Finish(*job);
}

int Runner::Attach() {
  const std::string attach = path_ + "/attach";
  json where;
  while (true) {
    MaybeCancel();
    if (abort_) {
      return Interrupted();
    }
    StatusOr<ApiResponse> r = Call([&] {
      return client_.Get(attach, {{"task", std::to_string(o_.task)}});
    });
    if (!r.ok()) {
      return GiveUp(r.status());
    }
    StatusOr<json> body = ParseJsonBody(r->body, "GET " + attach);
    if (!body.ok()) {
      return GiveUp(body.status());
    }
    if (body->value("ready", false)) {
      where = std::move(*body);
      break;
    }
    if (Terminal(Text(*body, "state")) || signal_ != 0) {
      return Follow();  // it ended (or is being cancelled) before its terminal was ready
    }
    Pause(o_.poll_interval_ms);
  }
  StatusOr<int> sock =
      ConnectTcp(Text(where, "address"), static_cast<int>(Int(where, "port", 0)), 5000);
  if (!sock.ok()) {
    err_ << "tessera: " << sock.status().message() << "; showing the job's output instead\n";
    return Follow();
  }
  StatusOr<TerminalEnd> end = InternalError("not attached");
  {
    TerminalMode mode(o_.in_fd);  // restored before anything more is printed
    end = RelayTerminal(*sock, Text(where, "secret"), o_.in_fd, o_.out_fd, signals_);
  }
  if (!end.ok()) {
    err_ << "tessera: " << end.status().message() << "\n";
    return WaitForEnd(std::nullopt);
  }
  if (!end->refused.empty()) {
    err_ << "tessera: the task's terminal refused this client: " << end->refused << "\n";
    return 1;
  }
  if (end->signal != 0) {
    OnSignal(end->signal);
  }
  return WaitForEnd(end->exited ? std::optional<int32_t>(end->status) : std::nullopt);
}

int Runner::WaitForEnd(std::optional<int32_t> status_seen) {
  const auto deadline = SteadyClock::now() + std::chrono::milliseconds(o_.end_wait_ms);
  while (true) {
    MaybeCancel();
    if (abort_) {
      return Interrupted();
    }
    StatusOr<json> job = GetJob();
    if (!job.ok()) {
      if (status_seen.has_value()) {
        return *status_seen;
      }
      return GiveUp(job.status());
    }
    if (Terminal(Text(*job, "state"))) {
      return Finish(*job);
    }
    if (SteadyClock::now() >= deadline) {
      if (status_seen.has_value()) {
        return *status_seen;  // the task's own word, while the controller lags behind
      }
      err_ << "tessera: job " << id_ << " is still " << Text(*job, "state") << "\n";
      return 1;
    }
    Pause(o_.poll_interval_ms);
  }
}

int Runner::Finish(const json& job) {
  const std::string state = Text(job, "state");
  if (signal_ != 0) {
    err_ << "tessera: job " << id_ << " " << state << "\n";
    return Interrupted();
  }
  const auto code = job.find("exit_code");
  const bool has_code = code != job.end() && code->is_number_integer();
  if (state == "succeeded") {
    return 0;
  }
  if (state == "cancelled") {
    err_ << "tessera: job " << id_ << " was cancelled"
         << (Text(job, "reason").empty() ? "" : ": " + Text(job, "reason")) << "\n";
    return 143;
  }
  if (has_code && code->get<int64_t>() != 0) {
    const int64_t c = code->get<int64_t>();
    return c > 0 && c < 256 ? static_cast<int>(c) : 1;
  }
  err_ << "tessera: job " << id_ << " " << state
       << (Text(job, "reason").empty() ? "" : ": " + Text(job, "reason")) << "\n";
  return 1;
}

}  // namespace

int RunJobInForeground(const ClientConfig& config, const RunOptions& o, std::ostream& out,
                       std::ostream& err) {
  if (o.task < 0 || (o.all_tasks && (o.task != 0 || o.pty))) {
    return ReportError(InvalidArgumentError("--all-tasks takes neither --task nor --pty; "
                                            "--task must be >= 0"),
                       err);
  }
  SubmitOptions job = o.job;
  if (o.pty) {
    job.env.push_back("TESSERA_PTY=1");
    const char* term = std::getenv("TERM");  // NOLINT(concurrency-mt-unsafe): one thread
    const bool given = std::any_of(job.env.begin(), job.env.end(),
                                   [](const std::string& kv) { return kv.rfind("TERM=", 0) == 0; });
    if (term != nullptr && !given) {
      job.env.push_back(std::string("TERM=") + term);
    }
  }
  StatusOr<json> spec = BuildJobSpec(job);
  if (!spec.ok()) {
    return ReportError(spec.status(), err);
  }
  StatusOr<std::unique_ptr<ApiClient>> client = ApiClient::Create(config);
  if (!client.ok()) {
    return ReportError(client.status(), err);
  }
  SignalPipe signals({SIGINT, SIGTERM, SIGHUP, SIGWINCH});
  Runner runner(**client, o, out, err, signals);
  StatusOr<int64_t> id = runner.Submit(spec->dump(-1, ' ', false, json::error_handler_t::replace));
  if (!id.ok()) {
    return ReportError(id.status(), err);
  }
  return runner.Run(*id);
}

void AddRunCommand(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<ConnectionFlags>();
  auto o = std::make_shared<RunOptions>();
  CLI::App* cmd = app.add_subcommand(
      "run",
      "Run a job in the foreground, like srun: its output here, its exit code ours "
      "(--pty: an interactive terminal)");
  AddJobFlags(cmd, &o->job);
  cmd->add_option("--task", o->task, "the task whose output is shown (default 0)");
  cmd->add_flag("--all-tasks", o->all_tasks, "every task's output, each line after 'N: '");
  cmd->add_flag("--pty", o->pty,
                "run the task on a terminal and attach this one to it (raw mode; Ctrl-C "
                "goes to the task)");
  cmd->add_option("--idempotency-key", o->job.idempotency_key,
                  "a retried run with the same key makes no second job");
  cmd->add_option("command", o->job.command, "the command and its arguments, after --");
  AddConnectionFlags(cmd, flags.get());
  cmd->callback([flags, o, exit_code] {
    o->job.submit_dir = CurrentDirForJobs();
    StatusOr<ClientConfig> config = ResolveClientConfig(*flags, ProcessEnvironment());
    if (!config.ok()) {
      *exit_code = ReportError(config.status(), std::cerr);
      return;
    }
    *exit_code = RunJobInForeground(*config, *o, std::cout, std::cerr);
  });
}

}  // namespace tessera
