// The node sets behind "never fits": every node the controller knows and the admin has
// not removed (up or down: a node whose agent is silent, or not back since a restart,
// still counts), or only those up, each with its drains (a node waiting to take a new
// inventory counts as drained); or every known node as if no drain held (a drain ends:
// what fits only drained nodes waits for it rather than being refused). Built from the node registry, so that a verdict does not
// wait for a scheduling cycle to see a node come or go.
// Thread safety: none of its own; the caller holds the controller's core lock.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "model/gpu_catalog.h"
#include "server/gpu_task_defaults.h"
#include "server/job_views.h"
#include "server/node_registry.h"
#include "server/pending_reasons.h"

namespace tessera {

enum class NodeSet { kKnown, kUp, kKnownUndrained };

// Of the set's names, specs and drains: equal fingerprints, equal verdicts.
uint64_t NodeSetFingerprint(const NodeRegistry& nodes, NodeSet set);
// The verdicts against `set`: `last` when its fingerprint is the set's, else new ones;
// null when the nodes' specs do not make a cluster (no verdict: nothing is refused).
std::shared_ptr<const FitCache> NodeSetFit(const NodeRegistry& nodes, const GpuCatalog& catalog,
                                           NodeSet set, std::shared_ptr<const FitCache> last);
// The known nodes that are down, by name.
std::vector<DownNode> DownNodes(const NodeRegistry& nodes);
// The known nodes that are up.
size_t NodesUp(const NodeRegistry& nodes);
// The "never fits" verdicts of `c` (fit, fit_up, fit_undrained) and its down nodes from
// `nodes`, each reusing that of `last` while its node set is unchanged. True when the
// undrained set's verdicts were made afresh (or there are none): its fingerprint covers
// the nodes' specs, so what is made from those specs must be made again too.
bool SetFitVerdicts(const NodeRegistry& nodes, const GpuCatalog& catalog,
                    const WaitContext& last, WaitContext& c);

// The verdicts the controller publishes with the pending jobs' wait context, and the
// per-GPU defaults (gpu_task_defaults.h) made from the same nodes. Remade when the node
// set changed (SetFitVerdicts), and, before a submission is judged, as soon as a node
// came, went, was drained or held since they were made (MarkStale), so that a node that
// just registered counts at once, without waiting for a cycle.
class FitVerdicts {
 public:
  explicit FitVerdicts(const GpuCatalog& catalog) : catalog_(&catalog), defaults_(catalog) {}
  // A node came, went, was drained or held: the next Refresh publishes again.
  void MarkStale() { stale_ = true; }
  // Publishes `c` to `views` with the verdicts from `nodes`, reusing the published ones
  // for an unchanged node set.
  void Publish(const NodeRegistry& nodes, PublishedJobs& views, std::shared_ptr<WaitContext> c);
  // When stale: the published context again, with verdicts and nodes up from `nodes`.
  void Refresh(const NodeRegistry& nodes, PublishedJobs& views);
  // The per-GPU defaults of the last published nodes into `jobs` (GpuTaskDefaults::ApplyAll).
  void ApplyDefaults(std::string_view queues_yaml, std::span<JobSubmission> jobs) {
    defaults_.ApplyAll(queues_yaml, jobs);
  }

 private:
  const GpuCatalog* catalog_;
  GpuTaskDefaults defaults_;
  bool stale_ = true;
};

}  // namespace tessera
