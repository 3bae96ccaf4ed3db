// The scenario suite through the controller (controller_job_runner.h): every
// tests/scenarios/*.yaml as its own test. Its checks must pass, and every job's outcome
// (first start, finish, end, attempts, restarts, preemptions, service, work lost) must
// equal the simulator's under each policy the file names, and again under the bounds the
// server puts on a named policy.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "server/controller.h"
#include "server/scenarios/controller_job_runner.h"
#include "server/core_session.h"
#include "sim/job_sim.h"
#include "sim/scenario.h"
#include "sim/testing/scenario_files.h"

#ifndef TESSERA_SCENARIO_DIR
#error "TESSERA_SCENARIO_DIR must name the scenario folder (set by CMake)"
#endif

namespace tessera {
namespace {

const GpuCatalog& Catalog() { return GpuCatalog::Default(); }

std::vector<std::string> ScenarioFiles() { return testing::ScenarioFiles(TESSERA_SCENARIO_DIR); }

// The jobs whose outcomes differ between the two drivers, one line each.
std::string OutcomeDiff(const JobRun& sim, const JobRun& live) {
  std::ostringstream out;
  if (sim.jobs.size() != live.jobs.size()) {
    out << sim.jobs.size() << " jobs in the simulator, " << live.jobs.size()
        << " through the controller\n";
    return out.str();
  }
  auto s = [](Micros t) { return t < 0 ? std::string("-") : std::to_string(t / 1'000'000) + "s"; };
  for (size_t i = 0; i < sim.jobs.size(); ++i) {
    const JobOutcome& a = sim.jobs[i];
    const JobOutcome& b = live.jobs[i];
    if (a.first_start != b.first_start || a.finish != b.finish ||
        a.preemptions != b.preemptions || a.service != b.service ||
        a.lost_gpu_seconds != b.lost_gpu_seconds || a.end != b.end ||
        a.attempts != b.attempts || a.restarts != b.restarts) {
      auto line = [&s](const JobOutcome& o) {
        std::ostringstream l;
        l << "start " << s(o.first_start) << " finish " << s(o.finish) << " ("
          << (o.end.empty() ? "-" : o.end) << ") attempts " << o.attempts << " restarts "
          << o.restarts << " preemptions " << o.preemptions << " service " << s(o.service)
          << " lost " << o.lost_gpu_seconds;
        return l.str();
      };
      out << a.name << ": simulator " << line(a) << "; controller " << line(b) << "\n";
    }
  }
  if (sim.quota_violations != live.quota_violations) {
    out << "quota violations: simulator " << sim.quota_violations << ", controller "
        << live.quota_violations << "\n";
  }
  return out.str();
}

// Policies a live controller refuses (true runtimes, lossless preemption).
bool IsOracle(const SchedulerPolicy& p) {
  return p.options.runtime_source == RuntimeSource::kOracle || p.options.preempt_srtf ||
         p.options.lossless_preemption;
}

class ScenarioThroughControllerTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ScenarioThroughControllerTest, PassesWithTheSimulatorsOutcome) {
  StatusOr<Scenario> scenario = LoadScenarioFile(GetParam(), Catalog());
  ASSERT_TRUE(scenario.ok()) << scenario.status().ToString();
  std::string diffs;
  int runs = 0;         // through both drivers
  int oracle_runs = 0;  // through the simulator only
  int bounded_runs = 0;  // through both, with the server's policy bounds
  JobRunner both = [&](const std::vector<NodeSpec>& nodes, const QueueTreeSpec& queues,
                       const std::vector<SimJob>& jobs, const JobSimOptions& options,
                       const GpuCatalog& catalog) -> StatusOr<JobSimResult> {
    TESSERA_ASSIGN_OR_RETURN(JobSimResult sim,
                             RunJobSimulation(nodes, queues, jobs, options, catalog));
    StatusOr<JobSimResult> through =
        RunJobsThroughController(nodes, queues, jobs, options, catalog);
    if (IsOracle(options.policy)) {
      // The controller refuses a policy that needs what a live cluster cannot know;
      // those checks are the simulator's alone.
      EXPECT_EQ(through.status().code(), StatusCode::kFailedPrecondition)
          << options.policy.name << ": " << through.status().ToString();
      ++oracle_runs;
      return sim;
    }
    TESSERA_RETURN_IF_ERROR(through.status());
    JobSimResult live = std::move(through).value();
    ++runs;
    std::string diff = OutcomeDiff(sim.run, live.run);
    if (!diff.empty()) {
      diffs += "policy " + options.policy.name + ":\n" + diff + "controller's events:\n" +
               FormatSimEvents(live.events) + "simulator's events:\n" +
               FormatSimEvents(sim.events);
    }
    // Under the bounds a live controller puts on a named policy the drivers must still
    // agree (the file's checks are written for the policy as is, so only agreement is
    // asked there).
    JobSimOptions bounded = options;
    bounded.policy = WithServerBounds(options.policy, ControllerOptions{}.min_run_before_reclaim,
                                      ControllerOptions{}.victim_hold);
    if (bounded.policy.options.min_run_before_reclaim !=
            options.policy.options.min_run_before_reclaim ||
        bounded.policy.options.victim_hold != options.policy.options.victim_hold) {
      TESSERA_ASSIGN_OR_RETURN(JobSimResult sim_bounded,
                               RunJobSimulation(nodes, queues, jobs, bounded, catalog));
      TESSERA_ASSIGN_OR_RETURN(JobSimResult live_bounded,
                               RunJobsThroughController(nodes, queues, jobs, bounded, catalog));
      ++bounded_runs;
      std::string bounded_diff = OutcomeDiff(sim_bounded.run, live_bounded.run);
      if (!bounded_diff.empty()) {
        diffs += "policy " + options.policy.name + " with the server's bounds:\n" + bounded_diff +
                 "controller's events:\n" + FormatSimEvents(live_bounded.events) +
                 "simulator's events:\n" + FormatSimEvents(sim_bounded.events);
      }
    }
    return live;
  };
  StatusOr<ScenarioResult> result = RunScenario(*scenario, Catalog(), both);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_GT(runs + oracle_runs, 0);
  std::cout << "runs through both drivers: " << runs << " (and " << bounded_runs
            << " with the server's policy bounds)"
            << "; policies needing an oracle, on the simulator only: " << oracle_runs << "\n";
  EXPECT_GT(result->checks, 0);
  EXPECT_TRUE(result->ok()) << result->Report();
  EXPECT_EQ(diffs, "");
}

INSTANTIATE_TEST_SUITE_P(Scenarios, ScenarioThroughControllerTest,
                         ::testing::ValuesIn(ScenarioFiles()), testing::ScenarioTestName);

}  // namespace
}  // namespace tessera
