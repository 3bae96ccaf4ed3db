// The cluster commands' command line: each subcommand's flags (CLI11), resolved to a
// connection and handed to its Run* function (cluster_commands.h).
#include <functional>
#include <iostream>
#include <memory>
#include <string>

#include "api/units.h"
#include "cli/api_client.h"
#include "cli/cluster_commands.h"
#include "cli/job_actions.h"
#include "cli/queues_import_command.h"
#include "cli/sbatch_command.h"
#include "cli/slurm_script.h"

namespace tessera {

void AddConnectionFlags(CLI::App* cmd, ConnectionFlags* flags) {
  cmd->add_option("--server", flags->server, kServerFlagHelp);
  cmd->add_option("--token", flags->token,
                  "API token (env TESSERA_TOKEN, or a file named by TESSERA_TOKEN_FILE)");
  cmd->add_option("--ca-cert", flags->ca_cert,
                  "PEM file of CA certificates for https:// (env TESSERA_CA_CERT)");
  cmd->add_flag("--insecure", flags->insecure, "skip TLS certificate verification");
}

namespace {

// Resolves the connection and runs `run`, setting `*exit_code`.
void Dispatch(const ConnectionFlags& flags, int* exit_code,
              const std::function<int(const ClientConfig&)>& run) {
  StatusOr<ClientConfig> config = ResolveClientConfig(flags, ProcessEnvironment());
  if (!config.ok()) {
    *exit_code = ReportError(config.status(), std::cerr);
    return;
  }
  *exit_code = run(*config);
}

// What CLI11 left over when it was told to keep unknown options: the first option is
// named as the user typed it, with a hint where sbatch knows it.
Status UnknownOptions(const std::string& command, const std::vector<std::string>& extras) {
  for (const std::string& e : extras) {
    if (e.size() > 1 && e[0] == '-' && e != "--") {
      const std::string name = e.substr(0, e.find('='));
      return InvalidArgumentError(
          command + ": unknown option '" + name + "'" +
          (IsSbatchOption(name) ? " (an sbatch option: use `tessera sbatch " + name +
                                      "...`, or an #SBATCH line in a batch script)"
                                : ""));
    }
  }
  for (const std::string& e : extras) {
    if (e != "--") {
      return InvalidArgumentError(command + ": unexpected argument '" + e + "'");
    }
  }
  return Status::Ok();
}

}  // namespace

// The job's flags of `tessera submit`, shared with `tessera run`.
void AddJobFlags(CLI::App* cmd, SubmitOptions* o) {
  cmd->add_option("--name", o->name, "job name");
  cmd->add_option("--queue", o->queue, "queue (default: the tenant's)");
  cmd->add_option("--replicas", o->replicas, "tasks started together (a gang)");
  cmd->add_option("--gpus", o->gpus, "GPUs per replica");
  cmd->add_option("--gpu-model", o->gpu_model, "GPU model, e.g. H100-80GB");
  cmd->add_option("--gpu-fraction", o->gpu_fraction, "a share of one GPU, e.g. 0.5");
  cmd->add_option("--gpu-memory", o->gpu_memory, "GPU memory per GPU, e.g. 20GiB");
  cmd->add_option("--mig", o->mig, "MIG profile, e.g. 3g.40gb");
  cmd->add_option("--cpu", o->cpu, "CPU cores per replica, e.g. 8 or 500m");
  cmd->add_option("--memory", o->memory, "memory per replica, e.g. 64GiB");
  cmd->add_option("--priority", o->priority, "priority (higher runs first)");
  cmd->add_option("--checkpoint-interval", o->checkpoint_interval,
                  "how often the job checkpoints, e.g. 30m");
  cmd->add_option("--runtime-limit", o->runtime_limit, "wall-time limit, e.g. 24h");
  cmd->add_option("--restart-max", o->restart_max, "restarts allowed, 0..100 (default 3)");
  cmd->add_option("--restart-on", o->restart_on,
                  "what restarts the job: failure,node-lost,gpu-fault (default all three)");
  cmd->add_option("--restart-backoff", o->restart_backoff,
                  "wait before restarting after a failure, e.g. 10s (default 30s)");
  // One value per --env, so the command may follow without --.
  cmd->add_option("--env", o->env, "environment variable KEY=VALUE (repeatable)")
      ->allow_extra_args(false);
  cmd->add_option("--image", o->image,
                  "run in this OCI image, e.g. nvcr.io/nvidia/pytorch:24.05-py3 (the command is "
                  "then optional: the image's own)");
  cmd->add_option("--container-mounts", o->container_mounts,
                  "host directories for the image, SRC[:DST[:ro|rw]] joined by ',' (read-only "
                  "unless rw; the node allows some)");
  cmd->add_option("--container-workdir", o->container_workdir,
                  "working directory in the image (default: the image's)");
  cmd->add_flag("--hold-if-unfit", o->hold_if_unfit,
                "keep a job that could never run on the current nodes pending (with its "
                "'never fits' reason) instead of having it refused");
}

namespace {

// submit.
void AddSubmitCommand(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<ConnectionFlags>();
  auto o = std::make_shared<SubmitOptions>();
  CLI::App* cmd = app.add_subcommand("submit", "Submit a job: -f job.yaml, or flags -- COMMAND");
  cmd->add_option("-f,--file", o->file,
                  "job spec, YAML or JSON ('-': stdin), sent as written plus submit_dir; a "
                  "file with a 'jobs:' list of specs is one batch, submitted all or none");
  AddJobFlags(cmd, o.get());
  cmd->add_option("--idempotency-key", o->idempotency_key,
                  "a retried submit with the same key makes no second job (default: a new "
                  "key for each submit, which covers the CLI's own resends)");
  cmd->add_option("command", o->command,
                  "the command and its arguments, after --; or a batch script (#! or "
                  "#SBATCH lines) and its arguments");
  cmd->add_option("-o,--output", o->output, "json: print the job");
  auto lenient = std::make_shared<bool>(false);
  cmd->add_flag("--lenient", *lenient,
                "a batch script: warn about the directives Tessera does not support and "
                "ignore them");
  AddConnectionFlags(cmd, flags.get());
  // Unknown options are reported by name as soon as the subcommand is read, before
  // CLI11's "argument not expected" about a word that came after them.
  cmd->allow_extras();
  cmd->parse_complete_callback([cmd] {
    if (Status s = UnknownOptions("submit", cmd->remaining()); !s.ok()) {
      throw CLI::RuntimeError(ReportError(s, std::cerr));
    }
  });
  cmd->callback([flags, o, lenient, exit_code] {
    o->submit_dir = CurrentDirForJobs();
    const bool script =
        o->file.empty() && !o->command.empty() && IsBatchScriptFile(o->command[0]);
    Dispatch(*flags, exit_code, [&](const ClientConfig& c) {
      return script ? RunSubmitScript(c, *o, *lenient, std::cout, std::cerr)
                    : RunSubmit(c, *o, std::cout, std::cerr);
    });
  });
}

// submit, jobs, wait, show, cancel, logs.
void AddJobCommands(CLI::App& app, int* exit_code) {
  AddSubmitCommand(app, exit_code);
  // jobs
  {
    auto flags = std::make_shared<ConnectionFlags>();
    auto o = std::make_shared<JobsOptions>();
    CLI::App* cmd = app.add_subcommand("jobs", "List jobs (default: pending and running)");
    cmd->add_option("--state", o->state, "comma-separated states, e.g. pending,running");
    cmd->add_option("--queue", o->queue, "only this queue");
    cmd->add_option("--tenant", o->tenant, "only this tenant");
    cmd->add_option("--user", o->user, "only this user's jobs");
    cmd->add_flag("--all", o->all, "jobs in every state, finished ones too");
    cmd->add_flag("--start", o->start,
                  "pending jobs with their position, expected start (ETA) and what blocks them");
    cmd->add_flag("-r,--array", o->expand_arrays,
                  "each array element on a row of its own (default: an array's pending "
                  "elements on one row, 12_[3-999%50])");
    cmd->add_option("--limit", o->limit, "at most this many jobs");
    cmd->add_option("-o,--output", o->output, "wide or json");
    AddConnectionFlags(cmd, flags.get());
    cmd->callback([flags, o, exit_code] {
      Dispatch(*flags, exit_code, [&](const ClientConfig& c) {
        return RunJobs(c, *o, SystemClock(), std::cout, std::cerr);
      });
    });
  }
  // wait
  {
    auto flags = std::make_shared<ConnectionFlags>();
    auto o = std::make_shared<WaitOptions>();
    auto timeout = std::make_shared<std::string>("10m");
    CLI::App* cmd = app.add_subcommand(
        "wait", "Wait until jobs end (exit 1 if one failed) or, with --for running, start");
    cmd->add_option("jobs", o->jobs, "job ids")->required();
    cmd->add_option("--for", o->until, "done or running")->capture_default_str();
    cmd->add_option("--timeout", *timeout, "give up after this long (exit 124)")
        ->capture_default_str();
    AddConnectionFlags(cmd, flags.get());
    cmd->callback([flags, o, timeout, exit_code] {
      StatusOr<int64_t> t = ParseDurationMicros(*timeout);
      if (!t.ok()) {
        *exit_code = ReportError(InvalidArgumentError("--timeout: " + t.status().message()), std::cerr);
        return;
      }
      o->timeout = t.value();
      Dispatch(*flags, exit_code, [&](const ClientConfig& c) {
        return RunWait(c, *o, SystemClock(), std::cout, std::cerr);
      });
    });
  }
  // show
  {
    auto flags = std::make_shared<ConnectionFlags>();
    auto o = std::make_shared<ShowOptions>();
    CLI::App* cmd = app.add_subcommand("show", "A job in detail: state and why, placement, times");
    cmd->add_option("job", o->job, "job id")->required();
    cmd->add_option("-o,--output", o->output, "json");
    AddConnectionFlags(cmd, flags.get());
    cmd->callback([flags, o, exit_code] {
      Dispatch(*flags, exit_code, [&](const ClientConfig& c) {
        return RunShow(c, *o, SystemClock(), std::cout, std::cerr);
      });
    });
  }
  // cancel
  {
    auto flags = std::make_shared<ConnectionFlags>();
    auto o = std::make_shared<CancelOptions>();
    CLI::App* cmd = app.add_subcommand("cancel", "Cancel jobs");
    cmd->add_option("jobs", o->jobs, "job ids")->required();
    cmd->add_option("-o,--output", o->output, "json");
    AddConnectionFlags(cmd, flags.get());
    cmd->callback([flags, o, exit_code] {
      Dispatch(*flags, exit_code,
               [&](const ClientConfig& c) { return RunCancel(c, *o, std::cout, std::cerr); });
    });
  }
  // hold, release, requeue
  for (const char* name : {"hold", "release", "requeue"}) {
    auto flags = std::make_shared<ConnectionFlags>();
    auto jobs = std::make_shared<std::vector<std::string>>();
    const std::string action = name;
    CLI::App* cmd = app.add_subcommand(
        action, action == "hold"      ? "Keep pending jobs from starting until released"
                : action == "release" ? "Let held jobs start"
                                      : "End running jobs' attempts and queue them again");
    cmd->add_option("jobs", *jobs, "job ids; ARRAY_INDEX for one element, an array's id for all")
        ->required();
    AddConnectionFlags(cmd, flags.get());
    cmd->callback([flags, jobs, action, exit_code] {
      Dispatch(*flags, exit_code, [&](const ClientConfig& c) {
        return RunJobAction(c, action, *jobs, std::cout, std::cerr);
      });
    });
  }
  // logs
  {
    auto flags = std::make_shared<ConnectionFlags>();
    auto o = std::make_shared<LogsOptions>();
    CLI::App* cmd = app.add_subcommand("logs", "A task's output");
    cmd->add_option("job", o->job, "job id")->required();
    cmd->add_option("--task", o->task, "task index")->capture_default_str();
    cmd->add_flag("-f,--follow", o->follow, "keep printing until the job ends");
    AddConnectionFlags(cmd, flags.get());
    cmd->callback([flags, o, exit_code] {
      Dispatch(*flags, exit_code,
               [&](const ClientConfig& c) { return RunLogs(c, *o, std::cout, std::cerr); });
    });
  }
}

// queues [set | import].
void AddQueuesCommand(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<ConnectionFlags>();
  auto o = std::make_shared<QueuesOptions>();
  CLI::App* cmd = app.add_subcommand("queues", "Queues: quotas, usage, pending and running");
  cmd->add_option("-o,--output", o->output, "json");
  AddConnectionFlags(cmd, flags.get());

  auto set_flags = std::make_shared<ConnectionFlags>();
  auto set_o = std::make_shared<QueuesSetOptions>();
  CLI::App* set = cmd->add_subcommand("set", "Replace the queue configuration (admin)");
  set->add_option("-f,--file", set_o->file, "queue configuration YAML ('-': stdin)")->required();
  set->add_option("-o,--output", set_o->output, "json");
  AddConnectionFlags(set, set_flags.get());
  set->callback([set_flags, set_o, exit_code] {
    Dispatch(*set_flags, exit_code, [&](const ClientConfig& c) {
      return RunQueuesSet(c, *set_o, std::cout, std::cerr);
    });
  });
  auto import_flags = std::make_shared<ConnectionFlags>();
  auto import_o = std::make_shared<QueuesImportOptions>();
  CLI::App* import = cmd->add_subcommand(
      "import", "Convert Kueue ClusterQueues, Cohorts and ResourceFlavors to a queue "
                "configuration (--apply: and replace the controller's, admin)");
  import->add_option("file", import_o->file, "Kueue YAML, several documents ('-': stdin)")
      ->required();
  import->add_option("--out", import_o->out_file, "write the queue configuration to FILE");
  import->add_flag("--apply", import_o->apply, "replace the controller's queue configuration");
  import->add_flag("--lenient", import_o->lenient,
                   "warn about Kueue fields without an equivalent and leave them out");
  AddConnectionFlags(import, import_flags.get());
  import->callback([import_flags, import_o, exit_code] {
    if (!import_o->apply) {
      *exit_code = RunQueuesImport(nullptr, *import_o, std::cout, std::cerr);
      return;
    }
    Dispatch(*import_flags, exit_code, [&](const ClientConfig& c) {
      return RunQueuesImport(&c, *import_o, std::cout, std::cerr);
    });
  });
  cmd->callback([flags, o, exit_code, set, import] {
    if (set->parsed() || import->parsed()) {
      return;
    }
    Dispatch(*flags, exit_code,
             [&](const ClientConfig& c) { return RunQueues(c, *o, std::cout, std::cerr); });
  });
}

// drain, resume, nodes, queues, usage.
void AddClusterStateCommands(CLI::App& app, int* exit_code) {
  // drain, resume
  for (const bool drain : {true, false}) {
    auto flags = std::make_shared<ConnectionFlags>();
    auto o = std::make_shared<DrainOptions>();
    o->drain = drain;
    CLI::App* cmd = app.add_subcommand(
        drain ? "drain" : "resume",
        drain ? "Take a node or one GPU out of service for new work (admin)"
              : "Put a drained node or GPU back in service (admin)");
    cmd->add_option("node", o->node, "node name")->required();
    cmd->add_option("--gpu", o->gpu, "only this GPU (index on the node)");
    if (drain) {
      cmd->add_option("--reason", o->reason, "why (shown in `tessera nodes`)")->required();
    }
    cmd->add_option("-o,--output", o->output, "json");
    AddConnectionFlags(cmd, flags.get());
    cmd->callback([flags, o, exit_code] {
      Dispatch(*flags, exit_code,
               [&](const ClientConfig& c) { return RunDrain(c, *o, std::cout, std::cerr); });
    });
  }
  // nodes
  {
    auto flags = std::make_shared<ConnectionFlags>();
    auto o = std::make_shared<NodesOptions>();
    CLI::App* cmd = app.add_subcommand("nodes", "Nodes and, with --gpus, who holds each GPU");
    cmd->add_flag("--gpus", o->gpus, "add a GPU map");
    cmd->add_option("-o,--output", o->output, "json");
    AddConnectionFlags(cmd, flags.get());
    std::vector<CLI::App*> actions;
    for (const bool revoke : {false, true}) {
      auto action_flags = std::make_shared<ConnectionFlags>();
      auto node = std::make_shared<std::string>();
      CLI::App* action = cmd->add_subcommand(
          revoke ? "revoke" : "remove",
          revoke ? "Revoke a node's credential: its agent is refused, its work runs elsewhere "
                   "(admin)"
                 : "Forget a node so its name may join afresh (admin; refused while jobs run "
                   "there)");
      action->add_option("node", *node, "node name")->required();
      AddConnectionFlags(action, action_flags.get());
      action->callback([action_flags, node, exit_code, revoke] {
        Dispatch(*action_flags, exit_code, [&](const ClientConfig& c) {
          return RunNodesRemove(c, *node, std::cout, std::cerr, revoke);
        });
      });
      actions.push_back(action);
    }
    cmd->callback([flags, o, exit_code, actions] {
      if (std::any_of(actions.begin(), actions.end(), [](CLI::App* a) { return a->parsed(); })) {
        return;
      }
      Dispatch(*flags, exit_code, [&](const ClientConfig& c) {
        return RunNodes(c, *o, SystemClock(), std::cout, std::cerr);
      });
    });
  }
  AddQueuesCommand(app, exit_code);
  // usage
  {
    auto flags = std::make_shared<ConnectionFlags>();
    auto o = std::make_shared<UsageOptions>();
    CLI::App* cmd = app.add_subcommand("usage", "GPU-hours per tenant, queue, job or user");
    cmd->add_option("--since", o->since, "start: 2026-11-01, RFC 3339, or ago: 24h, 7d")
        ->capture_default_str();
    cmd->add_option("--until", o->until, "end: now, a date, RFC 3339, or ago")
        ->capture_default_str();
    cmd->add_option("--by", o->by, "tenant, queue, job or user (within its tenant)")
        ->capture_default_str();
    cmd->add_option("-o,--output", o->output, "json or csv");
    AddConnectionFlags(cmd, flags.get());
    cmd->callback([flags, o, exit_code] {
      Dispatch(*flags, exit_code, [&](const ClientConfig& c) {
        return RunUsage(c, *o, SystemClock(), std::cout, std::cerr);
      });
    });
  }
}

}  // namespace

void AddClusterCommands(CLI::App& app, int* exit_code) {
  AddJobCommands(app, exit_code);
  AddSbatchCommand(app, exit_code);
  AddClusterStateCommands(app, exit_code);
}

}  // namespace tessera
