// The scenario file parser's internals, shared by scenario.cc (the file, the cluster,
// the jobs) and scenario_expect.cc (the checks). Not part of the sim/ API.
// Thread safety: one Parser per parse.
#pragma once


#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <iomanip>
#include <set>
#include <sstream>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "api/queue_config.h"
#include "base/strings.h"
#include "model/job.h"
#include "plugins/job_policies.h"


namespace tessera::scenario_internal {


inline constexpr Micros kSecond = 1'000'000;
inline constexpr std::string_view kAllPresets = "all-presets";

inline std::string Lines(const YAML::Node& node) {
  if (!node.IsDefined()) {
    return "";
  }
  const YAML::Mark mark = node.Mark();
  if (mark.is_null()) {
    return "";
  }
  return " (line " + std::to_string(mark.line + 1) + ", column " + std::to_string(mark.column + 1) +
         ")";
}

inline int LineOf(const YAML::Node& node) {
  if (!node.IsDefined() || node.Mark().is_null()) {
    return 0;
  }
  return node.Mark().line + 1;
}

inline std::string Describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
      return "nothing";
    case YAML::NodeType::Scalar:
      return "'" + node.Scalar() + "'";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a map";
    case YAML::NodeType::Undefined:
      break;
  }
  return "an undefined node";
}

// Reads one scenario file; every error names the file, the YAML path and the line.
class Parser {
 public:
  Parser(std::string file, const GpuCatalog& catalog) : file_(std::move(file)), catalog_(catalog) {}

  StatusOr<Scenario> Parse(const YAML::Node& root);

 private:
  using Visit = std::function<Status(const std::string&, const YAML::Node&, const std::string&)>;

  Status Error(const std::string& path, const YAML::Node& node, std::string_view message) const {
    std::string out = file_ + ": ";
    if (!path.empty()) {
      out += path + ": ";
    }
    out += message;
    out += Lines(node);
    return InvalidArgumentError(std::move(out));
  }

  // Calls visit(key, value, path) for each entry of a map, rejecting repeated keys
  // and keys not in `allowed` (any key when empty).
  Status ForEachKey(const YAML::Node& map, const std::string& path,
                    const std::vector<std::string_view>& allowed, const Visit& visit) const {
    if (!map.IsMap()) {
      return Error(path, map, "expected a map, got " + Describe(map));
    }
    std::vector<std::string> seen;
    for (const auto& entry : map) {
      const YAML::Node key = entry.first;
      const YAML::Node value = entry.second;
      if (!key.IsScalar()) {
        return Error(path, key, "expected a plain key, got " + Describe(key));
      }
      const std::string& name = key.Scalar();
      if (!allowed.empty() && std::find(allowed.begin(), allowed.end(), name) == allowed.end()) {
        std::vector<std::string> expected(allowed.begin(), allowed.end());
        return Error(path, key,
                     "unknown key '" + name + "'; expected one of " + Join(expected, ", "));
      }
      if (std::find(seen.begin(), seen.end(), name) != seen.end()) {
        return Error(path, key, "key '" + name + "' appears twice");
      }
      seen.push_back(name);
      TESSERA_RETURN_IF_ERROR(visit(name, value, path.empty() ? name : path + "." + name));
    }
    return Status::Ok();
  }

  Status ForEachEntry(
      const YAML::Node& list, const std::string& path,
      const std::function<Status(const YAML::Node&, const std::string&)>& read) const {
    if (!list.IsSequence()) {
      return Error(path, list, "expected a list, got " + Describe(list));
    }
    for (size_t i = 0; i < list.size(); ++i) {
      TESSERA_RETURN_IF_ERROR(read(YAML::Node(list[i]), path + "[" + std::to_string(i) + "]"));
    }
    return Status::Ok();
  }

  StatusOr<std::string> String(const YAML::Node& node, const std::string& path) const {
    if (!node.IsScalar()) {
      return Error(path, node, "expected a string, got " + Describe(node));
    }
    return node.Scalar();
  }

  StatusOr<int64_t> Int(const YAML::Node& node, const std::string& path) const {
    if (!node.IsScalar()) {
      return Error(path, node, "expected an integer, got " + Describe(node));
    }
    StatusOr<int64_t> v = ParseInt64(node.Scalar());
    if (!v.ok()) {
      return Error(path, node, v.status().message());
    }
    return *v;
  }

  StatusOr<int64_t> NonNegative(const YAML::Node& node, const std::string& path) const {
    TESSERA_ASSIGN_OR_RETURN(int64_t v, Int(node, path));
    if (v < 0) {
      return Error(path, node, "must not be negative, got " + std::to_string(v));
    }
    return v;
  }

  // Whole seconds, >= 0.
  StatusOr<Micros> Time(const YAML::Node& node, const std::string& path) const {
    if (!node.IsScalar()) {
      return Error(path, node, "expected whole seconds, got " + Describe(node));
    }
    StatusOr<int64_t> v = ParseInt64(node.Scalar());
    if (!v.ok() || *v < 0 || *v > (int64_t{1} << 40)) {
      return Error(path, node, "expected whole seconds (>= 0), got '" + node.Scalar() + "'");
    }
    return *v * kSecond;
  }

  StatusOr<bool> Bool(const YAML::Node& node, const std::string& path) const {
    if (node.IsScalar()) {
      const std::string& s = node.Scalar();
      if (s == "true" || s == "yes") {
        return true;
      }
      if (s == "false" || s == "no") {
        return false;
      }
    }
    return Error(path, node, "expected true or false, got " + Describe(node));
  }

  StatusOr<int64_t> Quantity(const YAML::Node& node, ResourceKind kind,
                             const std::string& path) const {
    StatusOr<int64_t> v = ParseResourceQuantity(node, kind);
    if (!v.ok()) {
      return Error(path, node, v.status().message());
    }
    return *v;
  }

  StatusOr<std::vector<std::string>> Names(const YAML::Node& node, const std::string& path) const {
    std::vector<std::string> out;
    TESSERA_RETURN_IF_ERROR(
        ForEachEntry(node, path, [&](const YAML::Node& e, const std::string& p) {
          TESSERA_ASSIGN_OR_RETURN(std::string s, String(e, p));
          out.push_back(std::move(s));
          return Status::Ok();
        }));
    return out;
  }

  Status CheckPolicy(const std::string& policy, const YAML::Node& node,
                     const std::string& path) const {
    StatusOr<SchedulerPolicy> p = ParseSchedulerPolicy(policy);
    if (!p.ok()) {
      return Error(path, node, p.status().message());
    }
    return Status::Ok();
  }

  Status ReadOptions(const YAML::Node& node, const std::string& path, ScenarioOptions* o) const;
  Status ReadCluster(const YAML::Node& node, const std::string& path,
                     std::vector<NodeSpec>* nodes) const;
  Status ReadTask(const YAML::Node& node, const std::string& path,
                  std::vector<TaskRequest>* out) const;
  // Completes a task from its GPU fields and appends `count` copies.
  Status FinishTask(TaskRequest t, std::optional<int64_t> gpus_milli, std::optional<int64_t> milli,
                    int64_t count, const YAML::Node& node, const std::string& path,
                    std::vector<TaskRequest>* out) const;
  // One entry of `jobs`: one job, or with `repeat` several named "<name>-<i>".
  Status ReadJob(const YAML::Node& node, const std::string& path, const QueueTree& tree,
                 const std::string& default_queue, std::vector<SimJob>* out) const;
  Status ReadExpect(const YAML::Node& node, const std::string& path, Scenario* s) const;
  Status ReadCheck(const std::string& kind, const YAML::Node& value, const YAML::Node& key,
                   const std::string& path, ScenarioCheck* check) const;
  Status KnownJob(const std::string& name, const YAML::Node& node, const std::string& path) const {
    if (!job_names_.contains(name)) {
      return Error(path, node, "no job named '" + name + "'");
    }
    return Status::Ok();
  }

  std::string file_;
  const GpuCatalog& catalog_;
  std::set<std::string> job_names_;
  std::vector<std::string> job_order_;  // the same names, in file order
};

}  // namespace tessera::scenario_internal
