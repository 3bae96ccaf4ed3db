// The CLI's flags and the Slurm translator build their job documents through
// api/job_draft.h: what they send reads back, through the server's codec, as the job
// file that says the same, and a bad value names its flag.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "api/job_codec.h"
#include "cli/cluster_commands.h"
#include "cli/slurm_script.h"

namespace tessera {
namespace job_draft_flags_test {

using nlohmann::json;

JobSubmission ServerReads(const json& doc) {
  StatusOr<JobSubmission> job = JobSubmissionFromJson(doc, GpuCatalog::Default());
  EXPECT_TRUE(job.ok()) << job.status().ToString() << "\n" << doc.dump(2);
  return job.ok() ? *job : JobSubmission{};
}

JobSubmission File(const std::string& yaml) {
  StatusOr<JobSubmission> job = ParseJobYaml(yaml, GpuCatalog::Default());
  EXPECT_TRUE(job.ok()) << job.status().ToString();
  return job.ok() ? *job : JobSubmission{};
}

TEST(JobDraftFlagsTest, SubmitFlagsMeanWhatTheSameJobFileMeans) {
  SubmitOptions o;
  o.name = "train";
  o.queue = "team-a";
  o.priority = "5";
  o.replicas = "2";
  o.gpus = "1";
  o.gpu_model = "H100-80GB";
  o.gpu_fraction = "0.5";
  o.cpu = "500m";
  o.memory = "4G";  // Slurm's form: 4 GiB
  o.checkpoint_interval = "30m";
  o.runtime_limit = "1:30:00";  // Slurm's form: 1h30m
  o.restart_max = "2";
  o.restart_on = "gpu-fault, failure";
  o.restart_backoff = "10s";
  o.env = {"A=1"};
  o.submit_dir = "/home/ada";
  o.hold_if_unfit = true;
  o.command = {"python", "train.py"};
  StatusOr<json> spec = BuildJobSpec(o);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(ServerReads(*spec), File(R"(
name: train
queue: team-a
priority: 5
replicas: 2
resources: {gpus: 1, gpu_model: H100-80GB, gpu_fraction: 0.5, cpu: 500m, memory: 4GiB}
checkpoint: {interval: 30m}
runtime_limit: 1h30m
restart: {max: 2, on: [failure, gpu-fault], backoff: 10s}
env: {A: "1"}
submit_dir: /home/ada
hold_if_unfit: true
command: [python, train.py]
)"));
  // The defaults stay the server's to apply: no cpu or memory given, none sent.
  SubmitOptions plain;
  plain.command = {"true"};
  const JobSubmission job = ServerReads(*BuildJobSpec(plain));
  EXPECT_TRUE(job.cpu_defaulted);
  EXPECT_TRUE(job.memory_defaulted);
}

TEST(JobDraftFlagsTest, ImageFlagsMeanWhatTheSameJobFileMeans) {
  SubmitOptions o;
  o.image = "ubuntu:22.04";
  o.container_mounts = "/data:/in,/scratch:/scratch:rw";
  o.container_workdir = "/w";
  StatusOr<json> spec = BuildJobSpec(o);  // no command: the image's own
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(ServerReads(*spec), File(R"(
image: docker.io/library/ubuntu:22.04
container: {mounts: ["/data:/in", "/scratch:/scratch:rw"], workdir: /w}
env: {}
)"));
  o.image = "";
  o.command = {"true"};
  EXPECT_NE(BuildJobSpec(o).status().message().find("need an image (--image)"), std::string::npos);
  o.image = "UPPER";
  EXPECT_EQ(BuildJobSpec(o).status().message().rfind("--image: ", 0), 0U);
  o.image = "ubuntu";
  o.container_mounts = "relative:/x";
  EXPECT_EQ(BuildJobSpec(o).status().message().rfind("--container-mounts: ", 0), 0U);
}

TEST(JobDraftFlagsTest, ABadValueNamesItsFlagAndNothingIsSent) {
  const std::vector<std::pair<std::string, std::function<void(SubmitOptions&)>>> cases = {
      {"--runtime-limit", [](SubmitOptions& o) { o.runtime_limit = "a while"; }},
      {"--memory", [](SubmitOptions& o) { o.memory = "lots"; }},
      {"--gpu-memory", [](SubmitOptions& o) { o.gpu_memory = "20 gigs"; }},
      {"--cpu", [](SubmitOptions& o) { o.cpu = "four"; }},
      {"--checkpoint-interval", [](SubmitOptions& o) { o.checkpoint_interval = "5x"; }},
      {"--restart-backoff", [](SubmitOptions& o) { o.restart_backoff = "soon"; }},
      {"--restart-on", [](SubmitOptions& o) { o.restart_on = "oom"; }},
      {"--priority", [](SubmitOptions& o) { o.priority = "high"; }}};
  for (const auto& [flag, set] : cases) {
    SubmitOptions o;
    o.command = {"true"};
    set(o);
    StatusOr<json> spec = BuildJobSpec(o);
    ASSERT_FALSE(spec.ok()) << flag;
    EXPECT_EQ(spec.status().message().rfind(flag, 0), 0U) << spec.status().message();
    ClientConfig config;
    config.server = "http://127.0.0.1:1";  // nothing listens: a request would fail otherwise
    config.connect_timeout_ms = 100;
    std::ostringstream out, err;
    EXPECT_EQ(RunSubmit(config, o, out, err), 2) << flag;
    EXPECT_NE(err.str().find(flag), std::string::npos) << err.str();
  }
}

SlurmJobInput Script(const std::string& text) {
  SlurmJobInput in;
  in.script_name = "train.sh";
  in.script_text = text;
  in.submit_dir = "/home/ada/proj";
  return in;
}

TEST(JobDraftFlagsTest, ASlurmScriptMeansWhatTheSameJobFileMeans) {
  StatusOr<SlurmJob> job = TranslateSlurmJob(
      Script("#!/bin/bash\n#SBATCH -J train -N 1 -n 2 --gpus-per-task=1 -c 4 --mem=16G\n"
             "#SBATCH -t 2:00:00 -p team-a --qos=high --requeue --export=NONE\n"
             "#SBATCH --array=0-3 --hold --signal=USR1@90\n"
             "#TESSERA --gpu-model=H100-80GB --checkpoint-interval=30m\n"
             "#TESSERA --restart-on=gpu-fault,failure --restart-backoff=1m\nrun\n"),
      GpuCatalog::Default());
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  JobSubmission read = ServerReads(job->spec);
  // The command is the batch prelude's: compared apart.
  EXPECT_EQ(read.command.size(), 9U);
  read.command = {"run"};
  EXPECT_EQ(read, File(R"(
name: train
queue: team-a
priority: high
replicas: 2
topology: {scope: node, hard: true}
resources: {gpus: 1, gpu_model: H100-80GB, cpu: 4, memory: 8GiB}
runtime_limit: 2h
restart: {on: [failure, gpu-fault], backoff: 1m}
array: "0-3"
hold: true
signal: {name: USR1, before: 90s}
checkpoint: {interval: 30m}
env: {}
submit_dir: /home/ada/proj
command: [run]
)"));
}

TEST(JobDraftFlagsTest, ABadTesseraLineValueNamesItsFlag) {
  for (const std::string line :
       {"--checkpoint-interval=5x", "--restart-backoff=soon", "--restart-on=oom",
        "--gpu-fraction=2"}) {
    StatusOr<SlurmJob> job = TranslateSlurmJob(
        Script("#!/bin/bash\n#TESSERA " + line + "\nrun\n"), GpuCatalog::Default());
    ASSERT_FALSE(job.ok()) << line;
    const std::string flag = line.substr(0, line.find('='));
    EXPECT_EQ(job.status().message().rfind(flag, 0), 0U) << job.status().message();
  }
}

}  // namespace job_draft_flags_test
}  // namespace tessera
