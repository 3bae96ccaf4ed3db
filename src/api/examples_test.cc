// Every job file in examples/ must parse, and says what its comments promise.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "api/job_codec.h"
#include "model/testing/test_catalog.h"

#ifndef TESSERA_EXAMPLES_DIR
#error "TESSERA_EXAMPLES_DIR must point at the examples folder"
#endif

namespace tessera {
namespace {

using testing::Catalog;

StatusOr<JobSubmission> Load(const std::string& name) {
  std::ifstream in(std::filesystem::path(TESSERA_EXAMPLES_DIR) / name);
  if (!in) {
    return NotFoundError("cannot read " + name);
  }
  std::stringstream text;
  text << in.rdbuf();
  return ParseJobYaml(text.str(), Catalog());
}

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

TEST(ExamplesTest, EveryJobFileParses) {
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(TESSERA_EXAMPLES_DIR)) {
    if (entry.path().extension() != ".yaml") {
      continue;
    }
    ++count;
    StatusOr<JobSubmission> job = Load(entry.path().filename().string());
    ASSERT_TRUE(job.ok()) << entry.path() << ": " << job.status().ToString();
    EXPECT_EQ(job->spec.name, entry.path().stem().string());
    EXPECT_FALSE(job->command.empty());
    // Runnable by the plain POSIX shell.
    EXPECT_EQ(job->command[0], "/bin/sh") << entry.path();
    // Round-trips through the JSON form the server stores.
    StatusOr<JobSubmission> back =
        ParseJobJson(JobSubmissionToJson(*job, Catalog()).dump(), Catalog());
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(*back, *job) << entry.path();
  }
  EXPECT_GE(count, 4);
}

TEST(ExamplesTest, TrainGang) {
  StatusOr<JobSubmission> job = Load("train-gang.yaml");
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  const JobSpec& s = job->spec;
  ASSERT_EQ(s.tasks.size(), 2U);
  EXPECT_EQ(s.tasks[0].gpu_count, 8);
  EXPECT_TRUE(s.tasks[0].whole_gpus());
  EXPECT_EQ(s.tasks[0].models.size(), 1U);
  EXPECT_TRUE(s.tasks[0].models.Contains(*Catalog().Find("H100-80GB")));
  EXPECT_EQ(s.topology.scope, TopologyScope::kNvlinkDomain);
  EXPECT_FALSE(s.topology.hard);
  EXPECT_EQ(s.checkpoint_interval, int64_t{600} * 1'000'000);
  EXPECT_TRUE(s.checkpoint_on_signal);
  EXPECT_TRUE(job->checkpoint_dir.empty());
  const std::string& script = job->command.back();
  for (const char* var : {"RANK", "WORLD_SIZE", "MASTER_ADDR", "CUDA_VISIBLE_DEVICES",
                          "TESSERA_CHECKPOINT_DIR", "sleep 2"}) {
    EXPECT_TRUE(Contains(script, var)) << var;
  }
}

TEST(ExamplesTest, Inference) {
  StatusOr<JobSubmission> job = Load("inference.yaml");
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  ASSERT_EQ(job->spec.tasks.size(), 1U);
  const TaskRequest& t = job->spec.tasks[0];
  EXPECT_TRUE(t.fractional());
  EXPECT_EQ(t.gpu_milli.value(), 250);
  EXPECT_EQ(t.gpu_memory.value(), 20480);
  EXPECT_FALSE(job->spec.preemptible);
  EXPECT_EQ(job->env.at("MAX_BATCH"), "8");
  EXPECT_TRUE(Contains(job->command.back(), "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"));
  EXPECT_TRUE(Contains(job->command.back(), "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"));
}

TEST(ExamplesTest, MigNotebook) {
  StatusOr<JobSubmission> job = Load("mig-notebook.yaml");
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  const TaskRequest& t = job->spec.tasks[0];
  EXPECT_TRUE(t.wants_mig());
  EXPECT_EQ(t.mig_profile, "1g.10gb");
  EXPECT_EQ(t.gpu_count, 1);
  GpuModelId a100 = *Catalog().Find("A100-80GB");
  EXPECT_TRUE(t.models.Contains(a100));
  EXPECT_TRUE(Catalog().Get(a100).FindMigProfile("1g.10gb").has_value());
  EXPECT_EQ(t.TotalGpuMilli(Catalog()).value(), 142);
}

TEST(ExamplesTest, PreprocessCpu) {
  StatusOr<JobSubmission> job = Load("preprocess-cpu.yaml");
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  const TaskRequest& t = job->spec.tasks[0];
  EXPECT_TRUE(t.cpu_only());
  EXPECT_EQ(t.cpu.value(), 2000);
  EXPECT_EQ(t.memory.value(), 4096);
  EXPECT_EQ(job->working_dir, "/tmp");
  EXPECT_EQ(job->env.at("OMP_NUM_THREADS"), "2");
}

}  // namespace
}  // namespace tessera
