// YamlReader: the one kit for reading hand-written YAML (queue configuration, scenario
// files) into typed values, with one error format:
//
//   [file: ][path: ]message[ (line L, column C)]
//
// where path is the YAML path of the value ("queues[2].quota.gpu"). Maps reject
// repeated keys and keys not allowed; null reads as "" for a string and as an empty
// list, so `key:` and `key: ""` agree. Job specs are read as JSON documents instead
// (api/json_fields.h), after YAML is converted to JSON with the same positions.
// Thread safety: const methods only; share freely.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace tessera {

class YamlReader {
 public:
  // `file` prefixes every error ("" for none).
  explicit YamlReader(std::string file = "") : file_(std::move(file)) {}

  using KeyVisit = std::function<Status(const std::string& key, const YAML::Node& value,
                                        const std::string& path)>;
  using EntryVisit = std::function<Status(const YAML::Node& entry, const std::string& path)>;

  // InvalidArgument in the format above.
  Status Error(std::string_view path, const YAML::Node& node, std::string_view message) const;

  // Calls visit(key, value, path of the value) for each entry of the map at `path`,
  // rejecting keys that are not scalars, repeated, or not in `allowed` (any key when
  // `allowed` is empty).
  Status ForEachKey(const YAML::Node& map, const std::string& path,
                    const std::vector<std::string_view>& allowed, const KeyVisit& visit) const;
  // Calls visit(entry, path[i]) for each entry of the list at `path`.
  Status ForEachEntry(const YAML::Node& list, const std::string& path,
                      const EntryVisit& visit) const;

  StatusOr<std::string> String(const YAML::Node& node, const std::string& path) const;
  StatusOr<int64_t> Int(const YAML::Node& node, const std::string& path) const;
  StatusOr<int64_t> NonNegative(const YAML::Node& node, const std::string& path) const;
  // true/false (also yes/no).
  StatusOr<bool> Bool(const YAML::Node& node, const std::string& path) const;
  // A list of strings.
  StatusOr<std::vector<std::string>> Strings(const YAML::Node& node, const std::string& path) const;

  // The number of YAML documents in `text`, counting no further than `limit`. Use it
  // before YAML::Load on user input, never YAML::LoadAll: yaml-cpp 0.7 reports a stray
  // token after a document ("{},") as an endless run of empty documents, and LoadAll
  // never returns. Throws YAML::Exception on malformed text, as the parser does.
  static int CountDocuments(const std::string& text, int limit = 2);

  // " (line 3, column 7)" for a node read from text; "" for one built in code.
  static std::string At(const YAML::Node& node);
  static std::string At(const YAML::Mark& mark);
  // The node's 1-based line, or 0 when it has none.
  static int LineOf(const YAML::Node& node);
  // What a node is, for messages: 'scalar', a list, a map, nothing.
  static std::string Describe(const YAML::Node& node);

 private:
  std::string file_;
};

}  // namespace tessera
