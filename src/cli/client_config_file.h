// The CLI's saved login: `tessera login` keeps the controller's address and a token in
// $XDG_CONFIG_HOME/tessera/config.json (default ~/.config/tessera/config.json) as
// {"server": URL, "token": TOKEN}; the Python client reads the same file and keys.
// The directory is made 0700 and the file written 0600, atomically (a temporary file in
// the same directory, fsynced, then renamed over the old one), so that a reader never
// sees half a file and no other user can read the token.
// Thread safety: functions; concurrent writers of one file each leave a whole file.
#pragma once

#include <optional>
#include <string>

#include "base/status.h"
#include "cli/api_client.h"

namespace tessera {

struct SavedLogin {
  std::string server;  // "" when none
  std::string token;   // "" when none

  bool operator==(const SavedLogin&) const = default;
};

// The config file's path from XDG_CONFIG_HOME, else HOME/.config; "" when neither is set.
std::string ClientConfigPath(const EnvLookup& env);

// The saved login; nullopt when the file does not exist. InvalidArgument when it is not a
// JSON object or `server`/`token` are not strings.
StatusOr<std::optional<SavedLogin>> ReadSavedLogin(const std::string& path);

// Writes `login` (other keys already in the file are kept), making the directory.
Status WriteSavedLogin(const std::string& path, const SavedLogin& login);

}  // namespace tessera
