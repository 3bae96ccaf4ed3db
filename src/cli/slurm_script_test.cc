#include "cli/slurm_script.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <map>
#include <string>
#include <vector>

#include "api/job_codec.h"
#include "cli/cluster_commands.h"
#include "cli/sbatch_command.h"
#include "base/file_util.h"
#include "base/testing/temp_dir.h"

namespace tessera {
// Named, not anonymous: its Error would meet cli_testing::Error in a unity batch.
namespace slurm_script_test {

using nlohmann::json;

SlurmJob Translate(const std::string& text, std::vector<std::string> command_line = {},
                   std::map<std::string, std::string> environment = {}) {
  SlurmJobInput in;
  in.script_name = "train.sh";
  in.script_text = text;
  in.command_line = std::move(command_line);
  in.submit_dir = "/home/ada/proj";
  in.environment = std::move(environment);
  StatusOr<SlurmJob> job = TranslateSlurmJob(in, GpuCatalog::Default());
  EXPECT_TRUE(job.ok()) << job.status().ToString();
  return job.ok() ? *job : SlurmJob{};
}

std::string Error(const std::string& text, std::vector<std::string> command_line = {},
                  bool lenient = false) {
  SlurmJobInput in;
  in.script_name = "train.sh";
  in.script_text = text;
  in.command_line = std::move(command_line);
  in.lenient = lenient;
  StatusOr<SlurmJob> job = TranslateSlurmJob(in, GpuCatalog::Default());
  EXPECT_FALSE(job.ok()) << text;
  EXPECT_EQ(job.status().code(), StatusCode::kInvalidArgument);
  return job.status().message();
}

// The job the server would read from the document (the new keys aside).
void ExpectServerReads(const json& spec) {
  json copy = spec;
  for (const char* key : {"signal"}) {
    copy.erase(key);
  }
  StatusOr<JobSubmission> sub = JobSubmissionFromJson(copy, GpuCatalog::Default());
  EXPECT_TRUE(sub.ok()) << sub.status().ToString() << "\n" << spec.dump(2);
}

TEST(SlurmScriptTest, DirectivesMapOntoTheGang) {
  SlurmJob job = Translate(
      "#!/bin/bash\n"
      "#SBATCH --job-name=ddp\n"
      "#SBATCH -N 2 --ntasks-per-node=4   # two nodes of four ranks\n"
      "#SBATCH --gres=gpu:a100:4\n"
      "#SBATCH --cpus-per-task 8\n"
      "#SBATCH --mem 64G\n"
      "#SBATCH -t 1-02:30:00\n"
      "#SBATCH -p gpu -q high\n"
      "\n"
      "srun python train.py\n");
  const json& s = job.spec;
  EXPECT_EQ(s["name"], "ddp");
  EXPECT_EQ(s["replicas"], 8);
  EXPECT_EQ(s["resources"]["gpus"], 1);  // 4 per node over 4 tasks per node
  EXPECT_EQ(s["resources"]["gpu_model"], json({"A100-40GB", "A100-80GB"}));
  EXPECT_EQ(s["resources"]["cpu"], 8);
  EXPECT_EQ(s["resources"]["memory"], "16GiB");  // 64 GiB per node over 4 tasks
  EXPECT_EQ(s["runtime_limit"], "1d2h30m");
  EXPECT_EQ(s["queue"], "gpu");
  EXPECT_EQ(s["priority"], "high");
  EXPECT_FALSE(s.contains("topology"));
  EXPECT_TRUE(job.warnings.empty());
  ExpectServerReads(s);
}

TEST(SlurmScriptTest, OptionFormsShortLongAndSeparated) {
  for (const char* line :
       {"#SBATCH -N2 -n4", "#SBATCH -N 2 -n 4", "#SBATCH --nodes=2 --ntasks=4",
        "#SBATCH --nodes 2 --ntasks 4", "#SBATCH --nodes \"2\" --ntasks=4"}) {
    SlurmJob job = Translate(std::string("#!/bin/bash\n") + line + "\n#SBATCH --gpus=8\necho hi\n");
    EXPECT_EQ(job.spec["replicas"], 4) << line;
    EXPECT_EQ(job.spec["resources"]["gpus"], 2) << line;  // 8 in all over 4 tasks
  }
}

TEST(SlurmScriptTest, OneNodeIsAHardNodeScopeAndPerTaskForms) {
  SlurmJob job = Translate(
      "#!/bin/bash\n#SBATCH --nodes=1 --ntasks=2 --gpus-per-task=h100:2 --mem-per-gpu=20G\n"
      "#SBATCH --cpus-per-gpu=4\nrun\n");
  EXPECT_EQ(job.spec["topology"], json({{"scope", "node"}, {"hard", true}}));
  EXPECT_EQ(job.spec["resources"]["gpus"], 2);
  EXPECT_EQ(job.spec["resources"]["gpu_model"], "H100-80GB");
  EXPECT_EQ(job.spec["resources"]["memory"], "40GiB");
  EXPECT_EQ(job.spec["resources"]["cpu"], 8);
  ExpectServerReads(job.spec);
  // Memory per CPU, rounded-down memory per node, a bare number of MiB.
  job = Translate("#!/bin/bash\n#SBATCH -c 4 --mem-per-cpu=1500\nrun\n");
  EXPECT_EQ(job.spec["resources"]["memory"], "6000MiB");
  job = Translate("#!/bin/bash\n#SBATCH -n 3 --mem=1G\nrun\n");
  EXPECT_EQ(job.spec["resources"]["memory"], "341MiB");
  EXPECT_FALSE(job.spec.contains("topology"));  // --nodes not given
}

TEST(SlurmScriptTest, TimeFormats) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"90", "1h30m"}, {"5:30", "5m30s"}, {"1:00:00", "1h"}, {"2-0", "2d"},
      {"1-2:30", "1d2h30m"}, {"1-02:30:15", "1d2h30m15s"}};
  for (const auto& [slurm, tessera] : cases) {
    SlurmJob job = Translate("#!/bin/bash\n#SBATCH --time=" + slurm + "\nrun\n");
    EXPECT_EQ(job.spec["runtime_limit"], tessera) << slurm;
  }
  EXPECT_FALSE(Translate("#!/bin/bash\n#SBATCH -t UNLIMITED\nrun\n").spec.contains("runtime_limit"));
  EXPECT_NE(Error("#!/bin/bash\n#SBATCH -t 1h\nrun\n").find("train.sh:2: #SBATCH -t: '1h' is not a Slurm time"),
            std::string::npos);
}

TEST(SlurmScriptTest, UnsupportedDirectivesNameTheirLine) {
  EXPECT_EQ(Error("#!/bin/bash\n#SBATCH -N 1\n# a comment\n#SBATCH --foo=3\nrun\n"),
            "train.sh:4: #SBATCH --foo: not supported");
  EXPECT_EQ(Error("#!/bin/bash\n#SBATCH --nodelist node1\nrun\n"),
            "train.sh:2: #SBATCH --nodelist: not supported");
  SlurmJobInput in;
  in.script_name = "train.sh";
  in.script_text = "#!/bin/bash\n#SBATCH --constraint=ib --mail-type=END -N 2\nrun\n";
  in.lenient = true;
  StatusOr<SlurmJob> job = TranslateSlurmJob(in, GpuCatalog::Default());
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(job->spec["replicas"], 2);
  ASSERT_EQ(job->warnings.size(), 2u);
  EXPECT_EQ(job->warnings[0], "train.sh:2: #SBATCH --constraint: not supported; ignored");
  EXPECT_NE(job->warnings[1].find("--mail-type: ignored"), std::string::npos);
  // Bad values stay errors with --lenient; a Tessera option belongs on a #TESSERA line.
  EXPECT_NE(Error("#!/bin/bash\n#SBATCH --mem=lots\nrun\n", {}, true).find("'lots'"), std::string::npos);
  EXPECT_NE(Error("#!/bin/bash\n#SBATCH --mig=1g.10gb\nrun\n").find("#TESSERA"), std::string::npos);
  EXPECT_NE(Error("#!/bin/bash\n#SBATCH --gres=gpu:b200:1\nrun\n").find("'b200' matches no GPU model"),
            std::string::npos);
  EXPECT_NE(Error("#!/bin/bash\n#SBATCH -n 3 --gpus=4\nrun\n").find("not a whole number per task"),
            std::string::npos);
  EXPECT_NE(Error("#!/bin/bash\r\n#SBATCH -n 3\r\nrun\r\n").find("DOS line breaks"), std::string::npos);
}

TEST(SlurmScriptTest, DirectivesStopAtTheFirstCommandAndTheCommandLineWins) {
  SlurmJob job = Translate(
      "#!/bin/bash\n#SBATCH -J first\n#TESSERA --gpu-fraction=0.5\n\n   # indented comment\n"
      "#SBATCH -t 10\nmodule load cuda\n#SBATCH -t 20\necho hi\n",
      {"--job-name=second", "--time=30"});
  EXPECT_EQ(job.spec["name"], "second");
  EXPECT_EQ(job.spec["runtime_limit"], "30m");
  EXPECT_EQ(job.spec["resources"]["gpu_fraction"], "0.5");
  ASSERT_EQ(job.warnings.size(), 1u);
  EXPECT_EQ(job.warnings[0], "train.sh:8: #SBATCH after the first command is ignored, as sbatch does");
  // The last of a group wins: --gpus-per-task on the command line replaces --gres.
  job = Translate("#!/bin/bash\n#SBATCH --gres=gpu:8 --mem=64G\n", {"--gpus-per-task=2", "--mem-per-gpu=10G"});
  EXPECT_EQ(job.spec["resources"]["gpus"], 2);
  EXPECT_EQ(job.spec["resources"]["memory"], "20GiB");
}

TEST(SlurmScriptTest, ArraysDependenciesHoldSignalRequeue) {
  SlurmJob job = Translate(
      "#!/bin/bash\n#SBATCH --array=0-9%4 -d afterok:12:13_2,singleton -H\n"
      "#SBATCH --signal=B:USR1@90 --no-requeue -t 2:00:00\nrun\n");
  EXPECT_EQ(job.spec["array"], "0-9%4");
  EXPECT_EQ(job.spec["dependency"], "afterok:12:13_2,singleton");
  EXPECT_EQ(job.spec["hold"], true);
  EXPECT_EQ(job.spec["signal"], json({{"name", "USR1"}, {"before", "1m30s"}}));
  EXPECT_EQ(job.spec["restart"], json({{"max", 0}}));
  EXPECT_EQ(job.spec["command"][4], "slurm-%A_%a.out");  // an array's default output
  ASSERT_EQ(job.warnings.size(), 1u);  // B: is not told apart
  job = Translate("#!/bin/bash\n#SBATCH --requeue --signal=SIGTERM -t 10\nrun\n");
  EXPECT_EQ(job.spec["restart"], json({{"on", {"node-lost", "gpu-fault"}}}));
  EXPECT_EQ(job.spec["signal"], json({{"name", "TERM"}, {"before", "1m"}}));
  job = Translate("#!/bin/bash\n#SBATCH --signal=12@30 -t 10\nrun\n");
  EXPECT_EQ(job.spec["signal"]["name"], "USR2");
  EXPECT_NE(Error("#!/bin/bash\n#SBATCH --dependency=aftercorr:5\nrun\n").find("#SBATCH --dependency"),
            std::string::npos);
  EXPECT_NE(Error("#!/bin/bash\n#SBATCH --array=5-1\nrun\n").find("#SBATCH --array"), std::string::npos);
}

TEST(SlurmScriptTest, ExportEnvironmentAndDirectories) {
  const std::map<std::string, std::string> env = {{"PATH", "/venv/bin:/usr/bin"},
                                                  {"TESSERA_TOKEN", "secret"},
                                                  {"SLURM_JOB_ID", "7"},
                                                  {"WANDB_MODE", "offline"},
                                                  {"BASH_FUNC_x%%", "() { :; }"}};
  SlurmJob job = Translate("#!/bin/bash\nrun\n", {}, env);
  EXPECT_EQ(job.spec["env"], json({{"PATH", "/venv/bin:/usr/bin"}, {"WANDB_MODE", "offline"}}));
  job = Translate("#!/bin/bash\n#SBATCH --export=NONE\nrun\n", {}, env);
  EXPECT_EQ(job.spec["env"], json::object());
  job = Translate("#!/bin/bash\n#SBATCH --export=WANDB_MODE,SEED=3\nrun\n", {}, env);
  EXPECT_EQ(job.spec["env"], json({{"SEED", "3"}, {"WANDB_MODE", "offline"}}));
  job = Translate("#!/bin/bash\n#SBATCH --export=ALL,SEED=3 -D out\nrun\n", {}, env);
  EXPECT_EQ(job.spec["env"]["SEED"], "3");
  EXPECT_EQ(job.spec["env"]["PATH"], "/venv/bin:/usr/bin");
  EXPECT_EQ(job.spec["working_dir"], "/home/ada/proj/out");
  EXPECT_EQ(job.spec["submit_dir"], "/home/ada/proj");
  EXPECT_EQ(job.spec["name"], "train.sh");
}

TEST(SlurmScriptTest, GpuTypesMatchTheCatalog) {
  const GpuCatalog& c = GpuCatalog::Default();
  EXPECT_EQ(GpuModelsForSlurmType("a100", c), std::vector<std::string>({"A100-40GB", "A100-80GB"}));
  EXPECT_EQ(GpuModelsForSlurmType("A100_80GB", c), std::vector<std::string>({"A100-80GB"}));
  EXPECT_EQ(GpuModelsForSlurmType("h100", c), std::vector<std::string>({"H100-80GB"}));
  EXPECT_EQ(GpuModelsForSlurmType("v100", c), std::vector<std::string>({"V100-16GB", "V100-32GB"}));
  EXPECT_TRUE(GpuModelsForSlurmType("b200", c).empty());
}

TEST(SlurmScriptTest, SbatchCommandLine) {
  StatusOr<SbatchArgs> a = ParseSbatchArgs(
      {"-N2", "--parsable", "-t", "10", "--server", "http://x", "--lenient", "--foo=1", "job.sh", "-N", "3"});
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->options, std::vector<std::string>({"--nodes=2", "--time=10", "--foo"}));
  EXPECT_EQ(a->script, "job.sh");
  EXPECT_EQ(a->script_args, std::vector<std::string>({"-N", "3"}));
  EXPECT_TRUE(a->parsable);
  EXPECT_TRUE(a->lenient);
  EXPECT_EQ(a->server, "http://x");
  a = ParseSbatchArgs({"--wrap=echo hi", "-J", "w"});
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->wrap, "echo hi");
  EXPECT_FALSE(ParseSbatchArgs({"-N", "2"}).ok());
  EXPECT_FALSE(ParseSbatchArgs({"--time"}).ok());
  EXPECT_TRUE(IsSbatchOption("--mem=4G"));
  EXPECT_TRUE(IsSbatchOption("-N"));
  EXPECT_FALSE(IsSbatchOption("--memory"));
  EXPECT_TRUE(LooksLikeBatchScript("#!/bin/sh\necho\n"));
  EXPECT_TRUE(LooksLikeBatchScript("# job\n#SBATCH -N 1\n"));
  EXPECT_FALSE(LooksLikeBatchScript("name: x\ncommand: [a]\n"));
}

// --- The prelude, run with bash on a sample script with fake SLURM_* variables.

struct TaskRun {
  int exit_code = -1;
  std::string out;  // the task's stdout and stderr (what `tessera logs` shows)
};

TaskRun RunTask(const json& command, const std::string& dir, std::map<std::string, std::string> env) {
  std::vector<std::string> argv;
  for (const json& a : command) {
    argv.push_back(a.get<std::string>());
  }
  env["PATH"] = "/usr/local/bin:/usr/bin:/bin";
  env["TMPDIR"] = dir;
  const std::string log = dir + "/task.log";
  const pid_t pid = fork();
  if (pid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || ::chdir(dir.c_str()) != 0) {
      _exit(126);
    }
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    std::vector<std::string> env_strings;
    for (const auto& [k, v] : env) {
      env_strings.push_back(k + "=" + v);
    }
    std::vector<char*> args;
    std::vector<char*> envp;
    for (std::string& a : argv) {
      args.push_back(a.data());
    }
    for (std::string& e : env_strings) {
      envp.push_back(e.data());
    }
    args.push_back(nullptr);
    envp.push_back(nullptr);
    ::execve(args[0], args.data(), envp.data());
    _exit(127);
  }
  TaskRun run;
  int status = 0;
  if (pid > 0 && ::waitpid(pid, &status, 0) == pid && WIFEXITED(status)) {
    run.exit_code = WEXITSTATUS(status);
  }
  run.out = ReadTextFile(log).value_or("");
  return run;
}

std::map<std::string, std::string> TaskEnv(int procid, int ntasks) {
  return {{"SLURM_JOB_ID", "42"},          {"SLURM_JOB_NAME", "demo"},
          {"SLURM_PROCID", std::to_string(procid)}, {"SLURM_NTASKS", std::to_string(ntasks)},
          {"SLURM_ARRAY_JOB_ID", "40"},    {"SLURM_ARRAY_TASK_ID", "2"},
          {"USER", "ada"}};
}

TEST(SlurmPreludeTest, RunsTheScriptWithItsNameArgsSrunAndOutputFile) {
  testing::TempDir dir;
  ASSERT_TRUE(dir.ok());
  SlurmJobInput in;
  in.script_name = "./demo.sh";
  in.script_text =
      "#!/bin/bash\n"
      "#SBATCH -n 2\n"
      "echo \"name=$0 arg=$1 task=$SLURM_PROCID\"\n"
      "srun --ntasks-per-node=2 -l --cpu-bind=cores -N 1 echo \"step $2\"\n"
      "srun -n 1 echo only-rank-0\n"
      "echo to-stderr >&2\n"
      "no_such_command_here\n"
      "exit 3\n";
  in.script_args = {"first", "second"};
  StatusOr<SlurmJob> job = TranslateSlurmJob(in, GpuCatalog::Default());
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  TaskRun r0 = RunTask(job->spec["command"], dir.path(), TaskEnv(0, 2));
  EXPECT_EQ(r0.exit_code, 3);
  EXPECT_NE(r0.out.find("name=./demo.sh arg=first task=0\n"), std::string::npos) << r0.out;
  EXPECT_NE(r0.out.find("step second\nonly-rank-0\nto-stderr\n"), std::string::npos) << r0.out;
  // Bash counts the script's own lines: the prelude shifts nothing.
  EXPECT_NE(r0.out.find("./demo.sh: line 7: no_such_command_here: command not found"),
            std::string::npos) << r0.out;
  // slurm-%j.out holds what the log holds.
  std::optional<std::string> file = ReadTextFile(dir.File("slurm-42.out"));
  ASSERT_TRUE(file.has_value());
  EXPECT_EQ(*file, r0.out);
  // Task 1 appends to the shared file and skips the one-task step.
  TaskRun r1 = RunTask(job->spec["command"], dir.path(), TaskEnv(1, 2));
  EXPECT_EQ(r1.exit_code, 3);
  EXPECT_EQ(r1.out.find("only-rank-0"), std::string::npos) << r1.out;
  EXPECT_NE(r1.out.find("task=1"), std::string::npos);
  file = ReadTextFile(dir.File("slurm-42.out"));
  EXPECT_EQ(*file, r0.out + r1.out);
  // No leftovers of the wrapper in TMPDIR.
  int entries = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir.path())) {
    ++entries;
  }
  EXPECT_EQ(entries, 2);  // task.log and slurm-42.out
}

TEST(SlurmPreludeTest, PatternsSeparateErrorFileAndOtherInterpreters) {
  testing::TempDir dir;
  ASSERT_TRUE(dir.ok());
  SlurmJobInput in;
  in.script_name = "sweep.sh";
  in.script_text =
      "#!/bin/sh\n#SBATCH -o out-%x-%A_%3a.%u.log\n#SBATCH -e err-%j-%t-100%%.log\n"
      "echo out-line\necho err-line >&2\n";
  StatusOr<SlurmJob> job = TranslateSlurmJob(in, GpuCatalog::Default());
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  TaskRun r = RunTask(job->spec["command"], dir.path(), TaskEnv(0, 1));
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(ReadTextFile(dir.File("out-demo-40_002.ada.log")).value_or("?"), "out-line\n");
  EXPECT_EQ(ReadTextFile(dir.File("err-42-0-100%.log")).value_or("?"), "err-line\n");
  EXPECT_NE(r.out.find("out-line"), std::string::npos);
  EXPECT_NE(r.out.find("err-line"), std::string::npos);

  // A non-shell interpreter runs the script from a file, with its #! argument.
  in.script_text = "#!/usr/bin/awk -f\n#SBATCH -o awk.out\nBEGIN { print \"awk says\", ARGV[1] }\n";
  in.script_args = {"hello"};
  job = TranslateSlurmJob(in, GpuCatalog::Default());
  ASSERT_TRUE(job.ok());
  r = RunTask(job->spec["command"], dir.path(), TaskEnv(0, 1));
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(ReadTextFile(dir.File("awk.out")).value_or("?"), "awk says hello\n");

  // An output file that cannot be opened fails the task before the script runs.
  in.script_text = "#!/bin/bash\n#SBATCH -o no/such/dir/%j.out\ntouch ran\n";
  job = TranslateSlurmJob(in, GpuCatalog::Default());
  ASSERT_TRUE(job.ok());
  r = RunTask(job->spec["command"], dir.path(), TaskEnv(0, 1));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("tessera: cannot write the job's output file no/such/dir/42.out"),
            std::string::npos) << r.out;
  EXPECT_FALSE(std::filesystem::exists(dir.File("ran")));
}

// The example scripts in examples/slurm/ read as jobs the server takes.
TEST(SlurmScriptTest, ExamplesTranslate) {
  const std::string root = std::string(TESSERA_SOURCE_DIR) + "/examples/slurm";
  int scripts = 0;
  for (const auto& e : std::filesystem::directory_iterator(root)) {
    if (e.path().extension() != ".sbatch") {
      continue;
    }
    ++scripts;
    SlurmJobInput in;
    in.script_name = e.path().filename().string();
    in.script_text = ReadTextFile(e.path().string()).value_or("");
    in.submit_dir = root;
    StatusOr<SlurmJob> job = TranslateSlurmJob(in, GpuCatalog::Default());
    ASSERT_TRUE(job.ok()) << in.script_name << ": " << job.status().ToString();
    EXPECT_TRUE(job->warnings.empty()) << in.script_name << ": " << job->warnings[0];
    ExpectServerReads(job->spec);
  }
  EXPECT_EQ(scripts, 4);
}

// --- Bounds: output patterns' padding, and the script the job's command carries.

TEST(SlurmScriptTest, OutputPatternPaddingIsBounded) {
  // A width beyond Slurm's 10 is refused at once, naming the line: the prelude would
  // otherwise build a file name of that many digits (gigabytes).
  EXPECT_EQ(Error("#!/bin/bash\n#SBATCH -N 1\n#SBATCH -o out-%999999999a\nrun\n"),
            "train.sh:3: #SBATCH -o: '%999999999a' pads to more than 10 digits (at most %10a)");
  EXPECT_EQ(Error("#!/bin/bash\nrun\n", {"--error=err-%11j.log"}),
            "--error: '%11j' pads to more than 10 digits (at most %10j)");
  const std::string many_digits(1000, '9');
  EXPECT_NE(Error("#!/bin/bash\n#SBATCH --output=x%" + many_digits + "a\nrun\n")
                .find("train.sh:2: #SBATCH --output: '%999999999999...' pads to more than 10"),
            std::string::npos);
  // %% is a percent sign: the digits after it are text.
  EXPECT_EQ(Translate("#!/bin/bash\n#SBATCH -o 100%%99999999999.log\n").spec["command"][4],
            "100%%99999999999.log");
  // A pattern is a path: PATH_MAX at most, and not empty.
  EXPECT_NE(Error("#!/bin/bash\n#SBATCH -o " + std::string(4097, 'x') + "\nrun\n")
                .find("train.sh:2: #SBATCH -o: the pattern is 4097 bytes; at most 4096"),
            std::string::npos);
  EXPECT_EQ(Error("#!/bin/bash\n#SBATCH --output=\nrun\n"),
            "train.sh:2: #SBATCH --output: expected a file name pattern");
}

TEST(SlurmPreludeTest, PaddingAtTheMostAndNoMore) {
  testing::TempDir dir;
  ASSERT_TRUE(dir.ok());
  SlurmJobInput in;
  in.script_name = "pad.sh";
  in.script_text =
      "#!/bin/bash\n#SBATCH -o out-%10a.log -e err-%010j.log\necho out\necho err >&2\n";
  StatusOr<SlurmJob> job = TranslateSlurmJob(in, GpuCatalog::Default());
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  TaskRun r = RunTask(job->spec["command"], dir.path(), TaskEnv(0, 1));
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(ReadTextFile(dir.File("out-0000000002.log")).value_or("?"), "out\n");
  EXPECT_EQ(ReadTextFile(dir.File("err-0000000042.log")).value_or("?"), "err\n");
  // A command built by hand past the CLI's check: the prelude pads to 10 at most, as
  // Slurm does, so no pattern makes it build a huge name.
  json command = job->spec["command"];
  command[4] = "wide-%12a.log";
  command[5] = "wide-%99999999999999999999999j.log";
  r = RunTask(command, dir.path(), TaskEnv(0, 1));
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(ReadTextFile(dir.File("wide-0000000002.log")).value_or("?"), "out\n");
  EXPECT_EQ(ReadTextFile(dir.File("wide-0000000042.log")).value_or("?"), "err\n");
}

// A script of `bytes` bytes: directives, then comment lines.
std::string ScriptOfSize(size_t bytes) {
  std::string text = "#!/bin/bash\n#SBATCH -n 2 -o big-%j.out\necho start\n";
  while (text.size() + 64 <= bytes) {
    text += "# " + std::string(61, 'x') + "\n";
  }
  text += "echo " + std::string(bytes - text.size() - 6, 'y') + "\n";
  EXPECT_EQ(text.size(), bytes);
  return text;
}

TEST(SlurmScriptTest, ScriptsUpToTheLimitReachTheServer) {
  constexpr size_t kLimit = kMaxBatchScriptBytes;
  // At the limit: translated, encoded as the CLI sends it, and read by the server's codec.
  SlurmJobInput in;
  in.script_name = "/home/ada/proj/big.sh";
  in.script_text = ScriptOfSize(kLimit);
  in.script_args = {"--epochs", "10"};
  StatusOr<SlurmJob> job = TranslateSlurmJob(in, GpuCatalog::Default());
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  const std::string sent = job->spec.dump(-1, ' ', false, json::error_handler_t::replace);
  StatusOr<JobSubmission> sub = ParseJobJson(sent, GpuCatalog::Default());
  ASSERT_TRUE(sub.ok()) << sub.status().ToString();
  EXPECT_EQ(sub->command[8], in.script_text);
  // One byte over: refused by the CLI, saying the limit and why.
  in.script_text = ScriptOfSize(kLimit + 1);
  job = TranslateSlurmJob(in, GpuCatalog::Default());
  ASSERT_FALSE(job.ok());
  EXPECT_EQ(job.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(job.status().message(),
            "/home/ada/proj/big.sh is 57345 bytes; a batch script is at most 57344 (56 KiB): the "
            "job's command carries it whole, and holds at most 65536 bytes");
  // The size a tester sent (900 KB), and a --wrap command, likewise.
  in.script_text = ScriptOfSize(900 * 1024);
  EXPECT_NE(TranslateSlurmJob(in, GpuCatalog::Default()).status().message().find("at most 57344"),
            std::string::npos);
  // Under the limit, but the script, its arguments and patterns together are too much.
  in.script_text = ScriptOfSize(kLimit);
  in.command_line = {"--output=" + std::string(4000, 'o'), "--error=" + std::string(4000, 'e')};
  job = TranslateSlurmJob(in, GpuCatalog::Default());
  ASSERT_FALSE(job.ok());
  EXPECT_NE(job.status().message().find("over the 65536 bytes the controller takes"),
            std::string::npos) << job.status().message();
}

TEST(SlurmScriptTest, SubmitRefusesAnOversizedScriptBeforeSending) {
  testing::TempDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string path = dir.File("big.sh");
  std::ofstream(path, std::ios::binary) << ScriptOfSize(900 * 1024);
  ClientConfig config;
  config.server = "http://127.0.0.1:1";  // nothing listens: a request would fail otherwise
  config.connect_timeout_ms = 100;
  SubmitOptions options;
  options.command = {path};
  std::ostringstream out;
  std::ostringstream err;
  EXPECT_EQ(RunSubmitScript(config, options, false, out, err), 2);
  EXPECT_NE(err.str().find("'" + path + "' is over 57344 bytes; a batch script is at most "
                           "57344 (56 KiB)"),
            std::string::npos) << err.str();
}

// `tessera submit` names an unknown option as typed, even when a word follows it.
TEST(SubmitCommandLineTest, UnknownOptionIsNamed) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"submit", "--mem", "4G", "--", "true"},
       "tessera: submit: unknown option '--mem' (an sbatch option: use `tessera sbatch "
       "--mem...`, or an #SBATCH line in a batch script)\n"},
      {{"submit", "--foo=1", "--", "true"}, "tessera: submit: unknown option '--foo'\n"}};
  for (const auto& [args, message] : cases) {
    CLI::App app;
    int code = 0;
    AddClusterCommands(app, &code);
    std::ostringstream captured;
    std::streambuf* old = std::cerr.rdbuf(captured.rdbuf());
    int exit_code = -1;
    try {
      std::vector<std::string> reversed(args.rbegin(), args.rend());
      app.parse(reversed);
    } catch (const CLI::ParseError& e) {
      exit_code = e.get_exit_code();
    }
    std::cerr.rdbuf(old);
    EXPECT_EQ(exit_code, 2) << args[1];
    EXPECT_EQ(captured.str(), message);
  }
}

}  // namespace slurm_script_test
}  // namespace tessera

namespace tessera {
namespace {

TEST(SlurmPyxisTest, ContainerOptionsBecomeTheJobsImageAndContainer) {
  SlurmJob job = slurm_script_test::Translate(
      "#!/bin/bash\n"
      "#SBATCH --container-image=nvcr.io#nvidia/pytorch:24.05-py3\n"
      "#SBATCH --container-mounts=/data:/data,/scratch/ada:/scratch:rw\n"
      "#SBATCH --container-workdir=/workspace --no-container-mount-home\n"
      "#SBATCH --container-env=NCCL_DEBUG --container-name=pt --container-writable\n"
      "python train.py\n");
  EXPECT_EQ(job.spec["image"], "nvcr.io/nvidia/pytorch:24.05-py3");
  EXPECT_EQ(job.spec["container"]["mounts"], json({"/data:/data:ro", "/scratch/ada:/scratch:rw"}));
  EXPECT_EQ(job.spec["container"]["workdir"], "/workspace");
  EXPECT_EQ(job.spec["container"]["mount_home"], false);
  EXPECT_EQ(job.warnings.size(), 2U);  // --container-env and --container-name
  StatusOr<JobSubmission> sub = JobSubmissionFromJson(job.spec, GpuCatalog::Default());
  ASSERT_TRUE(sub.ok()) << sub.status().ToString();
  EXPECT_EQ(sub->container.mounts.size(), 2U);
}

TEST(SlurmPyxisTest, BadOrRefusedContainerOptionsSayWhy) {
  EXPECT_NE(slurm_script_test::Error("#!/bin/bash\n#SBATCH --container-image=Bad\nrun\n")
                .find("--container-image"),
            std::string::npos);
  EXPECT_NE(slurm_script_test::Error(
                "#!/bin/bash\n#SBATCH --container-image=x --container-mounts=/a:/proc\nrun\n")
                .find("--container-mounts"),
            std::string::npos);
  EXPECT_NE(slurm_script_test::Error("#!/bin/bash\n#SBATCH --container-mounts=/a\nrun\n")
                .find("need an image"),
            std::string::npos);
  EXPECT_NE(slurm_script_test::Error(
                "#!/bin/bash\n#SBATCH --container-image=x --container-remap-root\nrun\n")
                .find("never as root"),
            std::string::npos);
}

}  // namespace
}  // namespace tessera
