#include "api/queue_limits.h"

#include "base/strings.h"

namespace tessera {

StatusOr<int64_t> ReadMaxPending(const YAML::Node& node, const std::string& path) {
  const std::string text = node.IsScalar() ? node.Scalar() : "";
  StatusOr<int64_t> v = ParseInt64(text);
  if (!node.IsScalar() || !v.ok() || *v < 1 || *v > kMaxMaxPending) {
    return InvalidArgumentError(path + ": maxPending must be a whole number of jobs in 1.." +
                                std::to_string(kMaxMaxPending) + ", got '" +
                                text.substr(0, 40) + "'");
  }
  return *v;
}

StatusOr<std::map<std::string, int64_t>> QueueMaxPending(std::string_view yaml) {
  std::map<std::string, int64_t> out;
  try {
    const YAML::Node root = YAML::Load(std::string(yaml));
    if (!root.IsMap() || !root["queues"] || !root["queues"].IsSequence()) {
      return out;
    }
    size_t i = 0;
    for (const YAML::Node& q : root["queues"]) {
      const std::string path = "queues[" + std::to_string(i++) + "]";
      if (!q.IsMap() || !q["name"]) {
        continue;
      }
      int64_t bound = kDefaultMaxPending;
      if (q["maxPending"]) {
        TESSERA_ASSIGN_OR_RETURN(bound, ReadMaxPending(q["maxPending"], path + ".maxPending"));
      }
      out[q["name"].as<std::string>()] = bound;
    }
  } catch (const YAML::Exception& e) {
    return InvalidArgumentError("queue config: " + e.msg);
  }
  return out;
}

}  // namespace tessera
