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
#include <optional>
#include <set>
#include <sstream>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "api/job_relations.h"
#include "api/queue_config.h"
#include "api/yaml_reader.h"
#include "base/strings.h"
#include "model/job.h"
#include "plugins/job_policies.h"


namespace tessera::scenario_internal {


inline constexpr Micros kSecond = 1'000'000;
inline constexpr std::string_view kAllPresets = "all-presets";

// Reads one scenario file; every error names the file, the YAML path and the line.
// The YAML kit (api/yaml_reader.h) supplies the walking and the error format.
class Parser : private YamlReader {
 public:
  Parser(std::string file, const GpuCatalog& catalog)
      : YamlReader(file), file_(std::move(file)), catalog_(catalog) {}

  StatusOr<Scenario> Parse(const YAML::Node& root);

 private:
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

  StatusOr<int64_t> Quantity(const YAML::Node& node, ResourceKind kind,
                             const std::string& path) const {
    StatusOr<int64_t> v = ParseResourceQuantity(node, kind);
    if (!v.ok()) {
      return Error(path, node, v.status().message());
    }
    return *v;
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
  // jobs: every job (repeats expanded) into s->jobs, then their `depends`.
  Status ReadJobs(const YAML::Node& node, const QueueTree& tree, const std::string& default_queue,
                  Scenario* s);
  Status ReadJob(const YAML::Node& node, const std::string& path, const QueueTree& tree,
                 const std::string& default_queue, std::vector<SimJob>* out) const;
  // depends: "afterok:j1:j2,afterany:j3" or "afternotok:j1?afterok:j2" of jobs[self],
  // naming jobs submitted before it: the dependency with each job by its index.
  StatusOr<DependencySpec> ReadDepends(const YAML::Node& node, const std::string& path,
                                       const std::vector<SimJob>& jobs, size_t self) const;
  // failures: [{attempt, after, task, exit_code | signal}] of a job with `tasks` tasks.
  // utilisation: PCT | [{after: T, pct: PCT}, ...] (ascending after).
  Status ReadUtilisation(const YAML::Node& node, const std::string& path,
                         std::vector<SimUtilisation>* out) const;
  Status ReadFailures(const YAML::Node& node, const std::string& path, size_t tasks,
                      std::vector<SimFailure>* out) const;
  // events: [{at, node_lost: NODE} | {at, gpu_fault: {node, gpu, xid}} | {at, release:
  // JOB}] on `nodes`; a release sets the held job's SimJob::release in `jobs`.
  Status ReadEvents(const YAML::Node& node, const std::string& path,
                    const std::vector<NodeSpec>& nodes, std::vector<SimJob>* jobs,
                    std::vector<SimClusterEvent>* out) const;
  // One event; a release leaves its job's name in *release (out->at its time).
  Status ReadEvent(const YAML::Node& node, const std::string& path,
                   const std::vector<NodeSpec>& nodes, SimClusterEvent* out,
                   std::optional<std::string>* release) const;
  // repeat: {count, every}.
  Status ReadRepeat(const YAML::Node& node, const std::string& path, int64_t* count,
                    Micros* every) const;
  Status ReadExpect(const YAML::Node& node, const std::string& path, Scenario* s) const;
  Status ReadCheck(const std::string& kind, const YAML::Node& value, const YAML::Node& key,
                   const std::string& path, ScenarioCheck* check) const;
  Status ReadJobList(const YAML::Node& value, const std::string& path, ScenarioCheck* c) const;
  Status ReadEnds(const YAML::Node& value, const std::string& path, ScenarioCheck* c) const;
  Status ReadKeyedCheck(const std::string& kind, const YAML::Node& value, const std::string& path,
                        ScenarioCheck* c) const;
  // A job name, or "prefix*": every job whose name starts with prefix, in file order.
  StatusOr<std::vector<std::string>> JobsNamed(const std::string& name, const YAML::Node& node,
                                               const std::string& path) const;
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
