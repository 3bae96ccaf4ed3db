// Fields the CLI adds to a job file before sending it (`tessera submit -f`), keeping the
// rest of the text as written so that the controller's errors still point at the user's
// lines.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "base/status.h"

namespace tessera {

// The job file with `key: value` added (a string or a boolean). A file that sets the key
// itself, or whose shape this cannot extend safely (checked by reading the result back),
// is returned unchanged.
std::string WithField(const std::string& body, bool is_json, const std::string& key,
                      const nlohmann::json& value);

// The job file with `hold_if_unfit: true`: the command line's --hold-if-unfit wins over
// the file's own `hold_if_unfit: false`. An error (naming the field) where the file
// cannot be changed safely, so that the flag is never dropped silently.
StatusOr<std::string> WithHoldIfUnfit(const std::string& body, bool is_json);

}  // namespace tessera
