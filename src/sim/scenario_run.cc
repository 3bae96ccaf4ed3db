// Running a scenario: the simulator over its cluster and jobs, each check evaluated
// against the run, and the text forms of its events and outcomes (declared in scenario.h).
#include "sim/scenario.h"

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
namespace tessera {
namespace {

constexpr Micros kSecond = 1'000'000;

std::string Seconds(Micros t) {
  if (t % kSecond == 0) {
    return std::to_string(t / kSecond);
  }
  std::ostringstream out;
  out << std::fixed << std::setprecision(3) << static_cast<double>(t) / 1e6;
  return out.str();
}

std::string JoinNames(const std::vector<std::string>& names) {
  return "[" + Join(names, ", ") + "]";
}

// ---- running ------------------------------------------------------------------------

// What one run did, indexed for the checks.
struct RunView {
  const JobSimResult* result = nullptr;
  std::unordered_map<std::string, size_t> index;  // job name -> position in run.jobs
  std::unordered_map<std::string, const NodeSpec*> nodes;

  const JobOutcome& job(const std::string& name) const { return result->run.jobs[index.at(name)]; }
  std::vector<const SimEvent*> Of(const std::string& name, SimEvent::Kind kind) const {
    std::vector<const SimEvent*> out;
    for (const SimEvent& e : result->events) {
      if (e.kind == kind && e.job == name) {
        out.push_back(&e);
      }
    }
    return out;
  }
  const SimEvent* FirstStart(const std::string& name) const {
    for (const SimEvent& e : result->events) {
      if (e.kind == SimEvent::Kind::kStart && e.job == name) {
        return &e;
      }
    }
    return nullptr;
  }
};

std::string When(Micros t) { return t < 0 ? "never" : Seconds(t); }

// Checks of when and where jobs start.
std::string EvaluateStarts(const ScenarioCheck& c, const RunView& run) {
  std::ostringstream out;
  const auto& events = run.result->events;
  if (c.kind == "start_order") {
    std::vector<std::string> actual;
    std::set<std::string> wanted(c.names.begin(), c.names.end());
    std::set<std::string> seen;
    for (const SimEvent& e : events) {
      if (e.kind == SimEvent::Kind::kStart && wanted.contains(e.job) && seen.insert(e.job).second) {
        actual.push_back(e.job);
      }
    }
    for (const std::string& n : c.names) {
      if (!seen.contains(n)) {
        actual.push_back(n + " (never)");
      }
    }
    if (actual != c.names) {
      out << "  expected: " << JoinNames(c.names) << "\n  actual:   " << JoinNames(actual) << "\n";
    }
  } else if (c.kind == "starts" || c.kind == "finishes") {
    const bool starts = c.kind == "starts";
    for (const auto& [name, t] : c.values) {
      const JobOutcome& o = run.job(name);
      const Micros actual = starts ? o.first_start : o.finish;
      if (actual != t) {
        out << "  " << name << ": expected " << When(t) << ", actual " << When(actual) << "\n";
      }
    }
  } else if (c.kind == "on_nodes") {
    for (const auto& [name, want] : c.nodes) {
      const SimEvent* s = run.FirstStart(name);
      std::vector<std::string> actual = s ? s->nodes : std::vector<std::string>{"never started"};
      if (actual != want) {
        out << "  " << name << ": expected " << JoinNames(want) << ", actual " << JoinNames(actual)
            << "\n";
      }
    }
  } else if (c.kind == "same_node" || c.kind == "same_rack") {
    const bool rack = c.kind == "same_rack";
    for (const std::string& name : c.names) {
      std::vector<const SimEvent*> starts = run.Of(name, SimEvent::Kind::kStart);
      if (starts.empty()) {
        out << "  " << name << ": never started\n";
      }
      for (const SimEvent* s : starts) {
        std::set<std::string> groups;
        for (const std::string& n : s->nodes) {
          groups.insert(rack ? std::string(run.nodes.at(n)->Label("rack")) : n);
        }
        if (groups.size() > 1 || (rack && groups.contains(""))) {
          out << "  " << name << " at " << Seconds(s->time) << ": on " << JoinNames(s->nodes);
          if (rack) {
            out << " in racks "
                << JoinNames(std::vector<std::string>(groups.begin(), groups.end()));
          }
          out << "\n";
        }
      }
    }
  } else {
    out << "  unknown check\n";
  }
  return out.str();
}

// Checks of preemptions and the work they cost.
std::string EvaluatePreemptions(const ScenarioCheck& c, const RunView& run) {
  std::ostringstream out;
  const auto& events = run.result->events;
if (c.kind == "preempted") {
    for (const auto& [victim, preemptor] : c.pairs) {
      const std::string& by = preemptor;  // a plain reference: lambdas cannot capture bindings
      std::vector<const SimEvent*> p = run.Of(victim, SimEvent::Kind::kPreempt);
      const bool hit = std::any_of(p.begin(), p.end(),
                                   [&](const SimEvent* e) { return by.empty() || e->by == by; });
      if (!hit) {
        std::vector<std::string> bys;
        bys.reserve(p.size());
        for (const SimEvent* e : p) {
          bys.push_back(e->by + " at " + Seconds(e->time));
        }
        out << "  " << victim << ": expected preempted" << (by.empty() ? "" : " by " + by)
            << ", actual " << (bys.empty() ? "never preempted" : "preempted by " + JoinNames(bys))
            << "\n";
      }
    }
  } else if (c.kind == "not_preempted") {
    for (const std::string& name : c.names) {
      for (const SimEvent* e : run.Of(name, SimEvent::Kind::kPreempt)) {
        out << "  " << name << ": expected never preempted, actual preempted by " << e->by << " at "
            << Seconds(e->time) << "\n";
      }
    }
  } else if (c.kind == "preemptions_of") {
    for (const auto& [name, n] : c.values) {
      const int64_t actual = static_cast<int64_t>(run.Of(name, SimEvent::Kind::kPreempt).size());
      if (actual != n) {
        out << "  " << name << ": expected " << n << " preemptions, actual " << actual << "\n";
      }
    }
  } else if (c.kind == "max_preemptions") {
    int64_t total = 0;
    for (const SimEvent& e : events) {
      total += e.kind == SimEvent::Kind::kPreempt ? 1 : 0;
    }
    if (total > c.number) {
      out << "  expected at most " << c.number << " preemptions, actual " << total << "\n";
    }
  } else {
    out << "  unknown check\n";
  }
  return out.str();
}

// Checks of backfill, borrowing, who runs when, work lost, and the end of the run.
std::string EvaluateOutcomes(const ScenarioCheck& c, const RunView& run) {
  std::ostringstream out;
  const auto& events = run.result->events;
if (c.kind == "backfilled" || c.kind == "not_backfilled" || c.kind == "borrowing" ||
             c.kind == "not_borrowing") {
    const bool want = !StartsWith(c.kind, "not_");
    const bool backfill = EndsWith(c.kind, "backfilled");
    for (const std::string& name : c.names) {
      const SimEvent* s = run.FirstStart(name);
      if (s == nullptr) {
        out << "  " << name << ": never started\n";
        continue;
      }
      const bool actual = backfill ? s->backfilled : s->borrowing;
      if (actual != want) {
        out << "  " << name << ": expected " << (want ? "" : "not ")
            << (backfill ? "backfilled" : "borrowing") << " at its first start ("
            << Seconds(s->time) << "), actual " << (actual ? "" : "not ")
            << (backfill ? "backfilled" : "borrowing") << "\n";
      }
    }
  } else if (c.kind == "never_starts") {
    for (const std::string& name : c.names) {
      if (const SimEvent* s = run.FirstStart(name)) {
        out << "  " << name << ": expected never to start, actual started at " << Seconds(s->time)
            << "\n";
      }
    }
  } else if (c.kind == "running_at") {
    for (const auto& [t, want] : c.at) {
      std::set<std::string> running;
      for (const SimEvent& e : events) {
        if (e.time > t) {
          break;
        }
        if (e.kind == SimEvent::Kind::kStart) {
          running.insert(e.job);
        } else if (e.kind == SimEvent::Kind::kEvict || e.kind == SimEvent::Kind::kFinish) {
          running.erase(e.job);
        }
      }
      std::set<std::string> expected(want.begin(), want.end());
      if (running != expected) {
        out << "  at " << Seconds(t) << ": expected "
            << JoinNames(std::vector<std::string>(expected.begin(), expected.end())) << ", actual "
            << JoinNames(std::vector<std::string>(running.begin(), running.end())) << "\n";
      }
    }
  } else if (c.kind == "lost_work") {
    for (const auto& [name, gpu_s] : c.values) {
      const double actual = run.job(name).lost_gpu_seconds;
      if (std::fabs(actual - static_cast<double>(gpu_s)) >= 0.5) {
        out << "  " << name << ": expected " << gpu_s << " GPU-seconds lost, actual " << actual
            << "\n";
      }
    }
  } else if (c.kind == "all_finish") {
    std::vector<std::string> unfinished;
    for (const JobOutcome& o : run.result->run.jobs) {
      if (o.finish < 0) {
        unfinished.push_back(o.name);
      }
    }
    if (c.flag && !unfinished.empty()) {
      out << "  expected every job to finish, actual unfinished: " << JoinNames(unfinished) << "\n";
    } else if (!c.flag && unfinished.empty()) {
      out << "  expected some job not to finish, actual all finished\n";
    }
  } else if (c.kind == "quota_violations") {
    const int64_t actual = run.result->run.quota_violations;
    if (actual != c.number) {
      out << "  expected " << c.number << " cycles with quota violations, actual " << actual
          << "\n";
      for (const std::string& v : run.result->violations) {
        out << "    " << v << "\n";
      }
    }
  } else {
    out << "  unknown check\n";
  }
  return out.str();
}

// Checks of how jobs ended: ends, attempts, restarts.
std::string EvaluateEnds(const ScenarioCheck& c, const RunView& run) {
  std::ostringstream out;
  auto end = [](const std::string& e) { return e.empty() ? std::string("unfinished") : e; };
  if (c.kind == "ends") {
    for (const auto& [name, want] : c.pairs) {
      const JobOutcome& o = run.job(name);
      if (o.end != want) {
        out << "  " << name << ": expected " << end(want) << ", actual " << end(o.end);
        if (o.finish >= 0) {
          out << " at " << Seconds(o.finish);
        }
        out << "\n";
      }
    }
    return out.str();
  }
  const bool attempts = c.kind == "attempts";
  for (const auto& [name, n] : c.values) {
    const JobOutcome& o = run.job(name);
    const int64_t actual = attempts ? o.attempts : o.restarts;
    if (actual != n) {
      out << "  " << name << ": expected " << n << (attempts ? " attempts" : " restarts")
          << ", actual " << actual << "\n";
    }
  }
  return out.str();
}

// Evaluates one check; returns the diff, "" when it holds.
std::string Evaluate(const ScenarioCheck& c, const RunView& run) {
  static const std::set<std::string, std::less<>> kStarts = {"start_order", "starts", "finishes",
                                                             "on_nodes", "same_node", "same_rack"};
  static const std::set<std::string, std::less<>> kPreemptions = {
      "preempted", "not_preempted", "preemptions_of", "max_preemptions"};
  if (kStarts.count(c.kind) > 0) {
    return EvaluateStarts(c, run);
  }
  if (kPreemptions.count(c.kind) > 0) {
    return EvaluatePreemptions(c, run);
  }
  if (c.kind == "ends" || c.kind == "attempts" || c.kind == "restarts") {
    return EvaluateEnds(c, run);
  }
  return EvaluateOutcomes(c, run);
}

}  // namespace

std::string FormatSimEvents(const std::vector<SimEvent>& events) {
  std::ostringstream out;
  for (const SimEvent& e : events) {
    out << std::setw(10) << Seconds(e.time) << "s  " << std::left << std::setw(8)
        << SimEventKindName(e.kind) << std::right << " " << e.job;
    if (e.kind == SimEvent::Kind::kStart) {
      out << " on " << JoinNames(e.nodes);
      if (e.borrowing) {
        out << " borrowing";
      }
      if (e.backfilled) {
        out << " backfilled";
      }
    } else if (e.kind == SimEvent::Kind::kPreempt) {
      out << " by " << e.by;
    }
    out << "\n";
  }
  return out.str();
}

std::string FormatJobOutcomes(const JobRun& run) {
  std::ostringstream out;
  auto row = [&out](std::string_view job, std::string_view tenant, std::string_view submit,
                    std::string_view start, std::string_view finish, std::string_view duration,
                    std::string_view preemptions, std::string_view lost, std::string_view end,
                    std::string_view attempts, std::string_view restarts) {
    out << "  " << std::left << std::setw(16) << job << " " << std::setw(12) << tenant << std::right
        << std::setw(9) << submit << std::setw(9) << start << std::setw(9) << finish << std::setw(9)
        << duration << std::setw(8) << preemptions << std::setw(11) << lost << std::setw(10) << end
        << std::setw(9) << attempts << std::setw(9) << restarts << "\n";
  };
  row("job", "tenant", "submit", "start", "finish", "duration", "preempt", "lost GPU-s", "end",
      "attempts", "restarts");
  for (const JobOutcome& o : run.jobs) {
    row(o.name, o.tenant, Seconds(o.submit), When(o.first_start), When(o.finish), Seconds(o.actual),
        std::to_string(o.preemptions), std::to_string(std::llround(o.lost_gpu_seconds)),
        o.end.empty() ? "-" : o.end, std::to_string(o.attempts), std::to_string(o.restarts));
  }
  return out.str();
}

std::string ScenarioResult::Report() const {
  if (failures.empty()) {
    return "";
  }
  std::ostringstream out;
  out << "scenario '" << scenario << "' (" << file << "): " << failures.size() << " of " << checks
      << " checks failed\n";
  for (const ScenarioFailure& f : failures) {
    out << file << ":" << f.line << ": " << f.kind << " [policy " << f.policy << "]\n" << f.diff;
  }
  for (const auto& [policy, log] : logs) {
    out << "--- policy " << policy << " ---\n" << log;
  }
  return out.str();
}

StatusOr<ScenarioResult> RunScenario(const Scenario& scenario, const GpuCatalog& catalog) {
  return RunScenario(scenario, catalog, RunJobSimulation);
}

StatusOr<ScenarioResult> RunScenario(const Scenario& scenario, const GpuCatalog& catalog,
                                     const JobRunner& runner) {
  ScenarioResult result;
  result.scenario = scenario.name;
  result.file = scenario.file;
  for (const std::string& policy_name : scenario.Policies()) {
    StatusOr<SchedulerPolicy> policy = ParseSchedulerPolicy(policy_name);
    if (!policy.ok()) {
      return InvalidArgumentError(scenario.file + ": " + policy.status().message());
    }
    const ScenarioOptions& o = scenario.options;
    SchedulerOptions& so = policy->options;
    so.grace = o.grace.value_or(so.grace);
    so.starvation_limit = o.starvation_limit.value_or(so.starvation_limit);
    so.min_run_before_preemption =
        o.min_run_before_preemption.value_or(so.min_run_before_preemption);
    so.las_thresholds = o.las_thresholds.value_or(so.las_thresholds);
    so.lossless_preemption = o.lossless_preemption.value_or(so.lossless_preemption);
    so.restart_overhead = o.restart_overhead.value_or(so.restart_overhead);
    so.checkpoint_wait = o.checkpoint_wait.value_or(so.checkpoint_wait);
    policy->fairshare_half_life = o.fairshare_half_life.value_or(policy->fairshare_half_life);

    JobSimOptions options;
    options.policy = std::move(*policy);
    options.placement = o.placement;
    options.seed = o.seed;
    options.tick = o.tick.value_or(options.tick);
    options.stop_grace = o.stop_grace.value_or(options.stop_grace);
    options.cluster_events = scenario.events;
    options.idle = scenario.idle;
    options.record_usage = false;
    options.record_events = true;
    StatusOr<JobSimResult> sim =
        runner(scenario.nodes, scenario.queues, scenario.jobs, options, catalog);
    if (!sim.ok()) {
      return InvalidArgumentError(scenario.file + ": policy " + policy_name + ": " +
                                  sim.status().message());
    }
    RunView view;
    view.result = &*sim;
    for (size_t i = 0; i < sim->run.jobs.size(); ++i) {
      view.index.emplace(sim->run.jobs[i].name, i);
    }
    for (const NodeSpec& n : scenario.nodes) {
      view.nodes.emplace(n.name, &n);
    }
    bool failed = false;
    bool quota_checked = false;
    for (const ScenarioCheck& c : scenario.checks) {
      if (c.policy != policy_name) {
        continue;
      }
      quota_checked = quota_checked || c.kind == "quota_violations";
      ++result.checks;
      std::string diff = Evaluate(c, view);
      if (!diff.empty()) {
        result.failures.push_back(ScenarioFailure{c.kind, c.line, policy_name, std::move(diff)});
        failed = true;
      }
    }
    if (!quota_checked) {
      ScenarioCheck implicit;
      implicit.kind = "quota_violations";
      implicit.policy = policy_name;
      ++result.checks;
      std::string diff = Evaluate(implicit, view);
      if (!diff.empty()) {
        result.failures.push_back(
            ScenarioFailure{"quota_violations (implicit)", 0, policy_name, std::move(diff)});
        failed = true;
      }
    }
    if (failed) {
      result.logs[policy_name] =
          "events:\n" + FormatSimEvents(sim->events) + "jobs:\n" + FormatJobOutcomes(sim->run);
    }
  }
  return result;
}

}  // namespace tessera
