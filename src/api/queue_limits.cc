#include "api/queue_limits.h"

#include "api/queue_config.h"
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
  TESSERA_RETURN_IF_ERROR(ForEachQueueEntry(
      yaml, [&](const YAML::Node& q, const std::string& path, const std::string& name) -> Status {
        int64_t bound = kDefaultMaxPending;
        if (q["maxPending"]) {
          TESSERA_ASSIGN_OR_RETURN(bound, ReadMaxPending(q["maxPending"], path + ".maxPending"));
        }
        out[name] = bound;
        return Status::Ok();
      }));
  return out;
}

}  // namespace tessera
