#include "api/queue_idle.h"

#include <charconv>

#include "api/queue_config.h"
#include "api/units.h"
#include "api/yaml_reader.h"

namespace tessera {
namespace {

const YamlReader kIdleYaml;
constexpr Micros kMinWindow = 60'000'000;

StatusOr<int> ReadPercent(const YAML::Node& node, const std::string& path) {
  TESSERA_ASSIGN_OR_RETURN(std::string text, kIdleYaml.String(node, path));
  std::string_view digits = text;
  if (!digits.empty() && digits.back() == '%') {
    digits.remove_suffix(1);
  }
  int v = -1;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() || v < 0 ||
      v > 100) {
    return kIdleYaml.Error(
        path, node, "expected a whole percentage 0..100 such as 5% or 5, got '" + text + "'");
  }
  return v;
}

}  // namespace

StatusOr<IdlePolicy> ReadIdlePolicy(const YAML::Node& node, const std::string& path) {
  IdlePolicy policy;
  if (node.IsNull()) {
    return policy;
  }
  TESSERA_RETURN_IF_ERROR(kIdleYaml.ForEachKey(
      node, path, {"below", "for", "action"},
      [&](const std::string& key, const YAML::Node& value, const std::string& p) -> Status {
        if (key == "below") {
          TESSERA_ASSIGN_OR_RETURN(policy.below_pct, ReadPercent(value, p));
        } else if (key == "for") {
          TESSERA_ASSIGN_OR_RETURN(std::string text, kIdleYaml.String(value, p));
          StatusOr<int64_t> micros = ParseDurationMicros(text);
          if (!micros.ok()) {
            return kIdleYaml.Error(p, value, std::string(micros.status().message()));
          }
          if (*micros < kMinWindow) {
            return kIdleYaml.Error(p, value,
                                   "the idle window must be at least 1m, got '" + text + "'");
          }
          policy.window = *micros;
        } else {
          TESSERA_ASSIGN_OR_RETURN(std::string text, kIdleYaml.String(value, p));
          if (text == "notify") {
            policy.action = IdleAction::kNotify;
          } else if (text == "requeue") {
            policy.action = IdleAction::kRequeue;
          } else if (text == "cancel") {
            policy.action = IdleAction::kCancel;
          } else {
            return kIdleYaml.Error(p, value,
                                   "expected notify, requeue or cancel, got '" + text + "'");
          }
        }
        return Status::Ok();
      }));
  return policy;
}

StatusOr<std::map<std::string, IdlePolicy>> QueueIdlePolicies(std::string_view yaml) {
  std::map<std::string, IdlePolicy> out;
  TESSERA_RETURN_IF_ERROR(ForEachQueueEntry(
      yaml, [&](const YAML::Node& q, const std::string& path, const std::string& name) -> Status {
        IdlePolicy policy;
        if (q["idle"]) {
          TESSERA_ASSIGN_OR_RETURN(policy, ReadIdlePolicy(q["idle"], path + ".idle"));
        }
        out[name] = policy;
        return Status::Ok();
      }));
  return out;
}

std::string IdlePolicyText(const IdlePolicy& policy) {
  if (policy.below_pct == 0) {
    return "off";
  }
  return "below " + std::to_string(policy.below_pct) + "% for " + FormatDuration(policy.window) +
         ": " + std::string(IdleActionName(policy.action));
}

nlohmann::json IdlePolicyJson(const IdlePolicy& policy) {
  return {{"below_pct", policy.below_pct},
          {"for", FormatDuration(policy.window)},
          {"action", std::string(IdleActionName(policy.action))},
          {"text", IdlePolicyText(policy)}};
}

}  // namespace tessera
