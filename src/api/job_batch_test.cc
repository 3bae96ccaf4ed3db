#include "api/job_batch.h"

#include <gtest/gtest.h>

#include <string>

#include "model/testing/test_catalog.h"

namespace tessera {
namespace {

using testing::Catalog;

std::vector<JobSubmission> Batch(const std::string& text, BatchFormat format) {
  StatusOr<std::vector<JobSubmission>> jobs = ParseJobBatch(text, format, Catalog());
  EXPECT_TRUE(jobs.ok()) << jobs.status().ToString();
  return jobs.ok() ? *jobs : std::vector<JobSubmission>{};
}

Status BatchError(const std::string& text, BatchFormat format, size_t max_jobs = kMaxBatchJobs) {
  StatusOr<std::vector<JobSubmission>> jobs = ParseJobBatch(text, format, Catalog(), max_jobs);
  EXPECT_FALSE(jobs.ok()) << text;
  return jobs.ok() ? Status::Ok() : jobs.status();
}

TEST(JobBatchTest, JsonJobsReadAsJobFilesInOrder) {
  const std::vector<JobSubmission> jobs = Batch(
      R"({"jobs": [{"name": "a", "command": "true", "resources": {"gpus": 2}},
                   {"name": "b", "command": ["x"], "replicas": 3}],
          "submit_dir": "/home/u"})",
      BatchFormat::kJson);
  ASSERT_EQ(jobs.size(), 2u);
  EXPECT_EQ(jobs[0].spec.name, "a");
  EXPECT_EQ(jobs[0].spec.tasks[0].gpu_count, 2);
  EXPECT_EQ(jobs[1].spec.tasks.size(), 3u);
  EXPECT_EQ(jobs[0].submit_dir, "/home/u");
  EXPECT_EQ(jobs[1].submit_dir, "/home/u");
  // The same as the job file alone.
  EXPECT_EQ(jobs[1], ParseJobJson(R"({"name": "b", "command": ["x"], "replicas": 3,
                                      "submit_dir": "/home/u"})",
                                  Catalog())
                         .value());
}

TEST(JobBatchTest, YamlJobsListReadsTheSame) {
  const std::vector<JobSubmission> yaml = Batch(
      "jobs:\n"
      "  - name: a\n"
      "    command: \"true\"\n"
      "    resources: {gpus: 2}\n"
      "  - {name: b, command: [x], replicas: 3, submit_dir: /own}\n"
      "submit_dir: /home/u\n",
      BatchFormat::kYaml);
  const std::vector<JobSubmission> json = Batch(
      R"({"jobs": [{"name": "a", "command": "true", "resources": {"gpus": 2}},
                   {"name": "b", "command": ["x"], "replicas": 3, "submit_dir": "/own"}],
          "submit_dir": "/home/u"})",
      BatchFormat::kJson);
  EXPECT_EQ(yaml, json);
  ASSERT_EQ(yaml.size(), 2u);
  EXPECT_EQ(yaml[1].submit_dir, "/own");  // a job's own wins
}

TEST(JobBatchTest, AnErrorNamesTheJobAndItsField) {
  Status s = BatchError(
      R"({"jobs": [{"command": "true"}, {"command": "true"}, {"command": "true"},
                   {"command": "true", "resources": {"gpus": 65}}]})",
      BatchFormat::kJson);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message().rfind("jobs[3].resources.gpus: must be between 0 and 64", 0), 0u)
      << s.message();
  s = BatchError(R"({"jobs": [{"command": "true"}, {"name": "no-command"}]})", BatchFormat::kJson);
  EXPECT_EQ(s.message().rfind("jobs[1].command: is required", 0), 0u) << s.message();
  s = BatchError(R"({"jobs": [{"command": "true", "replica": 2}]})", BatchFormat::kJson);
  EXPECT_EQ(s.message().rfind("jobs[0]: unknown key 'replica' (did you mean 'replicas'?)", 0), 0u)
      << s.message();
  s = BatchError("jobs:\n  - command: \"true\"\n  - command: \"true\"\n    resources: {gpus: -1}\n",
                 BatchFormat::kYaml);
  EXPECT_EQ(s.message().rfind("jobs[1].resources.gpus: ", 0), 0u) << s.message();
  EXPECT_NE(s.message().find("(line 4"), std::string::npos) << s.message();
  s = BatchError("jobs:\n  - command: \"true\"\n  - just text\n", BatchFormat::kYaml);
  EXPECT_EQ(s.message().rfind("jobs[1]: expected a job spec", 0), 0u) << s.message();
}

TEST(JobBatchTest, TheDocumentItselfIsChecked) {
  for (const char* text : {"[]", R"({"job": []})", R"({"jobs": {}})", R"({"jobs": []})",
                           R"({"jobs": [1]})", R"({"jobs": [{"command": "true"}], "x": 1})",
                           R"({"jobs": [{"command": "true"}], "submit_dir": "rel"})", "{"}) {
    EXPECT_EQ(BatchError(text, BatchFormat::kJson).code(), StatusCode::kInvalidArgument) << text;
  }
  for (const char* text :
       {"", "- a\n", "jobs: 3\n", "jobs: []\n", "jobs: [{command: x}]\nx: 1\n",
        "jobs: [{command: x}]\nsubmit_dir: rel\n", "jobs: [{command: x}]\n---\n", "{},"}) {
    EXPECT_EQ(BatchError(text, BatchFormat::kYaml).code(), StatusCode::kInvalidArgument) << text;
  }
}

TEST(JobBatchTest, BatchesOverTheirBoundsAreOutOfRange) {
  Status s = BatchError(R"({"jobs": [{"command": "a"}, {"command": "b"}, {"command": "c"}]})",
                        BatchFormat::kJson, 2);
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange);
  EXPECT_NE(s.message().find("3 jobs in one batch, more than 2"), std::string::npos) << s.message();
  // Gangs count by their tasks.
  std::string gangs = R"({"jobs": [)";
  for (int i = 0; i < 100; ++i) {
    gangs += std::string(i ? "," : "") + R"({"command": "x", "replicas": 1024})";
  }
  s = BatchError(gangs + "]}", BatchFormat::kJson);
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange);
  EXPECT_NE(s.message().find("tasks"), std::string::npos) << s.message();
  // An alias repeats its text: the batch's expanded size is bounded, not only its own.
  std::string yaml = "jobs:\n  - command: &big [\"" + std::string(60'000, 'x') + "\"]\n";
  for (int i = 0; i < 400; ++i) {
    yaml += "  - command: *big\n";
  }
  s = BatchError(yaml, BatchFormat::kYaml);
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange);
  EXPECT_NE(s.message().find("bytes"), std::string::npos) << s.message();
}

TEST(JobBatchTest, LooksLikeABatchOnlyWithAJobsKey) {
  EXPECT_TRUE(LooksLikeJobBatch(R"( {"jobs": []})"));
  EXPECT_TRUE(LooksLikeJobBatch("# jobs\njobs:\n  - command: x\n"));
  EXPECT_FALSE(LooksLikeJobBatch(R"({"command": "x"})"));
  EXPECT_FALSE(LooksLikeJobBatch("command: x\n"));
  EXPECT_FALSE(LooksLikeJobBatch("{"));
  EXPECT_FALSE(LooksLikeJobBatch("a: [\n"));
}

}  // namespace
}  // namespace tessera
