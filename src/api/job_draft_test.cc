#include "api/job_draft.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "api/job_codec.h"
#include "api/job_keys.h"

namespace tessera {
namespace job_draft_test {

const GpuCatalog& Cat() { return GpuCatalog::Default(); }

// A draft with every field given reads back, through the codec, as the job file that
// states the same: the draft's keys and value forms are the codec's.
TEST(JobDraftTest, EveryFieldReadsBackAsTheSameJobFile) {
  JobDraft d;
  d.name = "train";
  d.queue = "team-a";
  d.priority = int64_t{5};
  d.command = {"torchrun", "train.py"};
  d.env = {{{"A", "1"}}};
  d.working_dir = "/work";
  d.submit_dir = "/home/ada";
  d.replicas = 2;
  d.topology = TopologyPolicy{TopologyScope::kNode, true};
  d.resources.gpus = 2;
  d.resources.gpu_model = {"A100-80GB", "H100-80GB"};
  d.resources.gpu_memory = "20GiB";
  d.resources.cpu = int64_t{8};
  d.resources.memory = "64GiB";
  d.checkpoint_interval = "30m";
  d.runtime_limit = "24h";
  d.preemptible = true;
  d.hold_if_unfit = true;
  d.restart.max = 2;
  d.restart.on = static_cast<uint8_t>(RestartOn::kFailure);
  d.restart.backoff = "10s";
  d.array = "0-9%4";
  d.dependency = "afterok:12";
  d.hold = true;
  d.signal_name = "USR1";
  d.signal_before = 90'000'000;
  const Json doc = JobDraftToJson(d);
  StatusOr<JobSubmission> from_draft = JobSubmissionFromJson(doc, Cat());
  ASSERT_TRUE(from_draft.ok()) << from_draft.status().ToString() << "\n" << doc.dump(2);
  StatusOr<JobSubmission> from_file = ParseJobYaml(R"(
name: train
queue: team-a
priority: 5
command: [torchrun, train.py]
env: {A: "1"}
working_dir: /work
submit_dir: /home/ada
replicas: 2
topology: {scope: node, hard: true}
resources: {gpus: 2, gpu_model: [A100-80GB, H100-80GB], gpu_memory: 20GiB, cpu: 8,
            memory: 64GiB}
checkpoint: {interval: 30m}
runtime_limit: 24h
preemptible: true
hold_if_unfit: true
restart: {max: 2, on: [failure], backoff: 10s}
array: "0-9%4"
dependency: "afterok:12"
hold: true
signal: {name: USR1, before: 90s}
)",
                                                   Cat());
  ASSERT_TRUE(from_file.ok()) << from_file.status().ToString();
  EXPECT_EQ(*from_draft, *from_file);
}

TEST(JobDraftTest, OnlyTheGivenFieldsAreWritten) {
  JobDraft d;
  d.command = {"true"};
  EXPECT_EQ(JobDraftToJson(d), Json::parse(R"({"command": ["true"]})"));
  d.env.emplace();
  d.resources.gpu_model = {"H100-80GB"};  // one model: a string
  d.resources.cpu = std::string("500m");
  d.priority = std::string("high");       // a priority class name
  d.restart.max = 0;
  EXPECT_EQ(JobDraftToJson(d), Json::parse(R"({"command": ["true"], "env": {}, "priority": "high",
      "resources": {"gpu_model": "H100-80GB", "cpu": "500m"}, "restart": {"max": 0}})"));
}

TEST(JobDraftTest, FlagValuesAreCheckedByTheCodecsParsersAndNameTheFlag) {
  EXPECT_EQ(*DurationFlag("--checkpoint-interval", "1h30m"), "1h30m");
  EXPECT_EQ(*MemoryFlag("--memory", "20GiB"), "20GiB");
  EXPECT_EQ(*MemoryFlag("--memory", "4G"), "4GiB");  // Slurm's, as exact MiB
  EXPECT_EQ(*CpuFlag("--cpu", "500m"), "500m");
  EXPECT_EQ(*GpuFractionFlag("--gpu-fraction", "0.25"), "0.25");
  EXPECT_EQ(*RuntimeLimitFlag("--runtime-limit", "90"), "90");  // seconds, as in a file
  EXPECT_EQ(*RuntimeLimitFlag("--runtime-limit", "1:00:00"), "1h");
  EXPECT_EQ(*RuntimeLimitFlag("--runtime-limit", "UNLIMITED"), std::nullopt);
  EXPECT_EQ(*RestartOnFlag("--restart-on", "failure,gpu-fault"),
            static_cast<uint8_t>(RestartOn::kFailure) | static_cast<uint8_t>(RestartOn::kGpuFault));
  EXPECT_EQ(*IntFlag("--gpus", "8", 0), 8);
  const std::vector<std::pair<Status, std::string>> bad = {
      {DurationFlag("--checkpoint-interval", "5x").status(), "--checkpoint-interval: "},
      {DurationFlag("--restart-backoff", "soon").status(), "--restart-backoff: "},
      {RuntimeLimitFlag("--runtime-limit", "a day").status(), "--runtime-limit: "},
      {MemoryFlag("--gpu-memory", "lots").status(), "--gpu-memory: "},
      {CpuFlag("--cpu", "four").status(), "--cpu: "},
      {GpuFractionFlag("--gpu-fraction", "1.5").status(), "--gpu-fraction expects"},
      {RestartOnFlag("--restart-on", "oom").status(), "--restart-on: "},
      {IntFlag("--replicas", "0", 1).status(), "--replicas expects an integer >= 1"}};
  for (const auto& [status, prefix] : bad) {
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << prefix;
    EXPECT_EQ(status.message().rfind(prefix, 0), 0U) << status.message();
  }
  // The value is quoted, so the user sees what was refused.
  EXPECT_NE(CpuFlag("--cpu", "four").status().message().find("'four'"), std::string::npos);
}

// JobSpecKeyPaths is the codec's list: each key is read (a wrong value is refused for
// the value, never as an unknown key), others are unknown, and every key the encoder
// writes for a whole submission is in it.
TEST(JobKeysTest, TheListedKeysAreTheCodecs) {
  const std::vector<std::string> paths = job_keys::JobSpecKeyPaths();
  const std::set<std::string> listed(paths.begin(), paths.end());
  for (const std::string& path : paths) {
    Json doc = {{"command", {"true"}}};
    const size_t dot = path.find('.');
    if (dot == std::string::npos) {
      doc[path] = Json::array({Json::object()});  // a wrong type for every key
    } else {
      doc[path.substr(0, dot)] = {{path.substr(dot + 1), Json::array({Json::object()})}};
    }
    StatusOr<JobSubmission> job = JobSubmissionFromJson(doc, Cat());
    ASSERT_FALSE(job.ok()) << path;
    EXPECT_EQ(job.status().message().find("unknown"), std::string::npos)
        << path << ": " << job.status().message();
  }
  Json unknown = {{"command", {"true"}}, {"submitdir", "/x"}};
  EXPECT_NE(JobSubmissionFromJson(unknown, Cat()).status().message().find("submitdir"),
            std::string::npos);

  StatusOr<JobSubmission> full = ParseJobYaml(R"(
name: a
command: [true]
env: {A: "1"}
working_dir: /w
submit_dir: /s
resources: {gpus: 1, gpu_model: H100-80GB, gpu_fraction: 0.5, gpu_memory: 10GiB}
checkpoint: {interval: 30m, dir: /c}
runtime_limit: 1h
hold_if_unfit: true
restart: {max: 1}
array: "0-3"
dependency: "afterok:1"
hold: true
priority_class: high
signal: {name: USR1}
)",
                                              Cat());
  ASSERT_TRUE(full.ok()) << full.status().ToString();
  const Json written = JobSubmissionToJson(*full, Cat());
  for (const auto& [key, value] : written.items()) {
    EXPECT_TRUE(listed.contains(key)) << key;
    if (value.is_object() && key != job_keys::kEnv) {  // env's keys are the user's
      for (const auto& [sub, unused] : value.items()) {
        EXPECT_TRUE(listed.contains(key + "." + sub)) << key << "." << sub;
      }
    }
  }
}

}  // namespace job_draft_test
}  // namespace tessera
