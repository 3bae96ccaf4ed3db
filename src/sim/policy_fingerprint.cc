#include "sim/policy_fingerprint.h"

#include <cinttypes>
#include <cstdio>
#include <string_view>
#include <utility>

#include "api/queue_config.h"
#include "sim/cluster_preset.h"
#include "sim/job_sim.h"
#include "sim/job_trace.h"
#include "sim/job_workload.h"

namespace tessera {
namespace {

// The probe: small enough to run in well under a second per preset, busy enough that
// every preset queues, preempts (where it may), borrows and reclaims, among three
// queues (rules about a third queue went unseen with two). Run twice: with
// the model's checkpoint wait, and with none (evictions that lose work: with a 30 min
// wait and 30 min checkpoints no eviction loses any, and rules about lost work went
// unseen). Changing the probe changes every fingerprint.
constexpr std::string_view kProbeTrace =
    "jobs=400,seed=38,tenant_weights=3/2/1,gpus=1:50/2:20/4:15/8:15,median=20m,sigma=1.5,"
    "max=1d";
constexpr std::string_view kProbeCluster = "2x8xH100-80GB+4x4xV100-32GB";
constexpr double kProbeLoad = 1.5;
constexpr uint64_t kProbeSeed = 38;
constexpr std::string_view kProbeQueues =
    "cohorts:\n"
    "  - name: probe\n"
    "queues:\n"
    "  - {name: t0, cohort: probe, quota: {gpu: 16}}\n"
    "  - {name: t1, cohort: probe, quota: {gpu: 8}}\n"
    "  - {name: t2, cohort: probe, quota: {gpu: 8}}\n";

// FNV-1a, 64 bits: stable across builds and platforms, unlike std::hash.
struct Fnv {
  uint64_t h = 14695981039346656037ULL;
  void Add(std::string_view s) {
    for (char c : s) {
      h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
    }
    h = (h ^ 0xffU) * 1099511628211ULL;  // a separator: ("ab","c") != ("a","bc")
  }
  void Add(int64_t v) { Add(std::to_string(v)); }
  std::string Hex() const {
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016" PRIx64, h);
    return buf;
  }
};

// Round-trip precision: the same double always prints the same.
std::string CanonNum(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

std::string CanonNum(int64_t v) { return std::to_string(v); }

std::string ModelLine(const DefaultSimModel& m) {
  const JobSimOptions sim;
  const RuntimePredictor::Options& p = sim.predictor;
  return "model: placement=" + m.placement + " restart_overhead=" + CanonNum(m.restart_overhead) +
         " checkpoint_wait=" + CanonNum(m.checkpoint_wait) +
         " checkpoint_interval=" + CanonNum(m.checkpoint_interval) +
         " checkpoint_on_signal=" + CanonNum(int64_t{m.checkpoint_on_signal}) +
         " tick=" + CanonNum(sim.tick) + " stop_grace=" + CanonNum(sim.stop_grace) +
         " predictor_method=" + CanonNum(static_cast<int64_t>(p.method)) +
         " predictor_quantile=" + CanonNum(p.quantile) +
         " predictor_min_samples=" + CanonNum(int64_t{p.min_samples}) +
         " predictor_decay=" + CanonNum(p.decay) +
         " predictor_calibration_rate=" + CanonNum(p.calibration_rate) +
         " predictor_default_runtime=" + CanonNum(p.default_runtime);
}

// One preset's schedule of the probe, with `checkpoint_wait`, added to *fnv.
Status HashProbeRun(const std::string& name, Micros checkpoint_wait, const ClusterSetup& setup,
                    const std::vector<SimJob>& jobs, const DefaultSimModel& model,
                    const GpuCatalog& catalog, Fnv* fnv) {
  TESSERA_ASSIGN_OR_RETURN(SchedulerPolicy policy, ParseSchedulerPolicy(name));
  policy.options.restart_overhead = model.restart_overhead;
  policy.options.checkpoint_wait = checkpoint_wait;
  JobSimOptions options;
  options.policy = std::move(policy);
  options.placement = model.placement;
  options.seed = kProbeSeed;
  options.record_usage = false;
  TESSERA_ASSIGN_OR_RETURN(JobSimResult r,
                           RunJobSimulation(setup.nodes, setup.queues, jobs, options, catalog));
  fnv->Add(name);
  fnv->Add(checkpoint_wait);
  for (const JobOutcome& j : r.run.jobs) {
    fnv->Add(j.name);
    fnv->Add(j.first_start);
    fnv->Add(j.finish);
    fnv->Add(int64_t{j.preemptions});
    fnv->Add(int64_t{j.attempts});
  }
  return Status::Ok();
}

// Every preset's schedule of the probe, hashed.
StatusOr<std::string> ProbeHash(const DefaultSimModel& model, const GpuCatalog& catalog) {
  TESSERA_ASSIGN_OR_RETURN(JobTrace trace, MakeSyntheticTrace(kProbeTrace));
  TESSERA_ASSIGN_OR_RETURN(ClusterSetup setup,
                           MakeClusterPreset(kProbeCluster, TraceTenants(trace), "", catalog));
  TESSERA_ASSIGN_OR_RETURN(setup.queues,
                           ParseQueueTreeText(kProbeQueues, catalog, "the fingerprint's probe"));
  int64_t gpus = 0;
  for (const NodeSpec& n : setup.nodes) {
    gpus += static_cast<int64_t>(n.gpus.size());
  }
  ScaleToLoad(&trace, gpus, kProbeLoad);
  WorkloadOptions w;
  w.gpus_per_node = setup.gpus_per_node;
  w.checkpoint_interval = model.checkpoint_interval;
  w.checkpoint_on_signal = model.checkpoint_on_signal;
  w.seed = kProbeSeed;
  const std::vector<SimJob> jobs = JobsFromTrace(trace, w);
  Fnv fnv;
  for (const Micros checkpoint_wait : {model.checkpoint_wait, Micros{0}}) {
    for (const std::string& name : SchedulerPresetNames()) {
      TESSERA_RETURN_IF_ERROR(
          HashProbeRun(name, checkpoint_wait, setup, jobs, model, catalog, &fnv));
    }
  }
  return fnv.Hex();
}

}  // namespace

std::string PolicyOptionsLine(const SchedulerPolicy& p) {
  const SchedulerOptions& o = p.options;
  std::string thresholds;
  for (double t : o.las_thresholds) {
    thresholds += (thresholds.empty() ? "" : "/") + CanonNum(t);
  }
  auto b = [](bool v) { return CanonNum(int64_t{v}); };
  return p.name + ": job_order=" + p.job_order + " queue_order=" + p.queue_order +
         " fairshare_half_life=" + CanonNum(p.fairshare_half_life) +
         " uses_predictor=" + b(p.uses_predictor) + " strict_fifo=" + b(o.strict_fifo) +
         " borrowing=" + b(o.borrowing) + " preempt_priority=" + b(o.preempt_priority) +
         " preempt_reclaim=" + b(o.preempt_reclaim) + " preempt_las=" + b(o.preempt_las) +
         " preempt_srtf=" + b(o.preempt_srtf) + " lossless_preemption=" + b(o.lossless_preemption) +
         " backfill=" + CanonNum(static_cast<int64_t>(o.backfill)) +
         " runtime_source=" + CanonNum(static_cast<int64_t>(o.runtime_source)) +
         " las_thresholds=" + thresholds +
         " las_protected_level=" + CanonNum(int64_t{o.las_protected_level}) +
         " sjf_gpu_exponent=" + CanonNum(o.sjf_gpu_exponent) +
         " sjf_no_guess=" + b(o.sjf_no_guess) +
         " starvation_limit=" + CanonNum(o.starvation_limit) + " grace=" + CanonNum(o.grace) +
         " checkpoint_wait=" + CanonNum(o.checkpoint_wait) +
         " restart_overhead=" + CanonNum(o.restart_overhead) +
         " restart_amortization=" + CanonNum(int64_t{o.restart_amortization}) +
         " resume_first=" + b(o.resume_first) + " user_fair_share=" + b(o.user_fair_share) +
         " victims_by_cost=" + b(o.victims_by_cost) +
         " max_preemptions_per_job=" + CanonNum(int64_t{o.max_preemptions_per_job}) +
         " min_run_before_preemption=" + CanonNum(o.min_run_before_preemption) +
         " min_run_before_reclaim=" + CanonNum(o.min_run_before_reclaim) +
         " victim_hold=" + CanonNum(o.victim_hold) +
         " max_jobs_tested=" + CanonNum(int64_t{o.max_jobs_tested}) +
         " max_skips_per_queue=" + CanonNum(int64_t{o.max_skips_per_queue}) +
         " max_preemption_searches=" + CanonNum(int64_t{o.max_preemption_searches}) +
         " max_victim_candidates=" + CanonNum(int64_t{o.max_victim_candidates});
}

StatusOr<PolicyFingerprint> DefaultPolicyFingerprint(const DefaultSimModel& model,
                                                     const GpuCatalog& catalog) {
  PolicyFingerprint f;
  Fnv options;
  for (const std::string& name : SchedulerPresetNames()) {
    TESSERA_ASSIGN_OR_RETURN(SchedulerPolicy policy, ParseSchedulerPolicy(name));
    f.options.push_back(PolicyOptionsLine(policy));
  }
  f.options.push_back(ModelLine(model));
  for (const std::string& line : f.options) {
    options.Add(line);
  }
  f.options_hash = options.Hex();
  TESSERA_ASSIGN_OR_RETURN(f.probe_hash, ProbeHash(model, catalog));
  Fnv both;
  both.Add(f.options_hash);
  both.Add(f.probe_hash);
  f.fingerprint = both.Hex();
  return f;
}

}  // namespace tessera
