#include "cli/client_config_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace tessera {
namespace {

Status Errno(const std::string& what) {
  return UnavailableError(what + ": " + std::strerror(errno));
}

// Makes `dir` (and missing parents) with mode 0700 for the last one.
Status MakeDirs(const std::string& dir) {
  for (size_t at = 1; at <= dir.size(); ++at) {
    if (at != dir.size() && dir[at] != '/') {
      continue;
    }
    const std::string part = dir.substr(0, at);
    if (::mkdir(part.c_str(), at == dir.size() ? 0700 : 0755) != 0 && errno != EEXIST) {
      return Errno("cannot make " + part);
    }
  }
  return ::chmod(dir.c_str(), 0700) == 0 ? Status::Ok() : Errno("cannot chmod " + dir);
}

StatusOr<nlohmann::json> ReadObject(const std::string& path, bool* exists) {
  std::ifstream in(path, std::ios::binary);
  *exists = static_cast<bool>(in);
  if (!in) {
    return nlohmann::json::object();
  }
  std::ostringstream text;
  text << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, false);
  if (!j.is_object()) {
    return InvalidArgumentError(path + ": not a JSON object");
  }
  return j;
}

}  // namespace

std::string ClientConfigPath(const EnvLookup& env) {
  std::optional<std::string> xdg = env("XDG_CONFIG_HOME");
  if (xdg.has_value() && !xdg->empty() && xdg->front() == '/') {
    return *xdg + "/tessera/config.json";
  }
  std::optional<std::string> home = env("HOME");
  if (home.has_value() && !home->empty()) {
    return *home + "/.config/tessera/config.json";
  }
  return "";
}

StatusOr<std::optional<SavedLogin>> ReadSavedLogin(const std::string& path) {
  bool exists = false;
  TESSERA_ASSIGN_OR_RETURN(nlohmann::json j, ReadObject(path, &exists));
  if (!exists) {
    return std::optional<SavedLogin>();
  }
  SavedLogin login;
  for (auto [key, target] :
       {std::pair{"server", &login.server}, std::pair{"token", &login.token}}) {
    if (!j.contains(key)) {
      continue;
    }
    if (!j[key].is_string()) {
      return InvalidArgumentError(path + ": " + key + " must be a string");
    }
    *target = j[key].get<std::string>();
  }
  return std::optional<SavedLogin>(login);
}

Status WriteSavedLogin(const std::string& path, const SavedLogin& login) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos || slash == 0) {
    return InvalidArgumentError("the config file needs an absolute path, got '" + path + "'");
  }
  TESSERA_RETURN_IF_ERROR(MakeDirs(path.substr(0, slash)));
  bool exists = false;
  StatusOr<nlohmann::json> j = ReadObject(path, &exists);
  nlohmann::json out = j.ok() ? *j : nlohmann::json::object();  // a broken file is replaced
  out["server"] = login.server;
  if (login.token.empty()) {
    out.erase("token");
  } else {
    out["token"] = login.token;
  }
  const std::string text = out.dump(2) + "\n";
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    return Errno("cannot write " + tmp);
  }
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      Status st = Errno("cannot write " + tmp);
      ::close(fd);
      ::unlink(tmp.c_str());
      return st;
    }
    done += static_cast<size_t>(n);
  }
  // fchmod: an O_CREAT mode is masked by the umask, and an old file may have been wider.
  const bool ok = ::fchmod(fd, 0600) == 0 && ::fsync(fd) == 0;
  ::close(fd);
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    Status st = Errno("cannot replace " + path);
    ::unlink(tmp.c_str());
    return st;
  }
  return Status::Ok();
}

}  // namespace tessera
