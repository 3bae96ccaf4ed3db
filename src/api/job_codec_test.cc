#include "api/job_codec.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <optional>
#include <string>

#include "api/json_fields.h"
#include "base/testing/time_units.h"
#include "model/testing/test_catalog.h"

namespace tessera {
namespace {

using testing::Catalog;
using testing::kSecond;

GpuModelId Model(const std::string& name) { return *Catalog().Find(name); }

JobSubmission Json_(const std::string& text) {
  StatusOr<JobSubmission> job = ParseJobJson(text, Catalog());
  EXPECT_TRUE(job.ok()) << job.status().ToString();
  return job.ok() ? *job : JobSubmission{};
}

JobSubmission Yaml(const std::string& text) {
  StatusOr<JobSubmission> job = ParseJobYaml(text, Catalog());
  EXPECT_TRUE(job.ok()) << job.status().ToString();
  return job.ok() ? *job : JobSubmission{};
}

std::string JsonError(const std::string& text) {
  StatusOr<JobSubmission> job = ParseJobJson(text, Catalog());
  EXPECT_FALSE(job.ok()) << text;
  EXPECT_EQ(job.status().code(), StatusCode::kInvalidArgument);
  return job.status().message();
}

std::string YamlError(const std::string& text) {
  StatusOr<JobSubmission> job = ParseJobYaml(text, Catalog());
  EXPECT_FALSE(job.ok()) << text;
  EXPECT_EQ(job.status().code(), StatusCode::kInvalidArgument);
  return job.status().message();
}

// Wraps `resources` into an otherwise minimal job.
std::string WithResources(const std::string& resources) {
  return R"({"command": ["true"], "resources": )" + resources + "}";
}

constexpr const char* kFullJson = R"({
  "name": "train", "queue": "team-a", "user": "alice", "priority": 5,
  "command": ["python", "train.py", "--epochs", "3"],
  "env": {"NCCL_DEBUG": "INFO", "_X1": ""}, "working_dir": "/work/run", "replicas": 2,
  "resources": {"gpus": 8, "gpu_model": ["A100-80GB", "H100-80GB"], "gpu_memory": "40GiB",
                "cpu": "4", "memory": "64GiB", "gpu_topology": "require-local"},
  "topology": {"scope": "nvlink", "hard": true},
  "checkpoint": {"interval": "30m", "on_signal": true, "dir": "/shared/ckpt"},
  "runtime_limit": "4h", "preemptible": false })";

constexpr const char* kFullYaml = R"(
name: train
queue: team-a
user: alice
priority: 5
command: [python, train.py, --epochs, 3]
env:
  NCCL_DEBUG: INFO
  _X1: ""
working_dir: /work/run
replicas: 2
resources:
  gpus: 8
  gpu_model: [A100-80GB, H100-80GB]
  gpu_memory: 40GiB
  cpu: 4
  memory: 64GiB
  gpu_topology: require-local
topology: {scope: nvlink, hard: true}
checkpoint:
  interval: 30m
  on_signal: true
  dir: /shared/ckpt
runtime_limit: 4h
preemptible: false
)";

TEST(JobCodecTest, AnImageMakesTheCommandOptionalAndRoundTrips) {
  StatusOr<JobSubmission> job = ParseJobYaml(R"(
image: nvcr.io#nvidia/pytorch:24.05-py3
container:
  mounts: [/data/imagenet:/data, "/scratch/:/scratch:rw"]
  workdir: /workspace
  entrypoint: python
  mount_home: false
)",
                                             Catalog());
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_TRUE(job->command.empty());
  EXPECT_TRUE(job->spec.tasks[0].needs_containers);  // the scheduler's part of it
  const ContainerSpec& c = job->container;
  EXPECT_EQ(c.image, "nvcr.io/nvidia/pytorch:24.05-py3");
  ASSERT_EQ(c.mounts.size(), 2U);
  EXPECT_EQ(c.mounts[0], (ContainerMount{"/data/imagenet", "/data", true}));
  EXPECT_EQ(c.mounts[1], (ContainerMount{"/scratch", "/scratch", false}));
  EXPECT_EQ(c.workdir, "/workspace");
  EXPECT_TRUE(c.entrypoint_set);
  EXPECT_EQ(c.entrypoint, std::vector<std::string>{"python"});
  EXPECT_FALSE(c.mount_home);
  StatusOr<JobSubmission> back =
      JobSubmissionFromJson(JobSubmissionToJson(*job, Catalog()), Catalog());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, *job);

  // Without an image the command is still required, and container settings need one.
  EXPECT_NE(ParseJobYaml("name: x\n", Catalog()).status().message().find("command"),
            std::string::npos);
  EXPECT_EQ(ParseJobYaml("command: [true]\ncontainer: {workdir: /w}\n", Catalog())
                .status()
                .message()
                .rfind("container: needs an image", 0),
            0U);
  Status bad =
      ParseJobYaml("image: ubuntu\ncontainer: {mounts: [/a, /etc:/proc]}\n", Catalog()).status();
  EXPECT_EQ(bad.message().rfind("container.mounts[1]: ", 0), 0U) << bad.message();
  bad = ParseJobYaml("image: Ubuntu\n", Catalog()).status();
  EXPECT_EQ(bad.message().rfind("image: ", 0), 0U) << bad.message();
  bad = ParseJobYaml("image: ubuntu\ncontainer: {mount: [/a]}\n", Catalog()).status();
  EXPECT_NE(bad.message().find("mounts"), std::string::npos) << bad.message();  // suggested
}

TEST(JobCodecTest, ReadsEveryFieldOfTheJsonFormat) {
  JobSubmission job = Json_(kFullJson);
  const JobSpec& s = job.spec;
  EXPECT_EQ(s.name, "train");
  EXPECT_EQ(s.queue, "team-a");
  EXPECT_EQ(s.user, "alice");
  EXPECT_EQ(s.priority, 5);
  EXPECT_EQ(job.command, (std::vector<std::string>{"python", "train.py", "--epochs", "3"}));
  EXPECT_EQ(job.env.at("NCCL_DEBUG"), "INFO");
  EXPECT_EQ(job.env.at("_X1"), "");
  EXPECT_EQ(job.working_dir, "/work/run");
  EXPECT_EQ(job.checkpoint_dir, "/shared/ckpt");
  ASSERT_EQ(s.tasks.size(), 2U);
  EXPECT_EQ(s.tasks[0], s.tasks[1]);
  const TaskRequest& t = s.tasks[0];
  EXPECT_EQ(t.gpu_count, 8);
  EXPECT_EQ(t.gpu_milli.value(), 1000);
  EXPECT_TRUE(t.whole_gpus());
  EXPECT_EQ(t.gpu_memory.value(), 40960);
  EXPECT_EQ(t.cpu.value(), 4000);
  EXPECT_EQ(t.memory.value(), 65536);
  EXPECT_EQ(t.topology, GpuTopology::kRequireLocal);
  EXPECT_EQ(t.models.size(), 2U);
  EXPECT_TRUE(t.models.Contains(Model("A100-80GB")));
  EXPECT_TRUE(t.models.Contains(Model("H100-80GB")));
  EXPECT_EQ(s.topology.scope, TopologyScope::kNvlinkDomain);
  EXPECT_TRUE(s.topology.hard);
  EXPECT_EQ(s.checkpoint_interval, 1800 * kSecond);
  EXPECT_TRUE(s.checkpoint_on_signal);
  EXPECT_EQ(s.runtime_limit, 4 * 3600 * kSecond);
  EXPECT_FALSE(s.preemptible);
  EXPECT_EQ(s.TotalGpus(), 16);
}

TEST(JobCodecTest, BlockScopeReadsAndRoundTrips) {
  JobSubmission job = Json_(R"({"command": "x", "topology": {"scope": "block", "hard": true}})");
  EXPECT_EQ(job.spec.topology.scope, TopologyScope::kBlock);
  EXPECT_TRUE(job.spec.topology.hard);
  JobSubmission soft = Yaml("command: x\ntopology: {scope: block}\n");
  EXPECT_EQ(soft.spec.topology.scope, TopologyScope::kBlock);
  EXPECT_FALSE(soft.spec.topology.hard);
  StatusOr<JobSubmission> back =
      ParseJobJson(JobSubmissionToJson(job, Catalog()).dump(), Catalog());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->spec.topology.scope, TopologyScope::kBlock);
  EXPECT_TRUE(back->spec.topology.hard);
}

TEST(JobCodecTest, YamlReadsTheSameAsJson) {
  EXPECT_EQ(Yaml(kFullYaml), Json_(kFullJson));
  EXPECT_EQ(ParseJobText(kFullYaml, Catalog()).value(), Json_(kFullJson));
  EXPECT_EQ(ParseJobText(kFullJson, Catalog()).value(), Json_(kFullJson));
}

TEST(JobCodecTest, DefaultsAndStringCommand) {
  JobSubmission job = Json_(R"({"command": "echo hi && sleep 1"})");
  EXPECT_EQ(job.command, (std::vector<std::string>{"/bin/sh", "-c", "echo hi && sleep 1"}));
  EXPECT_EQ(job.spec.name, "");
  EXPECT_EQ(job.spec.queue, "");
  EXPECT_EQ(job.spec.priority, 0);
  ASSERT_EQ(job.spec.tasks.size(), 1U);
  const TaskRequest& t = job.spec.tasks[0];
  EXPECT_TRUE(t.cpu_only());
  EXPECT_EQ(t.cpu.value(), 1000);
  EXPECT_EQ(t.memory.value(), 1024);
  EXPECT_EQ(t.topology, GpuTopology::kPreferLocal);
  EXPECT_EQ(job.spec.topology.scope, TopologyScope::kAny);
  EXPECT_FALSE(job.spec.topology.hard);
  EXPECT_TRUE(job.spec.preemptible);
  EXPECT_EQ(job.spec.runtime_limit, 0);
  EXPECT_EQ(job.spec.checkpoint_interval, 0);
  EXPECT_TRUE(job.env.empty());
  // null is "not given".
  EXPECT_EQ(Json_(R"({"command": "x", "queue": null, "resources": {"cpu": null}})")
                .spec.tasks[0]
                .cpu.value(),
            1000);
}

TEST(JobCodecTest, GpuSharesAreExact) {
  for (const char* r : {R"({"gpus": 1, "gpu_fraction": 0.25})", R"({"gpu_fraction": "0.25"})",
                        R"({"gpus": 1, "gpu_milli": 250})", R"({"gpu_milli": 250.0})"}) {
    JobSubmission job = Json_(WithResources(r));
    ASSERT_EQ(job.spec.tasks.size(), 1U) << r;
    EXPECT_EQ(job.spec.tasks[0].gpu_count, 1) << r;
    EXPECT_EQ(job.spec.tasks[0].gpu_milli.value(), 250) << r;
    EXPECT_TRUE(job.spec.tasks[0].fractional()) << r;
  }
  // 0.1 + 0.2 style drift cannot happen: the decimal text is what counts.
  EXPECT_EQ(Json_(WithResources(R"({"gpu_fraction": 0.3})")).spec.tasks[0].gpu_milli.value(), 300);
  EXPECT_EQ(Json_(WithResources(R"({"cpu": 0.1, "memory": 65536})")).spec.tasks[0].cpu.value(),
            100);
  EXPECT_EQ(Json_(WithResources(R"({"cpu": 0.1, "memory": 65536})")).spec.tasks[0].memory.value(),
            65536);

  EXPECT_EQ(JsonError(WithResources(R"({"gpus": 2, "gpu_fraction": 0.5})")),
            "resources.gpus: a GPU share takes one GPU: set gpus to 1 or leave it out, got 2");
  EXPECT_NE(
      JsonError(WithResources(R"({"gpu_fraction": 0.0001})")).find("resources.gpu_fraction: "),
      std::string::npos);
  EXPECT_NE(JsonError(WithResources(R"({"gpu_fraction": 1.5})")).find("'1.5'"), std::string::npos);
  EXPECT_NE(JsonError(WithResources(R"({"gpu_fraction": 0.5, "gpu_milli": 500})")).find("not both"),
            std::string::npos);
  EXPECT_NE(JsonError(WithResources(R"({"memory": 1.5})")).find("resources.memory: "),
            std::string::npos);
}

TEST(JobCodecTest, MigImpliesOneGpuAndChecksTheProfile) {
  JobSubmission job = Json_(WithResources(R"({"mig": "1g.10gb", "gpu_model": "A100-80GB"})"));
  const TaskRequest& t = job.spec.tasks[0];
  EXPECT_EQ(t.gpu_count, 1);
  EXPECT_EQ(t.gpu_milli.value(), 0);
  EXPECT_EQ(t.mig_profile, "1g.10gb");
  EXPECT_TRUE(t.models.Contains(Model("A100-80GB")));
  EXPECT_EQ(t.TotalGpuMilli(Catalog()).value(), 142);

  std::string wrong = JsonError(WithResources(R"({"mig": "1g.5gb", "gpu_model": "A100-80GB"})"));
  EXPECT_NE(wrong.find("resources.mig: no allowed GPU model has the MIG profile '1g.5gb'"),
            std::string::npos)
      << wrong;
  EXPECT_NE(wrong.find("1g.10gb"), std::string::npos) << wrong;
  EXPECT_NE(JsonError(WithResources(R"({"mig": "1g.10gb", "gpus": 2})")).find("resources.gpus"),
            std::string::npos);
  EXPECT_NE(JsonError(WithResources(R"({"mig": "1g.10gb", "gpu_fraction": 0.5})"))
                .find("exclude each other"),
            std::string::npos);
  EXPECT_NE(JsonError(WithResources(R"({"mig": "1g.10gb", "gpu_memory": "10GiB"})"))
                .find("resources.gpu_memory"),
            std::string::npos);
  EXPECT_NE(JsonError(WithResources(R"({"mig": "1g.10gb", "gpu_model": "L40S"})"))
                .find("profiles there: none"),
            std::string::npos);
}

TEST(JobCodecTest, ErrorsNameTheField) {
  EXPECT_EQ(JsonError(WithResources(R"({"gpus": -1})")),
            "resources.gpus: must be between 0 and 64, got -1");
  EXPECT_EQ(JsonError(WithResources(R"({"gpus": "8"})")),
            "resources.gpus: expected an integer, got the string '8'");
  EXPECT_EQ(JsonError(R"({"command": ["a", ""]})"), "command[1]: must not be empty");
  EXPECT_EQ(JsonError(R"({"command": []})"), "command: must not be empty");
  EXPECT_EQ(JsonError(R"({"command": "   "})"), "command: must not be empty");
  EXPECT_NE(JsonError(R"({"name": "x"})").find("command: is required"), std::string::npos);
  EXPECT_EQ(JsonError(R"({"command": "x", "replicas": 0})"),
            "replicas: must be between 1 and 1024, got 0");
  EXPECT_EQ(JsonError(R"({"command": "x", "replicas": 1025})"),
            "replicas: must be between 1 and 1024, got 1025");
  EXPECT_NE(
      JsonError(R"({"command": "x", "name": "my job"})").find("name: 'my job' is not a valid"),
      std::string::npos);
  EXPECT_NE(
      JsonError(R"({"command": "x", "name": ")" + std::string(129, 'a') + R"("})").find("name: "),
      std::string::npos);
  EXPECT_NE(JsonError(R"({"command": "x", "env": {"1X": "y"}})").find("env.1X: '1X' is not a"),
            std::string::npos);
  EXPECT_NE(JsonError(R"({"command": "x", "env": {"A-B": "y"}})").find("env.A-B"),
            std::string::npos);
  EXPECT_NE(JsonError(R"({"command": "x", "env": {"A": ["y"]}})").find("env.A: expected a string"),
            std::string::npos);
  EXPECT_NE(JsonError(R"({"command": "x", "working_dir": "rel/dir"})")
                .find("working_dir: must be an absolute path"),
            std::string::npos);
  EXPECT_NE(JsonError(R"({"command": "x", "checkpoint": {"interval": "soon"}})")
                .find("checkpoint.interval: 'soon' is not a duration"),
            std::string::npos);
  EXPECT_NE(JsonError(R"({"command": "x", "topology": {"scope": "galaxy"}})")
                .find("topology.scope: expected node, nvlink, rack, block or any"),
            std::string::npos);
  EXPECT_NE(JsonError(R"({"command": "x", "preemptible": "yes"})")
                .find("preemptible: expected true or false, got the string 'yes'"),
            std::string::npos);
  EXPECT_NE(JsonError(WithResources(R"({"gpus": 1, "gpu_model": "Z9000"})"))
                .find("resources.gpu_model: unknown GPU model 'Z9000'"),
            std::string::npos);
  EXPECT_NE(JsonError(WithResources(R"({"gpus": 1, "gpu_model": ["H100", 7]})"))
                .find("resources.gpu_model[1]: expected a string"),
            std::string::npos);
  EXPECT_NE(JsonError(WithResources(R"({"gpu_model": "H100"})"))
                .find("resources.gpu_model: needs gpus >= 1"),
            std::string::npos);
  EXPECT_NE(JsonError(WithResources(R"({"gpu_memory": "1GiB"})"))
                .find("resources.gpu_memory: needs gpus >= 1"),
            std::string::npos);
  EXPECT_NE(JsonError(WithResources(R"({"gpu_topology": "near"})")).find("resources.gpu_topology"),
            std::string::npos);
  // Beyond RequestLimits: refused by ValidateTaskRequest, under "resources".
  std::string absurd = JsonError(WithResources(R"({"cpu": "2000000"})"));
  EXPECT_NE(absurd.find("resources: cpu"), std::string::npos) << absurd;
  EXPECT_NE(absurd.find("beyond the limit"), std::string::npos) << absurd;
  EXPECT_NE(JsonError("[1, 2]").find("expected an object"), std::string::npos);
  EXPECT_NE(JsonError("{").find("job spec: "), std::string::npos);
}

TEST(JobCodecTest, UnknownKeysAreErrorsWithSuggestions) {
  std::string typo = JsonError(WithResources(R"({"gpuz": 1})"));
  EXPECT_NE(typo.find("unknown key 'gpuz' in resources (did you mean 'gpus'?)"), std::string::npos)
      << typo;
  EXPECT_NE(typo.find("expected one of gpus, gpu_model"), std::string::npos) << typo;
  std::string top = JsonError(R"({"command": "x", "replica": 2})");
  EXPECT_NE(top.find("unknown key 'replica' (did you mean 'replicas'?)"), std::string::npos) << top;
  std::string far = JsonError(R"({"command": "x", "color": "blue"})");
  EXPECT_EQ(far.find("did you mean"), std::string::npos) << far;

  std::string yaml = YamlError("command: x\nresources:\n  gpus: 1\n  memroy: 4GiB\n");
  EXPECT_NE(yaml.find("unknown key 'memroy' in resources (did you mean 'memory'?)"),
            std::string::npos)
      << yaml;
  EXPECT_NE(yaml.find("(line 4, column"), std::string::npos) << yaml;
}

TEST(JobCodecTest, YamlErrorsGiveTheLine) {
  std::string e = YamlError("name: x\ncommand: [a]\nresources:\n  gpus: -1\n");
  EXPECT_EQ(e, "resources.gpus: must be between 0 and 64, got -1 (line 4, column 9)");
  e = YamlError("name: x\ncommand:\n  - a\n  - ''\n");
  EXPECT_EQ(e, "command[1]: must not be empty (line 4, column 5)");
  e = YamlError("command: x\nresources: {gpus: 1, gpu_fraction: 2}\n");
  EXPECT_NE(e.find("resources.gpu_fraction: GPU fraction '2'"), std::string::npos) << e;
  EXPECT_NE(e.find("(line 2, column"), std::string::npos) << e;
  // A quoted number is a string.
  e = YamlError("command: x\nresources:\n  gpus: \"8\"\n");
  EXPECT_EQ(e, "resources.gpus: expected an integer, got the string '8' (line 3, column 9)");
  // Syntax errors come from the YAML reader, with its position.
  e = YamlError("command: [a, b\nname: x\n");
  EXPECT_NE(e.find("job spec: "), std::string::npos) << e;
  EXPECT_NE(e.find("(line "), std::string::npos) << e;
  // A missing field sits at the document, which has no useful line.
  EXPECT_EQ(YamlError("name: x\n"),
            "command: is required: a list of arguments, or one string run by /bin/sh");
}

TEST(JobCodecTest, YamlScalarsFollowTheCoreSchema) {
  JobSubmission job = Yaml(R"(
command: [run, 10, 0.5, true, "007", 007]
env:
  THREADS: 4
  RATE: 0.00001
  DEBUG: false
  EMPTY:
  ZIP: 02134
resources: {cpu: 0.5, memory: 1536, gpus: 1, gpu_fraction: 0.1}
runtime_limit: 90
)");
  EXPECT_EQ(job.command, (std::vector<std::string>{"run", "10", "0.5", "true", "007", "007"}));
  EXPECT_EQ(job.env.at("THREADS"), "4");
  EXPECT_EQ(job.env.at("RATE"), "0.00001");  // the text as written
  EXPECT_EQ(job.env.at("DEBUG"), "false");
  EXPECT_EQ(job.env.at("EMPTY"), "");
  EXPECT_EQ(job.env.at("ZIP"), "02134");
  EXPECT_EQ(job.spec.tasks[0].cpu.value(), 500);
  EXPECT_EQ(job.spec.tasks[0].memory.value(), 1536);
  EXPECT_EQ(job.spec.tasks[0].gpu_milli.value(), 100);
  EXPECT_EQ(job.spec.runtime_limit, 90 * kSecond);
  // "yes" is not a boolean in YAML 1.2.
  EXPECT_NE(YamlError("command: x\npreemptible: yes\n").find("expected true or false"),
            std::string::npos);
}

TEST(JobCodecTest, RepeatedKeysAreErrors) {
  EXPECT_NE(JsonError(R"({"command": "x", "resources": {"gpus": 1, "gpus": 2}})")
                .find("resources.gpus: the key appears twice"),
            std::string::npos);
  std::string e = YamlError("command: x\nresources:\n  gpus: 1\n  gpus: 2\n");
  EXPECT_NE(e.find("resources.gpus: the key 'gpus' appears twice (line 4"), std::string::npos) << e;
}

TEST(JobCodecTest, HostileInputIsRefusedCheaply) {
  // Deep nesting, before the JSON parser runs.
  std::string deep = R"({"command": "x", "env": )" + std::string(100000, '[') + "1" +
                     std::string(100000, ']') + "}";
  EXPECT_NE(JsonError(deep).find("nested deeper than 32"), std::string::npos);
  EXPECT_FALSE(ParseJobYaml("command: " + std::string(100000, '['), Catalog()).ok());
  std::string dashes = "command:\n";
  for (int i = 0; i < 40; ++i) {
    dashes += "- ";
  }
  EXPECT_NE(YamlError(dashes + "x\n").find("nested deeper than 32"), std::string::npos);
  // An alias bomb: 9 levels of 10 references would be 10^9 strings.
  std::string bomb = "a: &a [\"" + std::string(100, 'x') + "\"]\n";
  std::string prev = "a";
  for (int level = 0; level < 9; ++level) {
    std::string name = "l" + std::to_string(level);
    bomb += name + ": &" + name + " [";
    for (int k = 0; k < 10; ++k) {
      bomb += (k ? ", *" : "*") + prev;
    }
    bomb += "]\n";
    prev = name;
  }
  std::string e = YamlError(bomb);
  EXPECT_NE(e.find("aliases included"), std::string::npos) << e;
  // Over the size limit.
  EXPECT_NE(JsonError(std::string(kMaxJobTextBytes + 1, ' ')).find("over the limit"),
            std::string::npos);
  EXPECT_NE(YamlError(std::string(kMaxJobTextBytes + 1, '#')).find("over the limit"),
            std::string::npos);
  // Several documents, an empty one, a scalar.
  EXPECT_NE(YamlError("command: a\n---\ncommand: b\n").find("expected one YAML document"),
            std::string::npos);
  // yaml-cpp's LoadAll never returns on these (found by fuzzing).
  EXPECT_NE(YamlError("{},").find("expected one YAML document"), std::string::npos);
  EXPECT_NE(YamlError("{command: x} ,").find("expected one YAML document"), std::string::npos);
  EXPECT_NE(YamlError("").find("empty"), std::string::npos);
  EXPECT_NE(YamlError("# only a comment\n").find("empty"), std::string::npos);
  EXPECT_NE(YamlError("just text").find("expected an object"), std::string::npos);
  // Bytes that are not UTF-8, and NUL.
  EXPECT_NE(YamlError("command: \"a\xff\"\n").find("command: not valid UTF-8"), std::string::npos);
  EXPECT_NE(JsonError(R"({"command": ["a\u0000b"]})").find("NUL"), std::string::npos);
  // Too much environment.
  std::string env = R"({"command": "x", "env": {)";
  for (int i = 0; i < 70; ++i) {
    env += (i ? ", " : "") + std::string("\"V") + std::to_string(i) + "\": \"" +
           std::string(1000, 'v') + "\"";
  }
  EXPECT_NE(JsonError(env + "}}").find("env: more than 65536 bytes"), std::string::npos);
  // Non-finite numbers built in code.
  Json j = {{"command", "x"}, {"resources", {{"cpu", std::nan("")}}}};
  StatusOr<JobSubmission> nan = JobSubmissionFromJson(j, Catalog());
  EXPECT_FALSE(nan.ok());
  EXPECT_NE(nan.status().message().find("resources.cpu"), std::string::npos);
}

TEST(JobCodecTest, ToJsonRoundTrips) {
  std::vector<JobSubmission> jobs = {
      Json_(kFullJson),
      Json_(R"({"command": "echo hi"})"),
      Json_(WithResources(R"({"gpu_fraction": 0.25, "gpu_memory": "20GiB", "cpu": "500m"})")),
      Json_(WithResources(R"({"mig": "3g.40gb", "gpu_model": ["A100-80GB", "H100"]})")),
      Yaml("command: [a]\nresources: {cpu: 1.5, memory: 1.5GiB}\nruntime_limit: 1h30m15s250ms\n"
           "checkpoint: {on_signal: true}\ntopology: {scope: rack}\n"),
  };
  for (const JobSubmission& job : jobs) {
    Json j = JobSubmissionToJson(job, Catalog());
    StatusOr<JobSubmission> back = ParseJobJson(j.dump(), Catalog());
    ASSERT_TRUE(back.ok()) << back.status().ToString() << "\n" << j.dump();
    EXPECT_EQ(*back, job) << j.dump();
  }
  Json full = JobSubmissionToJson(jobs[0], Catalog());
  EXPECT_EQ(full["resources"]["memory"], "64GiB");
  EXPECT_EQ(full["resources"]["gpu_memory"], "40GiB");
  EXPECT_EQ(full["resources"]["cpu"], "4");
  EXPECT_EQ(full["resources"]["gpu_model"], Json({"A100-80GB", "H100-80GB"}));
  EXPECT_EQ(full["runtime_limit"], "4h");
  EXPECT_EQ(full["checkpoint"]["interval"], "30m");
  EXPECT_EQ(full["replicas"], 2);
  Json share = JobSubmissionToJson(jobs[2], Catalog());
  EXPECT_EQ(share["resources"]["gpu_milli"], 250);
  EXPECT_EQ(share["resources"]["cpu"], "500m");
  EXPECT_FALSE(share.contains("name"));
}

TEST(JobCodecTest, NamesAndEnvKeys) {
  EXPECT_TRUE(IsValidJobName("train-v2.1_final"));
  EXPECT_TRUE(IsValidJobName(std::string(128, 'a')));
  EXPECT_FALSE(IsValidJobName(std::string(129, 'a')));
  EXPECT_FALSE(IsValidJobName(""));
  EXPECT_FALSE(IsValidJobName("a/b"));
  EXPECT_FALSE(IsValidJobName("a b"));
  EXPECT_TRUE(IsValidEnvName("_A1"));
  EXPECT_FALSE(IsValidEnvName("1A"));
  EXPECT_FALSE(IsValidEnvName("A=B"));
  EXPECT_FALSE(IsValidEnvName(""));
}

TEST(JobCodecTest, HoldIfUnfitRoundTrips) {
  JobSubmission job = Json_(R"({"command": "make", "hold_if_unfit": true})");
  EXPECT_TRUE(job.hold_if_unfit);
  EXPECT_EQ(Yaml("command: make\nhold_if_unfit: true\n"), job);
  Json j = JobSubmissionToJson(job, Catalog());
  EXPECT_EQ(j["hold_if_unfit"], true);
  EXPECT_EQ(ParseJobJson(j.dump(), Catalog()).value(), job);
  EXPECT_FALSE(Json_(R"({"command": "make"})").hold_if_unfit);
  EXPECT_FALSE(
      JobSubmissionToJson(Json_(R"({"command": "make"})"), Catalog()).contains("hold_if_unfit"));
  EXPECT_NE(JsonError(R"({"command": "x", "hold_if_unfit": "yes"})").find("hold_if_unfit"),
            std::string::npos);
}

TEST(JobCodecTest, RestartPolicyReadsChecksAndRoundTrips) {
  JobSubmission job =
      Yaml("command: make\nrestart: {max: 2, on: [failure, gpu-fault], backoff: 10s}\n");
  ASSERT_TRUE(job.restart.has_value());
  EXPECT_EQ(job.restart->max, 2);
  EXPECT_TRUE(job.restart->Restarts(RestartOn::kFailure));
  EXPECT_FALSE(job.restart->Restarts(RestartOn::kNodeLost));
  EXPECT_TRUE(job.restart->Restarts(RestartOn::kGpuFault));
  EXPECT_EQ(job.restart->backoff, 10'000'000);
  Json j = JobSubmissionToJson(job, Catalog());
  EXPECT_EQ(j["restart"], Json::parse(R"({"max": 2, "on": ["failure", "gpu-fault"],
                                          "backoff": "10s"})"));
  EXPECT_EQ(ParseJobJson(j.dump(), Catalog()).value(), job);
  // Defaults: every cause, 3 restarts, 30 s; no block at all is the default policy.
  JobSubmission defaults = Json_(R"({"command": "x", "restart": {}})");
  EXPECT_EQ(defaults.restart, RestartPolicy{});
  EXPECT_EQ(defaults.restart->backoff, 30'000'000);
  EXPECT_FALSE(Json_(R"({"command": "x"})").restart.has_value());
  EXPECT_EQ(DefaultRestartPolicy().max, 3);
  EXPECT_FALSE(DefaultRestartPolicy().Restarts(RestartOn::kFailure));
  EXPECT_EQ(Json_(R"({"command": "x", "restart": {"max": 0, "backoff": 0}})").restart->max, 0);
  EXPECT_EQ(Json_(R"({"command": "x", "restart": {"on": "node-lost"}})").restart->on,
            static_cast<uint8_t>(RestartOn::kNodeLost));

  EXPECT_NE(JsonError(R"({"command": "x", "restart": {"max": 101}})").find("restart.max"),
            std::string::npos);
  EXPECT_NE(JsonError(R"({"command": "x", "restart": {"max": -1}})").find("restart.max"),
            std::string::npos);
  EXPECT_NE(JsonError(R"({"command": "x", "restart": {"on": []}})").find("restart.on: must name"),
            std::string::npos);
  const std::string unknown = JsonError(R"({"command": "x", "restart": {"on": ["failure", "oom"]}})");
  EXPECT_NE(unknown.find("restart.on[1]"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("'oom'"), std::string::npos) << unknown;
  EXPECT_NE(JsonError(R"({"command": "x", "restart": {"backoff": "2h"}})")
                .find("restart.backoff: must be between 0s and 1h, got 2h"),
            std::string::npos);
  EXPECT_NE(JsonError(R"({"command": "x", "restart": {"backof": "2s"}})").find("restart"),
            std::string::npos);
  EXPECT_NE(JsonError(R"({"command": "x", "restart": 3})").find("restart"), std::string::npos);
  EXPECT_EQ(ParseRestartOnList("failure, gpu-fault", "--restart-on").value(),
            static_cast<uint8_t>(5));
  EXPECT_FALSE(ParseRestartOnList("", "--restart-on").ok());
  EXPECT_NE(ParseRestartOnList("failure,,x", "--restart-on").status().message().find("--restart-on"),
            std::string::npos);
}

TEST(JobCodecTest, SubmitDirRoundTripsAndIsChecked) {
  JobSubmission job = Json_(R"({"command": "make", "submit_dir": "/home/alice/run"})");
  EXPECT_EQ(job.submit_dir, "/home/alice/run");
  EXPECT_EQ(Yaml("command: make\nsubmit_dir: /home/alice/run\n"), job);
  Json j = JobSubmissionToJson(job, Catalog());
  EXPECT_EQ(j["submit_dir"], "/home/alice/run");
  StatusOr<JobSubmission> back = ParseJobJson(j.dump(), Catalog());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, job);
  // Not sent: not written either, so older controllers read the document.
  EXPECT_FALSE(
      JobSubmissionToJson(Json_(R"({"command": "make"})"), Catalog()).contains("submit_dir"));

  EXPECT_NE(JsonError(R"({"command": "x", "submit_dir": "rel/dir"})")
                .find("submit_dir: must be an absolute path"),
            std::string::npos);
  EXPECT_NE(JsonError(R"({"command": "x", "submit_dir": "/a\u0000b"})")
                .find("submit_dir: contains a NUL"),
            std::string::npos);
  EXPECT_NE(JsonError(R"({"command": "x", "submit_dir": 7})").find("submit_dir: expected a string"),
            std::string::npos);
  const std::string longest = "/" + std::string(kMaxPathLength - 1, 'd');
  EXPECT_EQ(Json_(Json{{"command", "x"}, {"submit_dir", longest}}.dump()).submit_dir, longest);
  EXPECT_NE(JsonError(Json{{"command", "x"}, {"submit_dir", longest + "d"}}.dump())
                .find("submit_dir: longer than 4096 bytes"),
            std::string::npos);
}

// ---- a job spec inside another document (scenario files) ----------------------------

StatusOr<JobSubmission> Embedded(const std::string& job_lines) {
  const YAML::Node doc = YAML::Load("jobs:\n  - name: a\n" + job_lines);
  EmbeddedJobOptions options;
  options.path = "jobs[0]";
  options.extra_keys = {"submit"};
  options.priority_class = [](const std::string& name) -> std::optional<int32_t> {
    if (name == "high") {
      return 100;
    }
    return std::nullopt;
  };
  return ReadEmbeddedJob(doc["jobs"][0], Catalog(), options);
}

void ExpectEmbeddedError(const std::string& job_lines, const std::string& starts,
                         const std::string& contains) {
  StatusOr<JobSubmission> job = Embedded(job_lines);
  ASSERT_FALSE(job.ok()) << job_lines;
  EXPECT_EQ(job.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(job.status().message().rfind(starts, 0), 0u) << job.status().message();
  EXPECT_NE(job.status().message().find(contains), std::string::npos) << job.status().message();
}

TEST(EmbeddedJobTest, ReadsTheJobFileFieldsWithTheEnclosingFormatsKeys) {
  StatusOr<JobSubmission> job = Embedded(
      "    submit: 5\n    priority: high\n    replicas: 2\n    resources: {mig: 3g.40gb}\n");
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(job->spec.name, "a");
  EXPECT_EQ(job->spec.priority, 100);
  EXPECT_TRUE(job->command.empty());
  // The same request as the job file with the same fields, defaults included.
  const JobSubmission file = Yaml("command: [x]\nreplicas: 2\nresources: {mig: 3g.40gb}\n");
  EXPECT_EQ(job->spec.tasks, file.spec.tasks);
  EXPECT_EQ(job->spec.tasks[0].gpu_milli.value(), 0);
  EXPECT_EQ(job->spec.tasks[0].cpu.value(), 1000);
  ASSERT_TRUE(Embedded("    priority: -3\n").ok());
  EXPECT_EQ(Embedded("    priority: -3\n")->spec.priority, -3);
  // Outside another format the command stays required.
  EXPECT_NE(YamlError("resources: {gpus: 1}\n").find("command"), std::string::npos);
}

TEST(EmbeddedJobTest, ErrorsCarryTheDocumentsPathAndLine) {
  ExpectEmbeddedError("    resources: {gpus: 65}\n", "jobs[0].resources.gpus: ", "(line 3");
  ExpectEmbeddedError("    sumbit: 5\n", "jobs[0]: unknown key 'sumbit'", "did you mean 'submit'");
  ExpectEmbeddedError("    priority: urgent\n",
                      "jobs[0].priority: ", "neither a number nor a priority class");
  ExpectEmbeddedError("    resources: {gpus: 2, mig: 1g.10gb}\n",
                      "jobs[0].resources.gpus: ", "MIG");
  EmbeddedJobOptions at_four;
  at_four.path = "jobs[4]";
  StatusOr<JobSubmission> list = ReadEmbeddedJob(YAML::Load("[1, 2]"), Catalog(), at_four);
  ASSERT_FALSE(list.ok());
  EXPECT_EQ(list.status().message().rfind("jobs[4]: expected a job spec", 0), 0u)
      << list.status().message();
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

// JSON says what type a value is: a number is not a name. YAML's plain scalars stay
// readable as written (`name: 7` is the name "7").
TEST(JobCodecTest, AJsonNameMustBeAString) {
  const GpuCatalog& catalog = GpuCatalog::Default();
  for (const char* field : {"name", "queue", "user"}) {
    const std::string text = std::string(R"({"command": ["x"], ")") + field + R"(": 1})";
    StatusOr<JobSubmission> job = ParseJobJson(text, catalog);
    ASSERT_FALSE(job.ok()) << field;
    EXPECT_EQ(job.status().message().rfind(std::string(field) + ": expected a string", 0), 0u)
        << job.status().message();
  }
  StatusOr<JobSubmission> yaml = ParseJobYaml("command: [x]\nname: 7\n", catalog);
  ASSERT_TRUE(yaml.ok()) << yaml.status().ToString();
  EXPECT_EQ(yaml->spec.name, "7");
}

}  // namespace
}  // namespace tessera
