// The scenario suite (every tests/scenarios/*.yaml as its own test) and unit tests of
// the scenario parser and runner.
#include "sim/scenario.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "api/job_codec.h"
#include "sim/testing/scenario_files.h"

#ifndef TESSERA_SCENARIO_DIR
#error "TESSERA_SCENARIO_DIR must name the scenario folder (set by CMake)"
#endif

namespace tessera {
namespace {

const GpuCatalog& Catalog() { return GpuCatalog::Default(); }

constexpr size_t kMinScenarios = 20;

std::vector<std::string> ScenarioFiles() { return testing::ScenarioFiles(TESSERA_SCENARIO_DIR); }

class ScenarioTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ScenarioTest, Passes) {
  StatusOr<Scenario> scenario = LoadScenarioFile(GetParam(), Catalog());
  ASSERT_TRUE(scenario.ok()) << scenario.status().ToString();
  StatusOr<ScenarioResult> result = RunScenario(*scenario, Catalog());
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_GT(result->checks, 0);
  EXPECT_TRUE(result->ok()) << result->Report();
}

INSTANTIATE_TEST_SUITE_P(Scenarios, ScenarioTest, ::testing::ValuesIn(ScenarioFiles()),
                         testing::ScenarioTestName);

TEST(ScenarioSuiteTest, FolderHoldsTheSuite) {
  const std::vector<std::string> files = ScenarioFiles();
  EXPECT_GE(files.size(), kMinScenarios)
      << "expected at least " << kMinScenarios << " scenarios in " << TESSERA_SCENARIO_DIR;
}

// ---- parser ------------------------------------------------------------------------

constexpr const char* kMinimal = R"(name: minimal
policy: fifo
cluster:
  - {count: 1, prefix: n, gpus: 4}
jobs:
  - {name: a, submit: 0, duration: 100, resources: {gpus: 4}}
  - {name: b, submit: 10, duration: 50, resources: {gpus: 2}}
expect:
  - start_order: [a, b]
  - starts: {a: 0, b: 100}
  - finishes: {a: 100, b: 150}
  - all_finish: true
)";

StatusOr<Scenario> Parse(const std::string& yaml) {
  return ParseScenario(yaml, "case.yaml", Catalog());
}

// `s` with the first occurrence of `from` replaced by `to`.
std::string Replace(std::string s, const std::string& from, const std::string& to) {
  const size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) {
    s.replace(at, from.size(), to);
  }
  return s;
}

std::string Minimal(const std::string& from, const std::string& to) {
  return Replace(kMinimal, from, to);
}

void ExpectError(const std::string& yaml, const std::vector<std::string>& parts) {
  StatusOr<Scenario> s = Parse(yaml);
  ASSERT_FALSE(s.ok()) << yaml;
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("case.yaml"), std::string::npos) << s.status().message();
  for (const std::string& part : parts) {
    EXPECT_NE(s.status().message().find(part), std::string::npos)
        << "'" << part << "' not in: " << s.status().message();
  }
}

TEST(ScenarioParserTest, ReadsTheMinimalScenario) {
  StatusOr<Scenario> s = Parse(kMinimal);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->name, "minimal");
  ASSERT_EQ(s->nodes.size(), 1u);
  EXPECT_EQ(s->nodes[0].name, "n-0");
  EXPECT_EQ(s->nodes[0].gpus.size(), 4u);
  ASSERT_EQ(s->jobs.size(), 2u);
  EXPECT_EQ(s->jobs[1].spec.submit_time, 10'000'000);
  EXPECT_EQ(s->jobs[1].duration, 50'000'000);
  EXPECT_EQ(s->jobs[1].spec.queue, "default");
  ASSERT_EQ(s->jobs[1].spec.tasks.size(), 1u);
  EXPECT_EQ(s->jobs[1].spec.tasks[0].gpu_count, 2);
  EXPECT_EQ(s->checks.size(), 4u);
  EXPECT_EQ(s->checks[1].kind, "starts");
  EXPECT_EQ(s->checks[1].line, 10);
  EXPECT_EQ(s->Policies(), std::vector<std::string>{"fifo"});
}

TEST(ScenarioParserTest, TimesliceNodesCarryTheirReplicas) {
  StatusOr<Scenario> s = Parse(R"(name: ts
policy: fifo
cluster:
  - {names: [ts], gpus: 2, model: A100-80GB, mode: timeslice=4}
queues: {queues: [{name: q}]}
jobs:
  - {name: a, queue: q, duration: 10, resources: {gpu_fraction: 0.25}}
expect: [{all_finish: true}]
)");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_EQ(s->nodes[0].gpus.size(), 2u);
  EXPECT_EQ(s->nodes[0].gpus[1].mode, SharingMode::kTimeslice);
  EXPECT_EQ(s->nodes[0].gpus[1].replicas, 4);
  StatusOr<Scenario> bad = Parse(R"(name: ts
policy: fifo
cluster:
  - {names: [ts], gpus: 2, model: A100-80GB, mode: timeslice}
queues: {queues: [{name: q}]}
jobs:
  - {name: a, queue: q, duration: 10, resources: {gpu_fraction: 0.25}}
expect: [{all_finish: true}]
)");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("timeslice needs a replica count 2..64"),
            std::string::npos)
      << bad.status().message();
}

TEST(ScenarioParserTest, ReadsTasksGroupsAndPolicyOverrides) {
  StatusOr<Scenario> s = Parse(R"(name: full
policy: fifo
options: {grace_seconds: 60, tick_seconds: 10, las_thresholds: [100, 1000]}
cluster:
  - {count: 2, prefix: n, gpus: 8, labels: {rack: r0}}
  - {count: 1, prefix: n, gpus: 2, model: A100-80GB, mode: mig}
  - {names: [s-a], gpus: 1, mode: shared, cpu: 16, memory: 64Gi}
queues:
  priorityClasses: [{name: high, value: 100}]
  cohorts: [{name: org}]
  queues:
    - {name: a, cohort: org, quota: {gpu: 4}}
    - {name: b, cohort: org, quota: {gpu: 4}}
jobs:
  - name: gang
    queue: a
    duration: 10
    priority: high
    replicas: 2
    resources: {gpus: 8}
    topology: {scope: rack, hard: true}
  - {name: share, queue: b, duration: 10, resources: {gpu_milli: 250, gpu_memory: 8Gi}}
  - {name: half, queue: b, duration: 10, resources: {gpu_fraction: 0.5}}
  - {name: mig, queue: b, duration: 10, resources: {mig: 3g.40gb}}
expect:
  - same_rack: [gang]
  - policy: [fifo, priority]
    never_starts: [gang]
    borrowing: [share]
  - policy: all-presets
    quota_violations: 0
)");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_EQ(s->nodes.size(), 4u);
  EXPECT_EQ(s->nodes[2].name, "n-2");
  EXPECT_EQ(s->nodes[3].name, "s-a");
  EXPECT_EQ(s->nodes[0].Label("rack"), "r0");
  EXPECT_EQ(s->nodes[2].gpus[0].mode, SharingMode::kMig);
  EXPECT_EQ(s->nodes[3].memory.value(), 64 * 1024);
  ASSERT_TRUE(s->options.grace.has_value());
  EXPECT_EQ(*s->options.grace, 60'000'000);
  const JobSpec& gang = s->jobs[0].spec;
  EXPECT_EQ(gang.priority, 100);
  ASSERT_EQ(gang.tasks.size(), 2u);
  EXPECT_EQ(gang.tasks[1].gpu_count, 8);
  EXPECT_EQ(gang.topology.scope, TopologyScope::kRack);
  EXPECT_TRUE(gang.topology.hard);
  EXPECT_EQ(s->jobs[1].spec.tasks[0].gpu_milli.value(), 250);
  EXPECT_EQ(s->jobs[1].spec.tasks[0].gpu_memory.value(), 8 * 1024);
  EXPECT_EQ(s->jobs[2].spec.tasks[0].gpu_milli.value(), 500);
  EXPECT_EQ(s->jobs[3].spec.tasks[0].mig_profile, "3g.40gb");
  // One job-request language: each task is exactly what the API's job file with the
  // same resources asks for (MIG instances included).
  for (int j = 1; j <= 3; ++j) {
    const char* resources[] = {"", "{gpu_milli: 250, gpu_memory: 8Gi}", "{gpu_fraction: 0.5}",
                               "{mig: 3g.40gb}"};
    StatusOr<JobSubmission> api =
        ParseJobYaml(std::string("command: [x]\nresources: ") + resources[j] + "\n", Catalog());
    ASSERT_TRUE(api.ok()) << api.status().ToString();
    EXPECT_EQ(s->jobs[j].spec.tasks, api->spec.tasks) << s->jobs[j].spec.name;
  }
  // 1 + 2x2 + one per preset.
  EXPECT_EQ(s->checks.size(), 5u + SchedulerPresetNames().size());
  const std::vector<std::string> policies = s->Policies();
  EXPECT_EQ(policies[0], "fifo");
  EXPECT_EQ(policies[1], "priority");
  EXPECT_EQ(policies.size(), SchedulerPresetNames().size());  // fifo and priority are presets
}

TEST(ScenarioParserTest, RepeatMakesNumberedJobs) {
  constexpr const char* kRepeat = R"(name: repeat
policy: fifo
cluster: [{gpus: 1}]
jobs:
  - {name: s, submit: 10, duration: 50, resources: {gpus: 1}, repeat: {count: 3, every: 60}}
expect:
  - starts: {s-0: 10, s-1: 70, s-2: 130}
)";
  StatusOr<Scenario> s = Parse(kRepeat);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_EQ(s->jobs.size(), 3u);
  EXPECT_EQ(s->nodes[0].name, "node-0");
  EXPECT_EQ(s->jobs[0].spec.name, "s-0");
  EXPECT_EQ(s->jobs[2].spec.name, "s-2");
  EXPECT_EQ(s->jobs[2].spec.submit_time, 130'000'000);
  StatusOr<ScenarioResult> r = RunScenario(*s, Catalog());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->ok()) << r->Report();
  ExpectError(Replace(kRepeat, "count: 3, every: 60", "every: 60"),
              {"repeat needs a count", "line 5"});
  ExpectError(Replace(kRepeat, "count: 3", "count: 0"), {"count must be in 1..10000", "line 5"});
  ExpectError(Replace(kRepeat, "s-1: 70", "s: 70"), {"no job named 's'", "line 7"});
  StatusOr<Scenario> pattern = Parse(Replace(
      kRepeat, "- starts:", "- start_order: [s*]\n  - not_preempted: [x, s-1*]\n  - starts:"));
  EXPECT_FALSE(pattern.ok());
  EXPECT_NE(pattern.status().message().find("no job named 'x'"), std::string::npos)
      << pattern.status().message();
  pattern = Parse(
      Replace(kRepeat, "- starts:", "- start_order: [s*]\n  - never_starts: [q*]\n  - starts:"));
  ASSERT_FALSE(pattern.ok());
  EXPECT_NE(pattern.status().message().find("no job name starts with 'q' (line 8"),
            std::string::npos)
      << pattern.status().message();
  pattern = Parse(Replace(kRepeat, "- starts:", "- start_order: [s*]\n  - starts:"));
  ASSERT_TRUE(pattern.ok()) << pattern.status().ToString();
  EXPECT_EQ(pattern->checks[0].names, (std::vector<std::string>{"s-0", "s-1", "s-2"}));
}

TEST(ScenarioParserTest, ErrorsNameTheFileThePathAndTheLine) {
  ExpectError(Minimal("policy: fifo", "policy: fifo\nsurprise: 1"),
              {"unknown key 'surprise'", "line 3"});
  ExpectError(Minimal("policy: fifo", "policy: fifo+nonsense"),
              {"policy", "unknown policy component 'nonsense'", "line 2"});
  ExpectError(Minimal("gpus: 4}", "gpus: four}"), {"cluster[0].gpus", "line 4"});
  ExpectError(Minimal("gpus: 4}\njobs", "gpus: 4, model: B200}\njobs"),
              {"unknown GPU model 'B200'", "line 4"});
  ExpectError(
      Minimal("duration: 100, resources: {gpus: 4}", "duration: 100, resources: {gpus: 4x}"),
      {"jobs[0].resources.gpus", "line 6"});
  ExpectError(Minimal("duration: 100, resources", "duration: -5, resources"),
              {"jobs[0].duration", "whole seconds", "line 6"});
  ExpectError(Minimal("duration: 100, resources", "resources"), {"needs a duration", "line 6"});
  ExpectError(Minimal("{name: b,", "{name: a,"), {"job name 'a' is used twice", "line 7"});
  ExpectError(Minimal("{name: b, submit: 10", "{name: b, queue: nope, submit: 10"),
              {"jobs[1].queue", "nope", "line 7"});
  // The job is the API's job spec: its keys, its messages, its suggestions.
  ExpectError(Minimal("duration: 50, resources", "duration: 50, resource"),
              {"jobs[1]", "unknown key 'resource'", "did you mean 'resources'", "line 7"});
  ExpectError(Minimal("{name: b, submit: 10", "{name: b, sumbit: 10"),
              {"jobs[1]", "unknown key 'sumbit'", "did you mean 'submit'", "line 7"});
  ExpectError(Minimal("duration: 50, resources: {gpus: 2}", "duration: 50, resources: {gpus: 65}"),
              {"jobs[1].resources.gpus", "between 0 and 64", "line 7"});
  ExpectError(Minimal("start_order: [a, b]", "start_order: [a, c]"),
              {"expect[0].start_order", "no job named 'c'", "line 9"});
  ExpectError(Minimal("starts: {a: 0, b: 100}", "starts: {a: 0, zed: 100}"),
              {"no job named 'zed'", "line 10"});
  ExpectError(Minimal("all_finish: true", "all_finishes: true"),
              {"unknown check 'all_finishes'", "line 12"});
  ExpectError(Minimal("all_finish: true", "all_finish: maybe"), {"true or false", "line 12"});
  ExpectError(Minimal("- all_finish: true", "- {all_finish: true, all_finish: false}"),
              {"key 'all_finish' appears twice", "line 12"});
  ExpectError(Minimal("{count: 1, prefix: n, gpus: 4}", "{count: 1, prefix: n, gpus: 4, ram: 1}"),
              {"cluster[0]", "unknown key 'ram'", "line 4"});
  ExpectError(Minimal("{name: a, submit: 0, duration: 100, resources: {gpus: 4}}",
                      "{name: a, duration: 100, resources: {gpus: 2, mig: 3g.40gb}}"),
              {"jobs[0].resources.gpus", "MIG", "line 6"});
  ExpectError(Minimal("{name: a, submit: 0, duration: 100, resources: {gpus: 4}}",
                      "{name: a, duration: 100, resources: {gpus: 4}, topology: {scope: planet}}"),
              {"jobs[0].topology.scope", "planet", "line 6"});
  ExpectError(Minimal("{name: a, submit: 0, duration: 100, resources: {gpus: 4}}",
                      "{name: a, duration: 100, resources: {gpus: 4}, priority: urgent}"),
              {"jobs[0].priority", "neither a number nor a priority class", "line 6"});
  ExpectError(Minimal("name: a, submit: 0", "name: 'a b', submit: 0"),
              {"jobs[0].name", "not a valid name", "line 6"});
  ExpectError(Minimal("- all_finish: true", "- policy: tiresias"),
              {"needs a check besides its policy", "line 12"});
  ExpectError(Minimal("- all_finish: true", "- {policy: bogus, all_finish: true}"),
              {"expect[3].policy", "bogus", "line 12"});
  ExpectError(Minimal("jobs:", "queues:\n  queues: [{name: q, quota: {gpu: lots}}]\njobs:"),
              {"queues", "bad quantity 'lots'", "line 6"});
  ExpectError(Minimal("name: a, submit: 0", "name: a, submit: [0]"),
              {"jobs[0].submit", "expected whole seconds", "line 6"});
  ExpectError(Minimal("expect:\n", "expect:\n  - {starts: {a: 0}\n"), {"line"});  // YAML syntax
  ExpectError("name: x\npolicy: fifo\ncluster: []\njobs: []\nexpect: []\n", {"no nodes"});
}

TEST(ScenarioParserTest, LoadReportsAMissingFile) {
  StatusOr<Scenario> s = LoadScenarioFile("/nonexistent/scenario.yaml", Catalog());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kNotFound);
}

// ---- runner ------------------------------------------------------------------------

TEST(ScenarioRunnerTest, MinimalScenarioPasses) {
  StatusOr<Scenario> s = Parse(kMinimal);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  StatusOr<ScenarioResult> r = RunScenario(*s, Catalog());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->ok()) << r->Report();
  EXPECT_EQ(r->checks, 5);  // four written, one implicit quota check
  EXPECT_EQ(r->Report(), "");
}

TEST(ScenarioRunnerTest, FailuresShowExpectedActualAndTheEventLog) {
  StatusOr<Scenario> s = Parse(Replace(Minimal("starts: {a: 0, b: 100}", "starts: {a: 0, b: 20}"),
                                       "start_order: [a, b]", "start_order: [b, a]"));
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  StatusOr<ScenarioResult> r = RunScenario(*s, Catalog());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->failures.size(), 2u);
  EXPECT_EQ(r->failures[0].kind, "start_order");
  EXPECT_EQ(r->failures[0].line, 9);
  EXPECT_EQ(r->failures[1].kind, "starts");
  const std::string report = r->Report();
  EXPECT_NE(report.find("case.yaml:10: starts [policy fifo]"), std::string::npos) << report;
  EXPECT_NE(report.find("b: expected 20, actual 100"), std::string::npos) << report;
  EXPECT_NE(report.find("expected: [b, a]"), std::string::npos) << report;
  EXPECT_NE(report.find("actual:   [a, b]"), std::string::npos) << report;
  EXPECT_NE(report.find("start    a on [n-0]"), std::string::npos) << report;
  EXPECT_NE(report.find("finish   b"), std::string::npos) << report;
}

TEST(ScenarioRunnerTest, EveryCheckKindReportsItsFailure) {
  StatusOr<Scenario> s = Parse(Minimal("expect:\n", R"(expect:
  - finishes: {a: 99}
  - on_nodes: {a: [m-0]}
  - preempted: {a: b}
  - preemptions_of: {a: 1}
  - backfilled: [a]
  - borrowing: [a]
  - never_starts: [a]
  - running_at: {50: [b]}
  - lost_work: {a: 5}
  - policy: fifo-strict
    max_preemptions: 0
)"));
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  StatusOr<ScenarioResult> r = RunScenario(*s, Catalog());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::vector<std::string> kinds;
  for (const ScenarioFailure& f : r->failures) {
    kinds.push_back(f.kind);
  }
  EXPECT_EQ(kinds, (std::vector<std::string>{"finishes", "on_nodes", "preempted", "preemptions_of",
                                             "backfilled", "borrowing", "never_starts",
                                             "running_at", "lost_work"}))
      << r->Report();
  EXPECT_EQ(r->logs.count("fifo"), 1u);
  EXPECT_EQ(r->logs.count("fifo-strict"), 0u);  // it passed there
}


// ---- attempts: failures, restarts, stops -----------------------------------------------

// Parses and runs `yaml`; every check must hold.
void ExpectPasses(const std::string& yaml) {
  StatusOr<Scenario> s = Parse(yaml);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  StatusOr<ScenarioResult> r = RunScenario(*s, Catalog());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->ok()) << r->Report();
}

TEST(ScenarioAttemptTest, AFailedTaskRestartsAfterTheBackoff) {
  // Fails at 50, restarts exactly 60 s later (not at the next 300 s tick), runs its
  // 100 s again from the start (no checkpoint).
  ExpectPasses(R"(name: restart
policy: fifo
cluster: [{count: 1, prefix: n, gpus: 4}]
jobs:
  - name: j
    duration: 100
    resources: {gpus: 4}
    restart: {max: 2, on: [failure], backoff: 60s}
    failures: [{attempt: 1, after: 50, task: 0, exit_code: 1}]
expect:
  - ends: {j: succeeded}
  - attempts: {j: 2}
  - restarts: {j: 1}
  - finishes: {j: 210}
  - running_at: {49: [j], 50: [], 109: [], 110: [j]}
  - lost_work: {j: 200}
)");
}

TEST(ScenarioAttemptTest, SpentRestartsFailTheJob) {
  ExpectPasses(R"(name: spent
policy: fifo
cluster: [{count: 1, prefix: n, gpus: 4}]
jobs:
  - name: j
    duration: 100
    resources: {gpus: 4}
    restart: {max: 2, on: [failure], backoff: 10s}
    failures:
      - {attempt: 1, after: 10}
      - {attempt: 2, after: 10, signal: 9}
      - {attempt: 3, after: 10, exit_code: 3}
  - {name: k, submit: 1, duration: 10, resources: {gpus: 4}}
expect:
  - ends: {j: failed, k: succeeded}
  - attempts: {j: 3, k: 1}
  - restarts: {j: 2, k: 0}
  # k runs while j waits out its first backoff.
  - starts: {k: 10}
  - finishes: {j: 50, k: 20}
  - running_at: {10: [k], 20: [j], 30: [], 40: [j], 50: []}
)");
}

TEST(ScenarioAttemptTest, AGangStopsAsAWholeAndRestartsOnce) {
  // Task 1 fails at 30: task 0 stops at once, the gang restarts together at 30.
  ExpectPasses(R"(name: gang
policy: fifo
cluster: [{count: 1, prefix: n, gpus: 4}]
jobs:
  - name: g
    duration: 100
    replicas: 2
    resources: {gpus: 2}
    restart: {max: 1, on: [failure], backoff: 0s}
    failures: [{task: 1, after: 30, exit_code: 2}]
expect:
  - ends: {g: succeeded}
  - attempts: {g: 2}
  - restarts: {g: 1}
  - starts: {g: 0}
  - finishes: {g: 130}
)");
}

TEST(ScenarioAttemptTest, ATimeLimitFailsTheJobAfterTheStopGrace) {
  // Killed (signal 15) at its limit plus the stop grace; a time limit never restarts.
  ExpectPasses(R"(name: limit
policy: fifo
options: {stop_grace_seconds: 20}
cluster: [{count: 1, prefix: n, gpus: 4}]
jobs:
  - {name: j, duration: 100, runtime_limit: 60, resources: {gpus: 4}, restart: {max: 3, on: [failure]}}
  - {name: k, duration: 100, runtime_limit: 100, resources: {gpus: 4}}
expect:
  - ends: {j: failed, k: succeeded}
  - finishes: {j: 80, k: 180}
  - attempts: {j*: 1, k: 1}
  - restarts: {j: 0}
)");
}

constexpr const char* kNodeLost = R"(name: node-lost
policy: fifo
cluster: [{count: 2, prefix: n, gpus: 8}]
jobs:
  - {name: j, duration: 100, resources: {gpus: 8}}
events:
  - {at: 40, node_lost: n-0}
expect:
  - on_nodes: {j: [n-0]}
  - ends: {j: succeeded}
  - attempts: {j: 2}
  - restarts: {j: 1}
  - finishes: {j: 140}
)";

TEST(ScenarioAttemptTest, ALostNodeRequeuesItsJobsAndLeaves) {
  ExpectPasses(kNodeLost);
  // The node is gone for good: a job submitted after waits for the one node left.
  std::string later = Replace(kNodeLost, "events:",
                              "  - {name: w, submit: 50, duration: 10, resources: {gpus: 8}}\n"
                              "events:");
  ExpectPasses(Replace(later, "finishes: {j: 140}", "finishes: {j: 140, w: 150}"));
  // A policy that does not restart on node-lost fails the job there.
  std::string no_restart = Replace(kNodeLost, "resources: {gpus: 8}}",
                                   "resources: {gpus: 8}, restart: {max: 3, on: [failure]}}");
  no_restart = Replace(no_restart, "ends: {j: succeeded}", "ends: {j: failed}");
  no_restart = Replace(no_restart, "attempts: {j: 2}", "attempts: {j: 1}");
  no_restart = Replace(no_restart, "restarts: {j: 1}", "restarts: {j: 0}");
  ExpectPasses(Replace(no_restart, "finishes: {j: 140}", "finishes: {j: 40}"));
}

TEST(ScenarioAttemptTest, AGpuFaultRequeuesAndItsGpuIsNotReused) {
  // a and b hold one GPU each; the fault on GPU 0 stops a after the stop grace (at 70);
  // it cannot restart on the drained GPU and waits for b's.
  ExpectPasses(R"(name: gpu-fault
policy: fifo
options: {stop_grace_seconds: 30}
cluster: [{count: 1, prefix: n, gpus: 2}]
jobs:
  - {name: a, duration: 100, resources: {gpus: 1}}
  - {name: b, duration: 100, resources: {gpus: 1}}
events:
  - {at: 40, gpu_fault: {node: n-0, gpu: 0, xid: 48}}
expect:
  - ends: {a: succeeded, b: succeeded}
  - attempts: {a: 2, b: 1}
  - restarts: {a: 1, b: 0}
  - running_at: {69: [a, b], 70: [b], 100: [a]}
  - finishes: {b: 100, a: 200}
)");
}

TEST(ScenarioAttemptTest, WorkDoneWithinTheGraceSucceeds) {
  // Preempted at 90 with a 30 s grace, its work ends at 100: it succeeded, not requeued.
  ExpectPasses(R"(name: grace-rule
policy: priority
options: {grace_seconds: 30}
cluster: [{count: 1, prefix: n, gpus: 2}]
jobs:
  - {name: low, submit: 0, duration: 100, priority: 0, resources: {gpus: 2}}
  - {name: high, submit: 90, duration: 50, priority: 10, resources: {gpus: 2}}
expect:
  - preempted: {low: high}
  - ends: {low: succeeded, high: succeeded}
  - attempts: {low: 1}
  - finishes: {low: 100, high: 150}
  - lost_work: {low: 0}
)");
}

TEST(ScenarioParserTest, ReadsFailuresEventsAndEnds) {
  constexpr const char* kFull = R"(name: full
policy: fifo
options: {stop_grace_seconds: 5}
cluster: [{count: 2, prefix: n, gpus: 4}]
jobs:
  - name: j
    duration: 100
    replicas: 2
    resources: {gpus: 1}
    restart: {max: 2, on: [failure, gpu-fault], backoff: 1m}
    failures: [{attempt: 2, after: 5, task: 1, signal: 9}, {after: 7}]
  - {name: k, duration: 10, resources: {gpus: 1}}
events:
  - {at: 3, node_lost: n-1}
  - {at: 4, gpu_fault: {node: n-0, gpu: 3}}
expect:
  - ends: {j: failed, k*: unfinished}
  - attempts: {k: 1}
)";
  StatusOr<Scenario> s = Parse(kFull);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(*s->options.stop_grace, 5'000'000);
  const SimJob& j = s->jobs[0];
  EXPECT_EQ(j.restart.max, 2);
  EXPECT_EQ(j.restart.backoff, 60'000'000);
  EXPECT_EQ(j.restart.on, 1 | 4);
  EXPECT_EQ(s->jobs[1].restart, DefaultRestartPolicy());
  ASSERT_EQ(j.failures.size(), 2u);
  EXPECT_EQ(j.failures[0].attempt, 2);
  EXPECT_EQ(j.failures[0].after, 5'000'000);
  EXPECT_EQ(j.failures[0].task, 1);
  EXPECT_EQ(j.failures[0].exit_code, 0);
  EXPECT_EQ(j.failures[0].signal, 9);
  EXPECT_EQ(j.failures[1].attempt, 1);
  EXPECT_EQ(j.failures[1].task, 0);
  EXPECT_EQ(j.failures[1].exit_code, 1);
  ASSERT_EQ(s->events.size(), 2u);
  EXPECT_EQ(s->events[0].kind, SimClusterEvent::Kind::kNodeLost);
  EXPECT_EQ(s->events[0].node, "n-1");
  EXPECT_EQ(s->events[0].at, 3'000'000);
  EXPECT_EQ(s->events[1].kind, SimClusterEvent::Kind::kGpuFault);
  EXPECT_EQ(s->events[1].gpu, 3);
  EXPECT_EQ(s->events[1].xid, 79);
  EXPECT_EQ(s->checks[0].pairs,
            (std::vector<std::pair<std::string, std::string>>{{"j", "failed"}, {"k", ""}}));

  auto bad = [&](const std::string& from, const std::string& to,
                 const std::vector<std::string>& parts) {
    ExpectError(Replace(kFull, from, to), parts);
  };
  bad("task: 1, signal", "task: 2, signal", {"jobs[0].failures[0].task", "2 tasks", "line 11"});
  bad("attempt: 2,", "attempt: 0,", {"jobs[0].failures[0].attempt", "line 11"});
  bad("{after: 7}", "{after: -7}", {"jobs[0].failures[1].after", "line 11"});
  bad("{after: 7}", "{after: 7, exit_code: 0}", {"exit_code must be in 1..255", "line 11"});
  bad("{after: 7}", "{after: 7, exit_code: 2, signal: 9}", {"not both", "line 11"});
  bad("{after: 7}", "{after: 7, code: 2}", {"jobs[0].failures[1]", "unknown key 'code'", "line 11"});
  bad("signal: 9}", "signal: 99}", {"signal must be in 1..64", "line 11"});
  bad("node_lost: n-1", "node_lost: n-9", {"events[0].node_lost", "no node named 'n-9'", "line 14"});
  bad("node_lost: n-1}", "node_lost: n-1, gpu_fault: {node: n-0}}", {"events[0]", "one of", "line 14"});
  bad("{at: 3, node_lost", "{node_lost", {"events[0]", "needs a time", "line 14"});
  bad("{at: 3, node_lost", "{at: 3, lost", {"events[0]", "unknown key 'lost'", "line 14"});
  bad("gpu: 3}", "gpu: 4}", {"events[1].gpu_fault", "has no GPU 4", "line 15"});
  bad("{node: n-0, gpu: 3}", "{gpu: 3}", {"events[1].gpu_fault", "needs a node", "line 15"});
  bad("{node: n-0, gpu: 3}", "{node: m, gpu: 3}", {"no node named 'm'", "line 15"});
  bad("gpu: 3}", "gpu: 3, xid: 0}", {"xid must be", "line 15"});
  bad("j: failed", "j: crashed", {"expect[0].ends", "got 'crashed'", "line 17"});
  bad("j: failed", "z: failed", {"no job named 'z'", "line 17"});
  bad("attempts: {k: 1}", "attempts: {q*: 1}", {"no job name starts with 'q'", "line 18"});
  bad("attempts: {k: 1}", "restarts: {k: x}", {"expect[1].restarts", "line 18"});
  bad("stop_grace_seconds: 5", "stop_grace_seconds: -5", {"options.stop_grace_seconds", "line 3"});
}

TEST(JobSimAttemptTest, RejectsBadFailuresAndEvents) {
  StatusOr<Scenario> s = Parse(kNodeLost);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  JobSimOptions options;
  StatusOr<SchedulerPolicy> fifo = ParseSchedulerPolicy("fifo");
  ASSERT_TRUE(fifo.ok());
  options.policy = *fifo;
  auto run = [&](std::vector<SimJob> jobs, std::vector<SimClusterEvent> events) {
    options.cluster_events = std::move(events);
    return RunJobSimulation(s->nodes, s->queues, jobs, options, Catalog()).status();
  };
  const SimJob good = s->jobs[0];
  EXPECT_TRUE(run({good}, s->events).ok());
  for (const SimFailure& f : {SimFailure{0, 0, 0, 1, 0}, SimFailure{1, -1, 0, 1, 0},
                              SimFailure{1, 0, 1, 1, 0}, SimFailure{1, 0, 0, 0, 0}}) {
    SimJob job = good;
    job.failures = {f};
    const Status st = run({job}, {});
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
    EXPECT_NE(st.message().find("failure"), std::string::npos) << st.message();
  }
  SimClusterEvent unknown{0, SimClusterEvent::Kind::kNodeLost, "nope"};
  EXPECT_EQ(run({good}, {unknown}).code(), StatusCode::kInvalidArgument);
  SimClusterEvent no_gpu{0, SimClusterEvent::Kind::kGpuFault, "n-0", 8};
  EXPECT_EQ(run({good}, {no_gpu}).code(), StatusCode::kInvalidArgument);
}

// ---- holds and dependencies ----------------------------------------------------------

constexpr const char* kGates = R"(name: gates
policy: fifo
cluster: [{count: 1, prefix: n, gpus: 4}]
jobs:
  - {name: a, submit: 0, duration: 10, resources: {gpus: 1}}
  - {name: b, submit: 5, duration: 10, resources: {gpus: 1}, hold: true}
  - {name: c, submit: 5, duration: 10, resources: {gpus: 1}, depends: "afterok:a:b,afterany:b"}
  - {name: d, submit: 9, duration: 10, resources: {gpus: 1}, depends: "afternotok:a?after:c"}
events:
  - {at: 20, release: b}
expect:
  - starts: {a: 0, b: 20, c: 30, d: 40}
)";

TEST(ScenarioParserTest, ReadsHoldsDependenciesAndReleases) {
  StatusOr<Scenario> s = Parse(kGates);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_EQ(s->jobs.size(), 4u);
  EXPECT_TRUE(s->events.empty());  // a release is the job's, not the cluster's
  EXPECT_FALSE(s->jobs[0].hold);
  EXPECT_FALSE(s->jobs[0].release.has_value());
  EXPECT_TRUE(s->jobs[0].dependency.items.empty());
  EXPECT_TRUE(s->jobs[1].hold);
  EXPECT_EQ(s->jobs[1].release, std::optional<Micros>(20'000'000));
  // Jobs by their index in the file's job list.
  const DependencySpec c{{Dependency{DependencyKind::kAfterOk, {JobRef{0, -1}, JobRef{1, -1}}},
                          Dependency{DependencyKind::kAfterAny, {JobRef{1, -1}}}},
                         false};
  EXPECT_EQ(s->jobs[2].dependency, c);
  EXPECT_EQ(DependencySpecText(s->jobs[3].dependency), "afternotok:0?after:2");
  // b is held until 20; c waits for b's end (30); d's first item can never hold (a
  // succeeded) and its second holds once c starts at 30, seen by the next cycle (c's
  // end at 40, before the tick at 330).
  StatusOr<ScenarioResult> r = RunScenario(*s, Catalog());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->ok()) << r->Report();
}

TEST(ScenarioParserTest, DependsAndReleasesNameJobsOfTheFile) {
  auto bad = [](const std::string& from, const std::string& to,
                const std::vector<std::string>& parts) {
    ExpectError(Replace(kGates, from, to), parts);
  };
  const std::string c_depends = "depends: \"afterok:a:b,afterany:b\"";
  bad("afterok:a:b", "afterok:a:zed", {"jobs[2].depends", "no job named 'zed'", "line 7"});
  // Only jobs submitted before it: earlier, or at the same time and listed before.
  bad(c_depends, "depends: \"afterok:d\"",
      {"jobs[2].depends", "job 'd' is submitted after 'c'", "line 7"});
  bad("hold: true}", "hold: true, depends: \"afterany:c\"}",
      {"jobs[1].depends", "job 'c' is submitted after 'b'", "line 6"});
  bad(c_depends, "depends: \"afterok:c\"", {"jobs[2].depends", "cannot depend on itself"});
  bad(c_depends, "depends: singleton", {"jobs[2].depends", "not a dependency", "line 7"});
  bad(c_depends, "depends: \"afterok\"", {"jobs[2].depends", "not a dependency", "line 7"});
  bad(c_depends, "depends: \"afterever:a\"", {"jobs[2].depends", "not a dependency", "line 7"});
  bad("after:c", "after:c,after:a", {"jobs[3].depends", "not both", "line 8"});
  bad(c_depends, "depends: [a]", {"jobs[2].depends", "line 7"});
  // The API's dependency names jobs by id: refused, pointing to depends.
  bad(c_depends, "dependency: \"afterok:1\"",
      {"jobs[2].dependency", "depends", "by job name", "line 7"});
  bad("release: b", "release: a",
      {"events[0].release", "job 'a' is not held", "hold: true", "line 10"});
  bad("release: b", "release: zz", {"events[0].release", "no job named 'zz'", "line 10"});
  bad("{at: 20, release", "{at: 3, release", {"events[0].release", "before its submission"});
  bad("{at: 20, release: b}", "{at: 20, release: b}\n  - {at: 30, release: b}",
      {"events[1].release", "released twice", "line 11"});
  bad("{at: 20, release: b}", "{at: 20, release: b, node_lost: n-0}", {"events[0]", "one of"});
}

TEST(JobSimGatesTest, RejectsBadHoldsAndDependencies) {
  StatusOr<Scenario> s = Parse(kGates);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  JobSimOptions options;
  StatusOr<SchedulerPolicy> fifo = ParseSchedulerPolicy("fifo");
  ASSERT_TRUE(fifo.ok());
  options.policy = *fifo;
  auto run = [&](const std::vector<SimJob>& jobs) {
    return RunJobSimulation(s->nodes, s->queues, jobs, options, Catalog()).status();
  };
  EXPECT_TRUE(run(s->jobs).ok());
  auto expect_bad = [&](const std::function<void(std::vector<SimJob>&)>& change,
                        const std::string& part) {
    std::vector<SimJob> jobs = s->jobs;
    change(jobs);
    const Status st = run(jobs);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << part;
    EXPECT_NE(st.message().find(part), std::string::npos) << st.message();
  };
  expect_bad([](auto& j) { j[0].release = 20'000'000; }, "not submitted held");
  expect_bad([](auto& j) { j[1].release = 1'000'000; }, "before its submission");
  expect_bad([](auto& j) { j[2].dependency.items[0].jobs[0].id = 2; }, "itself");
  expect_bad([](auto& j) { j[2].dependency.items[0].jobs[0].id = 9; }, "no job 9");
  expect_bad([](auto& j) { j[2].dependency.items[0].jobs[0].index = 3; }, "array");
  expect_bad(
      [](auto& j) {
        j[2].dependency.items[1] = Dependency{DependencyKind::kSingleton, {}};
      },
      "singleton");
}

}  // namespace
}  // namespace tessera
