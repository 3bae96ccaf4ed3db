// The queues' JSON (views/queue_views.h).
#include "server/views/queue_views.h"

namespace tessera {
namespace {

nlohmann::json OrNull(const std::optional<int64_t>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

nlohmann::json ResourcesJson(const QueueViewInputs& in, QueueId q) {
  nlohmann::json resources = nlohmann::json::array();
  for (size_t r = 0; r < in.tree.resources().size(); ++r) {
    const Quota& quota = in.tree.quota(q, r);
    resources.push_back({{"resource", ResourceNameString(in.tree.resources()[r], in.catalog)},
                         {"nominal", quota.nominal},
                         {"borrowing_limit", OrNull(quota.borrowing_limit)},
                         {"lending_limit", OrNull(quota.lending_limit)},
                         {"used", in.ledger != nullptr ? in.ledger->Usage(q, r) : 0}});
  }
  return resources;
}

}  // namespace

nlohmann::json QueuesJson(const QueueViewInputs& in) {
  nlohmann::json out = nlohmann::json::array();
  for (size_t i = 0; i < in.tree.size(); ++i) {
    const QueueId q(i);
    const QueueNodeSpec& spec = in.tree.spec(q);
    const bool queue = in.tree.is_queue(q);
    const QueueId parent = in.tree.parent(q);
    auto c = in.jobs.find(spec.name);
    auto bound = in.max_pending.find(spec.name);
    out.push_back({{"name", spec.name},
                   {"kind", queue ? "queue" : "cohort"},
                   {"parent", parent.valid() ? nlohmann::json(in.tree.spec(parent).name)
                                             : nlohmann::json(nullptr)},
                   {"tenant", queue ? nlohmann::json(in.tree.tenant(q)) : nlohmann::json(nullptr)},
                   {"weight", spec.weight},
                   {"fair_share", i < in.fair_share.size() ? in.fair_share[i] : nullptr},
                   {"pending", c != in.jobs.end() ? c->second.first : 0},
                   {"running", c != in.jobs.end() ? c->second.second : 0},
                   {"max_pending", queue && bound != in.max_pending.end()
                                       ? nlohmann::json(bound->second)
                                       : nlohmann::json(nullptr)},
                   {"resources", ResourcesJson(in, q)}});
  }
  return out;
}

}  // namespace tessera
