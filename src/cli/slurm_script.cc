// Reading sbatch's options from a script's directives and a command line into a
// SlurmRequest (slurm_request.h); slurm_job.cc maps that onto a job file.
#include "cli/slurm_script.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "api/job_codec.h"
#include "api/job_relations.h"
#include "api/job_codec_relations.h"
#include "api/units.h"
#include "base/strings.h"
#include "cli/slurm_request.h"

namespace tessera {
namespace {

using nlohmann::json;

enum class Arg : uint8_t { kNone, kRequired, kOptional };  // kOptional: only as --opt=value
// Where an option may be written: sbatch's own anywhere; Tessera's own in #TESSERA lines
// and on the command line; the command line's own only there; kIgnored: accepted
// anywhere with a warning (it changes nothing Tessera can honour).
enum class Where : uint8_t { kSbatch, kTessera, kCommandLine, kIgnored };

enum class Opt : uint8_t {
  kJobName, kNodes, kNtasks, kNtasksPerNode, kCpusPerTask, kCpusPerGpu, kGres, kGpus,
  kGpusPerNode, kGpusPerTask, kMem, kMemPerGpu, kMemPerCpu, kTime, kPartition, kQos,
  kPriority, kArray, kDependency, kOutput, kError, kChdir, kExport, kRequeue, kNoRequeue,
  kSignal, kHold, kExclusive, kAccount, kOpenMode,
  // Tessera's own.
  kGpuModel, kGpuFraction, kGpuMemory, kMig, kCheckpointInterval, kRestartMax, kRestartOn,
  kRestartBackoff, kPreemptible, kHoldIfUnfit,
  kPyxis,  // pyxis's --container-* (ApplyPyxis, slurm_pyxis.cc)
  // The command line's own.
  kLenient, kParsable, kWrap, kServer, kToken, kCaCert, kInsecure, kHelp,
  kIgnored,
};

struct OptionDef {
  std::string_view name;  // without "--"
  char short_name;        // 0: none
  Arg arg;
  Where where;
  Opt id;
  std::string_view help;
};

constexpr std::array kOptions = {
    OptionDef{"job-name", 'J', Arg::kRequired, Where::kSbatch, Opt::kJobName, "job name"},
    OptionDef{"nodes", 'N', Arg::kRequired, Where::kSbatch, Opt::kNodes, "nodes"},
    OptionDef{"ntasks", 'n', Arg::kRequired, Where::kSbatch, Opt::kNtasks, "tasks (the gang's replicas)"},
    OptionDef{"ntasks-per-node", 0, Arg::kRequired, Where::kSbatch, Opt::kNtasksPerNode, "tasks per node"},
    OptionDef{"cpus-per-task", 'c', Arg::kRequired, Where::kSbatch, Opt::kCpusPerTask, "CPU cores per task"},
    OptionDef{"cpus-per-gpu", 0, Arg::kRequired, Where::kSbatch, Opt::kCpusPerGpu, "CPU cores per GPU"},
    OptionDef{"gres", 0, Arg::kRequired, Where::kSbatch, Opt::kGres, "gpu[:TYPE][:N] per node"},
    OptionDef{"gpus", 'G', Arg::kRequired, Where::kSbatch, Opt::kGpus, "[TYPE:]N GPUs in all"},
    OptionDef{"gpus-per-node", 0, Arg::kRequired, Where::kSbatch, Opt::kGpusPerNode, "[TYPE:]N"},
    OptionDef{"gpus-per-task", 0, Arg::kRequired, Where::kSbatch, Opt::kGpusPerTask, "[TYPE:]N"},
    OptionDef{"mem", 0, Arg::kRequired, Where::kSbatch, Opt::kMem, "memory per node: 4G, 512M"},
    OptionDef{"mem-per-gpu", 0, Arg::kRequired, Where::kSbatch, Opt::kMemPerGpu, "memory per GPU"},
    OptionDef{"mem-per-cpu", 0, Arg::kRequired, Where::kSbatch, Opt::kMemPerCpu, "memory per core"},
    OptionDef{"time", 't', Arg::kRequired, Where::kSbatch, Opt::kTime, "limit: M, H:M:S, D-H:M:S, UNLIMITED"},
    OptionDef{"partition", 'p', Arg::kRequired, Where::kSbatch, Opt::kPartition, "queue"},
    OptionDef{"qos", 'q', Arg::kRequired, Where::kSbatch, Opt::kQos, "priority class name"},
    OptionDef{"priority", 0, Arg::kRequired, Where::kSbatch, Opt::kPriority, "priority number or class"},
    OptionDef{"array", 'a', Arg::kRequired, Where::kSbatch, Opt::kArray, "0-9, 1,3,5-7, 0-15:4, %N throttle"},
    OptionDef{"dependency", 'd', Arg::kRequired, Where::kSbatch, Opt::kDependency, "afterok:ID[:ID],singleton"},
    OptionDef{"output", 'o', Arg::kRequired, Where::kSbatch, Opt::kOutput, "stdout file: %j %A %a %x %u %N %t %%"},
    OptionDef{"error", 'e', Arg::kRequired, Where::kSbatch, Opt::kError, "stderr file (default: with stdout)"},
    OptionDef{"chdir", 'D', Arg::kRequired, Where::kSbatch, Opt::kChdir, "working directory"},
    OptionDef{"export", 0, Arg::kRequired, Where::kSbatch, Opt::kExport, "ALL, NONE, ALL,VAR=x, VAR1,VAR2=y"},
    OptionDef{"requeue", 0, Arg::kNone, Where::kSbatch, Opt::kRequeue, "restart after node loss"},
    OptionDef{"no-requeue", 0, Arg::kNone, Where::kSbatch, Opt::kNoRequeue, "never restart"},
    OptionDef{"signal", 0, Arg::kRequired, Where::kSbatch, Opt::kSignal, "[B:]SIG[@SECONDS] before the limit"},
    OptionDef{"hold", 'H', Arg::kNone, Where::kSbatch, Opt::kHold, "submit held"},
    OptionDef{"exclusive", 0, Arg::kOptional, Where::kSbatch, Opt::kExclusive, "(whole GPUs are exclusive)"},
    OptionDef{"account", 'A', Arg::kRequired, Where::kSbatch, Opt::kAccount, "must be your tenant"},
    OptionDef{"open-mode", 0, Arg::kRequired, Where::kSbatch, Opt::kOpenMode, "append or truncate"},
    OptionDef{"container-image", 0, Arg::kRequired, Where::kSbatch, Opt::kPyxis, "run in this image (pyxis)"},
    OptionDef{"container-mounts", 0, Arg::kRequired, Where::kSbatch, Opt::kPyxis, "SRC[:DST[:ro|rw]],..."},
    OptionDef{"container-workdir", 0, Arg::kRequired, Where::kSbatch, Opt::kPyxis, "working directory in it"},
    OptionDef{"container-mount-home", 0, Arg::kNone, Where::kSbatch, Opt::kPyxis, "mount HOME (default)"},
    OptionDef{"no-container-mount-home", 0, Arg::kNone, Where::kSbatch, Opt::kPyxis, "do not mount HOME"},
    OptionDef{"container-env", 0, Arg::kRequired, Where::kSbatch, Opt::kPyxis, "(exported variables reach it)"},
    OptionDef{"container-name", 0, Arg::kRequired, Where::kSbatch, Opt::kPyxis, "(each task has its own)"},
    OptionDef{"container-writable", 0, Arg::kNone, Where::kSbatch, Opt::kPyxis, "(the default)"},
    OptionDef{"container-remap-root", 0, Arg::kNone, Where::kSbatch, Opt::kPyxis, "(refused)"},
    OptionDef{"no-container-remap-root", 0, Arg::kNone, Where::kSbatch, Opt::kPyxis, "(the default)"},
    OptionDef{"gpu-model", 0, Arg::kRequired, Where::kTessera, Opt::kGpuModel, "GPU model(s), a|b"},
    OptionDef{"gpu-fraction", 0, Arg::kRequired, Where::kTessera, Opt::kGpuFraction, "a share of one GPU"},
    OptionDef{"gpu-memory", 0, Arg::kRequired, Where::kTessera, Opt::kGpuMemory, "memory per GPU"},
    OptionDef{"mig", 0, Arg::kRequired, Where::kTessera, Opt::kMig, "MIG profile"},
    OptionDef{"checkpoint-interval", 0, Arg::kRequired, Where::kTessera, Opt::kCheckpointInterval, "e.g. 30m"},
    OptionDef{"restart-max", 0, Arg::kRequired, Where::kTessera, Opt::kRestartMax, "0..100"},
    OptionDef{"restart-on", 0, Arg::kRequired, Where::kTessera, Opt::kRestartOn, "failure,node-lost,gpu-fault"},
    OptionDef{"restart-backoff", 0, Arg::kRequired, Where::kTessera, Opt::kRestartBackoff, "e.g. 10s"},
    OptionDef{"preemptible", 0, Arg::kOptional, Where::kTessera, Opt::kPreemptible, "true or false"},
    OptionDef{"hold-if-unfit", 0, Arg::kNone, Where::kTessera, Opt::kHoldIfUnfit, "keep an unfit job pending"},
    OptionDef{"lenient", 0, Arg::kNone, Where::kCommandLine, Opt::kLenient, "warn about unsupported options"},
    OptionDef{"parsable", 0, Arg::kNone, Where::kCommandLine, Opt::kParsable, "print the job id alone"},
    OptionDef{"wrap", 0, Arg::kRequired, Where::kCommandLine, Opt::kWrap, "run CMD with /bin/sh"},
    OptionDef{"server", 0, Arg::kRequired, Where::kCommandLine, Opt::kServer, "controller URL"},
    OptionDef{"token", 0, Arg::kRequired, Where::kCommandLine, Opt::kToken, "API token"},
    OptionDef{"ca-cert", 0, Arg::kRequired, Where::kCommandLine, Opt::kCaCert, "CA certificates"},
    OptionDef{"insecure", 0, Arg::kNone, Where::kCommandLine, Opt::kInsecure, "skip TLS checks"},
    OptionDef{"help", 'h', Arg::kNone, Where::kCommandLine, Opt::kHelp, "this text"},
    // Accepted and ignored, with a warning.
    OptionDef{"mail-type", 0, Arg::kRequired, Where::kIgnored, Opt::kIgnored, ""},
    OptionDef{"mail-user", 0, Arg::kRequired, Where::kIgnored, Opt::kIgnored, ""},
    OptionDef{"comment", 0, Arg::kRequired, Where::kIgnored, Opt::kIgnored, ""},
    OptionDef{"kill-on-invalid-dep", 0, Arg::kRequired, Where::kIgnored, Opt::kIgnored, ""},
    OptionDef{"get-user-env", 0, Arg::kOptional, Where::kIgnored, Opt::kIgnored, ""},
    OptionDef{"propagate", 0, Arg::kOptional, Where::kIgnored, Opt::kIgnored, ""},
    OptionDef{"distribution", 'm', Arg::kRequired, Where::kIgnored, Opt::kIgnored, ""},
    OptionDef{"hint", 0, Arg::kRequired, Where::kIgnored, Opt::kIgnored, ""},
    OptionDef{"verbose", 'v', Arg::kNone, Where::kIgnored, Opt::kIgnored, ""},
    OptionDef{"quiet", 'Q', Arg::kNone, Where::kIgnored, Opt::kIgnored, ""},
    OptionDef{"nice", 0, Arg::kOptional, Where::kIgnored, Opt::kIgnored, ""},
    OptionDef{"wckey", 0, Arg::kRequired, Where::kIgnored, Opt::kIgnored, ""},
    OptionDef{"profile", 0, Arg::kRequired, Where::kIgnored, Opt::kIgnored, ""},
    OptionDef{"acctg-freq", 0, Arg::kRequired, Where::kIgnored, Opt::kIgnored, ""},
    OptionDef{"threads-per-core", 0, Arg::kRequired, Where::kIgnored, Opt::kIgnored, ""},
    OptionDef{"ntasks-per-core", 0, Arg::kRequired, Where::kIgnored, Opt::kIgnored, ""},
    OptionDef{"mem-bind", 0, Arg::kRequired, Where::kIgnored, Opt::kIgnored, ""},
    OptionDef{"gpu-bind", 0, Arg::kRequired, Where::kIgnored, Opt::kIgnored, ""},
    OptionDef{"no-kill", 'k', Arg::kOptional, Where::kIgnored, Opt::kIgnored, ""},
    OptionDef{"oversubscribe", 's', Arg::kNone, Where::kIgnored, Opt::kIgnored, ""},
};

const OptionDef* FindLong(std::string_view name) {
  for (const OptionDef& d : kOptions) {
    if (d.name == name) {
      return &d;
    }
  }
  return nullptr;
}

const OptionDef* FindShort(char c) {
  for (const OptionDef& d : kOptions) {
    if (d.short_name == c) {
      return &d;
    }
  }
  return nullptr;
}

// One option as written, with where it was written for messages.
struct Given {
  const OptionDef* def;
  std::string value;
  std::string where;  // "train.sh:4: #SBATCH --time" or "--time"
};

// Reads options off `words` from `*i`; stops at the first word that is not an option
// (left at *i). `unknown` receives options not in the table (in lenient mode).
Status TakeOptions(const std::vector<std::string>& words, size_t* i, const std::string& prefix,
                   bool lenient, std::vector<Given>* out, std::vector<std::string>* warnings) {
  while (*i < words.size()) {
    const std::string& w = words[*i];
    if (w == "--") {
      ++*i;
      return Status::Ok();
    }
    if (w.size() < 2 || w[0] != '-') {
      return Status::Ok();
    }
    const OptionDef* def = nullptr;
    std::string shown;
    std::optional<std::string> value;
    if (w[1] == '-') {
      const size_t eq = w.find('=');
      const std::string name = w.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
      shown = "--" + name;
      def = FindLong(name);
      if (eq != std::string::npos) {
        value = w.substr(eq + 1);
      }
    } else {
      shown = w.substr(0, 2);
      def = FindShort(w[1]);
      if (w.size() > 2) {
        value = w.substr(2);
      }
    }
    const std::string where = prefix + shown;
    ++*i;
    if (def == nullptr) {
      if (!lenient) {
        return InvalidArgumentError(where + ": not supported");
      }
      warnings->push_back(where + ": not supported; ignored");
      continue;
    }
    if (def->arg == Arg::kRequired && !value.has_value()) {
      if (*i >= words.size()) {
        return InvalidArgumentError(where + ": needs a value");
      }
      value = words[(*i)++];
    } else if (def->arg == Arg::kNone && value.has_value()) {
      return InvalidArgumentError(where + ": takes no value, got '" + *value + "'");
    }
    out->push_back(Given{def, value.value_or(""), where});
  }
  return Status::Ok();
}

// A directive line's words as sbatch splits them: blanks separate, quotes group, a
// backslash escapes, and an unquoted '#' starts a comment, but only at the start of a
// word: sbatch also cuts one inside a word, which loses pyxis's REGISTRY#IMAGE.
std::vector<std::string> SplitDirective(std::string_view line) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  char quote = 0;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quote != 0) {
      if (c == quote) {
        quote = 0;
      } else {
        word += c;
      }
    } else if (c == '"' || c == '\'') {
      quote = c;
      in_word = true;
    } else if (c == '\\' && i + 1 < line.size()) {
      word += line[++i];
      in_word = true;
    } else if (c == '#' && !in_word) {
      break;
    } else if (c == ' ' || c == '\t') {
      if (in_word) {
        words.push_back(word);
        word.clear();
        in_word = false;
      }
    } else {
      word += c;
      in_word = true;
    }
  }
  if (in_word) {
    words.push_back(word);
  }
  return words;
}

StatusOr<int64_t> Count(const Given& g, int64_t min, int64_t max) {
  StatusOr<int64_t> v = ParseInt64(g.value);
  if (!v.ok() || *v < min || *v > max) {
    return InvalidArgumentError(g.where + ": expected a number from " + std::to_string(min) +
                                " to " + std::to_string(max) + ", got '" + g.value + "'");
  }
  return *v;
}

// "[TYPE:]N" of --gpus*, or gres "gpu[:TYPE][:N]".
Status GpuValue(const Given& g, bool gres, SlurmRequest* r) {
  std::vector<std::string_view> parts = Split(g.value, ':');
  if (gres) {
    if (g.value == "none") {
      r->gpu_unit = SlurmRequest::GpuUnit::kNone;
      return Status::Ok();
    }
    if (g.value.find(',') != std::string::npos || parts.empty() || parts[0] != "gpu") {
      return InvalidArgumentError(g.where + ": only one gres, gpu[:TYPE][:N], is supported; got '" +
                                  g.value + "'");
    }
    parts.erase(parts.begin());
  } else if (g.value.find(',') != std::string::npos) {
    return InvalidArgumentError(g.where + ": GPUs of several types are not supported; got '" +
                                g.value + "'");
  }
  std::string type;
  int64_t count = 1;
  const auto is_count = [](std::string_view s) {
    return !s.empty() && s.find_first_not_of("0123456789") == std::string_view::npos;
  };
  if (parts.size() > 2 || (!gres && parts.empty()) ||
      (parts.size() == 2 && !is_count(parts[1])) || (!gres && parts.size() == 1 && !is_count(parts[0]))) {
    return InvalidArgumentError(g.where + ": expected " +
                                (gres ? "gpu[:TYPE][:N]" : std::string("[TYPE:]N")) + ", got '" +
                                g.value + "'");
  }
  if (parts.size() == 2) {
    type = std::string(parts[0]);
    count = ParseInt64(parts[1]).ok() ? *ParseInt64(parts[1]) : -1;
  } else if (parts.size() == 1) {
    if (is_count(parts[0])) {
      count = ParseInt64(parts[0]).ok() ? *ParseInt64(parts[0]) : -1;
    } else {
      type = std::string(parts[0]);
    }
  }
  if (count < 0 || count > 1024) {
    return InvalidArgumentError(g.where + ": GPU count out of range in '" + g.value + "'");
  }
  r->gpu_count = count;
  r->gpu_type = type;
  r->gpu_origin = g.where;
  return Status::Ok();
}

// --signal=[B:]SIG[@SECONDS]: the name as the job file takes it (USR1).
Status SignalValue(const Given& g, SlurmRequest* r, std::vector<std::string>* warnings) {
  std::string v = g.value;
  if (StartsWith(v, "B:")) {
    warnings->push_back(g.where + ": B: (the batch shell only) is not distinguished; the signal "
                                  "goes to all of each task's processes");
    v = v.substr(2);
  } else if (v.size() > 1 && v[1] == ':') {
    return InvalidArgumentError(g.where + ": '" + v.substr(0, 2) + "' is not supported");
  }
  const size_t at = v.find('@');
  std::string sig = v.substr(0, at);
  if (at != std::string::npos) {
    StatusOr<int64_t> t = ParseInt64(v.substr(at + 1));
    if (!t.ok() || *t < 0 || *t > 65535) {
      return InvalidArgumentError(g.where + ": expected seconds 0..65535 after '@', got '" +
                                  v.substr(at + 1) + "'");
    }
    r->signal_before_s = *t;
  } else {
    r->signal_before_s = 60;
  }
  // The job file's signal names (api/job_codec_relations.h), which the server reads.
  StatusOr<int> number = ParseSignalName(sig);
  if (!number.ok()) {
    return InvalidArgumentError(g.where + ": unknown signal '" + sig +
                                "'; expected a name such as USR1, USR2, TERM or a number 1..64");
  }
  const std::string name = SignalName(*number);
  r->signal_name = name;
  return Status::Ok();
}

// An -o/-e pattern, scanned as the prelude reads it (after '%': digits, the padding, then
// one character): a path, not empty, of kMaxOutputPatternBytes at most, whose paddings
// are kMaxPatternPadWidth digits at most (leading zeros aside). Into `*out`.
Status OutputPattern(const Given& g, std::string* out) {
  const std::string& p = g.value;
  if (p.empty()) {
    return InvalidArgumentError(g.where + ": expected a file name pattern");
  }
  if (p.size() > kMaxOutputPatternBytes) {
    return InvalidArgumentError(g.where + ": the pattern is " + std::to_string(p.size()) +
                                " bytes; at most " + std::to_string(kMaxOutputPatternBytes));
  }
  for (size_t i = p.find('%'); i != std::string::npos; i = p.find('%', i)) {
    const size_t end = std::min(p.find_first_not_of("0123456789", i + 1), p.size());
    const std::string_view digits = std::string_view(p).substr(i + 1, end - i - 1);
    const std::string_view width =
        digits.substr(std::min(digits.find_first_not_of('0'), digits.size()));
    int pad = 0;
    for (char c : width.substr(0, 3)) {
      pad = pad * 10 + (c - '0');
    }
    if (pad > kMaxPatternPadWidth) {
      std::string escape = p.substr(i, end + 1 - i);
      if (escape.size() > 16) {
        escape = escape.substr(0, 13) + "...";
      }
      return InvalidArgumentError(g.where + ": '" + escape + "' pads to more than " +
                                  std::to_string(kMaxPatternPadWidth) + " digits (at most %" +
                                  std::to_string(kMaxPatternPadWidth) + p.substr(end, 1) + ")");
    }
    i = end + 1;  // past the escape's character ("%%" is a percent sign)
  }
  *out = p;
  return Status::Ok();
}

// --mem, --mem-per-gpu, --mem-per-cpu: a size in `unit`s of the request.
Status MemoryValue(const Given& g, SlurmRequest::MemUnit unit, SlurmRequest* r) {
  StatusOr<int64_t> mib = ParseSlurmMemoryMiB(g.value);
  if (!mib.ok()) {
    return InvalidArgumentError(g.where + ": " + mib.status().message());
  }
  if (*mib == 0) {
    return InvalidArgumentError(g.where + ": 0 (all of a node's memory) is not supported; "
                                          "give a size");
  }
  r->mem_unit = unit;
  r->mem_mib = *mib;
  r->mem_origin = g.where;
  return Status::Ok();
}

// What the job asks for: nodes, tasks, CPUs, GPUs and memory.
std::optional<Status> ApplyResources(const Given& g, SlurmRequest* r) {
  using GpuUnit = SlurmRequest::GpuUnit;
  using MemUnit = SlurmRequest::MemUnit;
  switch (g.def->id) {
    case Opt::kNodes: {
      if (g.value.find('-') != std::string::npos) {
        return InvalidArgumentError(g.where + ": a range of node counts is not supported; give "
                                              "one number");
      }
      TESSERA_ASSIGN_OR_RETURN(r->nodes, Count(g, 1, 1024));
      return Status::Ok();
    }
    case Opt::kNtasks: {
      TESSERA_ASSIGN_OR_RETURN(r->ntasks, Count(g, 1, 1024));
      return Status::Ok();
    }
    case Opt::kNtasksPerNode: {
      TESSERA_ASSIGN_OR_RETURN(r->ntasks_per_node, Count(g, 1, 1024));
      return Status::Ok();
    }
    case Opt::kCpusPerTask: {
      TESSERA_ASSIGN_OR_RETURN(r->cpus_per_task, Count(g, 1, 4096));
      r->cpus_per_gpu.reset();
      return Status::Ok();
    }
    case Opt::kCpusPerGpu: {
      TESSERA_ASSIGN_OR_RETURN(r->cpus_per_gpu, Count(g, 1, 4096));
      r->cpus_per_task.reset();
      return Status::Ok();
    }
    case Opt::kGres:
      r->gpu_unit = GpuUnit::kPerNode;
      return GpuValue(g, /*gres=*/true, r);
    case Opt::kGpus:
      r->gpu_unit = GpuUnit::kTotal;
      return GpuValue(g, false, r);
    case Opt::kGpusPerNode:
      r->gpu_unit = GpuUnit::kPerNode;
      return GpuValue(g, false, r);
    case Opt::kGpusPerTask:
      r->gpu_unit = GpuUnit::kPerTask;
      return GpuValue(g, false, r);
    case Opt::kMem:
      return MemoryValue(g, MemUnit::kPerNode, r);
    case Opt::kMemPerGpu:
      return MemoryValue(g, MemUnit::kPerGpu, r);
    case Opt::kMemPerCpu:
      return MemoryValue(g, MemUnit::kPerCpu, r);
    default:
      return std::nullopt;
  }
}

// When and where it is scheduled: limit, queue, priority, array, dependencies, requeue,
// hold, account.
std::optional<Status> ApplyScheduling(const Given& g, SlurmRequest* r,
                                      std::vector<std::string>* warnings) {
  switch (g.def->id) {
    case Opt::kTime: {
      StatusOr<std::optional<Micros>> t = ParseSlurmTime(g.value);
      if (!t.ok()) {
        return InvalidArgumentError(g.where + ": " + t.status().message());
      }
      r->time_given = true;
      r->time = *t;
      return Status::Ok();
    }
    case Opt::kPartition:
      if (g.value.find(',') != std::string::npos) {
        return InvalidArgumentError(g.where + ": several partitions are not supported; give one "
                                              "queue, got '" + g.value + "'");
      }
      r->partition = g.value;
      return Status::Ok();
    case Opt::kQos:
      r->priority = g.value;
      return Status::Ok();
    case Opt::kPriority: {
      StatusOr<int64_t> n = ParseInt64(g.value);
      if (n.ok() && *n >= INT32_MIN && *n <= INT32_MAX) {
        r->priority = *n;
      } else {
        r->priority = g.value;  // a class name; the server resolves it
      }
      return Status::Ok();
    }
    case Opt::kArray: {
      StatusOr<ArraySpec> a = ParseArraySpec(g.value);
      if (!a.ok()) {
        return InvalidArgumentError(g.where + ": " + a.status().message());
      }
      r->array = ArraySpecText(*a);
      return Status::Ok();
    }
    case Opt::kDependency: {
      StatusOr<DependencySpec> d = ParseDependencySpec(g.value);
      if (!d.ok()) {
        return InvalidArgumentError(g.where + ": " + d.status().message());
      }
      r->dependency = DependencySpecText(*d);
      return Status::Ok();
    }
    case Opt::kRequeue:
      r->requeue = true;
      return Status::Ok();
    case Opt::kNoRequeue:
      r->requeue = false;
      return Status::Ok();
    case Opt::kHold:
      r->hold = true;
      return Status::Ok();
    case Opt::kExclusive:
      warnings->push_back(g.where + ": nodes are not reserved whole; the job's GPUs are its "
                                    "own, the node's other GPUs may run other jobs");
      return Status::Ok();
    case Opt::kAccount:
      r->account = g.value;
      return Status::Ok();
    default:
      return std::nullopt;
  }
}

// How its processes run: name, output files, directory, environment, signal.
std::optional<Status> ApplyProcess(const Given& g, SlurmRequest* r,
                                   std::vector<std::string>* warnings) {
  switch (g.def->id) {
    case Opt::kJobName:
      r->job_name = g.value;
      return Status::Ok();
    case Opt::kOutput:
      return OutputPattern(g, &r->output);
    case Opt::kError:
      return OutputPattern(g, &r->error);
    case Opt::kChdir:
      r->chdir = g.value;
      return Status::Ok();
    case Opt::kExport:
      r->export_spec = g.value;
      return Status::Ok();
    case Opt::kOpenMode:
      if (g.value != "append" && g.value != "truncate") {
        return InvalidArgumentError(g.where + ": expected append or truncate, got '" + g.value + "'");
      }
      r->open_append = g.value == "append";
      return Status::Ok();
    case Opt::kSignal:
      return SignalValue(g, r, warnings);
    default:
      return std::nullopt;
  }
}

// Tessera's own (#TESSERA lines and the command line). Their values are checked when the
// request becomes a job spec, but for --gpu-memory and --preemptible.
std::optional<Status> ApplyTessera(const Given& g, SlurmRequest* r) {
  switch (g.def->id) {
    case Opt::kGpuModel:
      r->gpu_model = g.value;
      return Status::Ok();
    case Opt::kGpuFraction:
      r->gpu_fraction = g.value;
      return Status::Ok();
    case Opt::kGpuMemory: {
      StatusOr<int64_t> mib = ParseMemoryMiB(g.value);
      if (!mib.ok()) {
        mib = ParseSlurmMemoryMiB(g.value);
      }
      if (!mib.ok()) {
        return InvalidArgumentError(g.where + ": " + mib.status().message());
      }
      r->gpu_memory_mib = std::to_string(*mib);
      return Status::Ok();
    }
    case Opt::kMig:
      r->mig = g.value;
      return Status::Ok();
    case Opt::kCheckpointInterval:
      r->checkpoint_interval = g.value;
      return Status::Ok();
    case Opt::kRestartMax:
      r->restart_max = g.value;
      return Status::Ok();
    case Opt::kRestartOn:
      r->restart_on = g.value;
      return Status::Ok();
    case Opt::kRestartBackoff:
      r->restart_backoff = g.value;
      return Status::Ok();
    case Opt::kPreemptible:
      if (g.value != "" && g.value != "true" && g.value != "false") {
        return InvalidArgumentError(g.where + ": expected true or false, got '" + g.value + "'");
      }
      r->preemptible = g.value != "false";
      return Status::Ok();
    case Opt::kHoldIfUnfit:
      r->hold_if_unfit = true;
      return Status::Ok();
    default:
      return std::nullopt;
  }
}

// One option into the request: the group that has it applies it (each answers nullopt
// for the others'); what none has is ignored with a warning or belongs to the command line.
Status Apply(const Given& g, SlurmRequest* r, std::vector<std::string>* warnings) {
  std::optional<Status> applied = ApplyResources(g, r);
  if (!applied) {
    applied = ApplyScheduling(g, r, warnings);
  }
  if (!applied) {
    applied = ApplyProcess(g, r, warnings);
  }
  if (!applied) {
    applied = ApplyTessera(g, r);
  }
  if (!applied && g.def->id == Opt::kPyxis) {
    applied = ApplyPyxis(g.def->name, g.value, g.where, r, warnings);
  }
  if (applied) {
    return *std::move(applied);
  }
  if (g.def->id == Opt::kIgnored) {
    warnings->push_back(g.where + ": ignored (it changes nothing in Tessera)");
    return Status::Ok();
  }
  return InvalidArgumentError(g.where + ": only on the command line");
}

// The script's directives, in order, each as its options.
Status ReadDirectives(std::string_view text, const std::string& name, bool lenient,
                      std::vector<Given>* out, std::vector<std::string>* warnings) {
  if (text.find("\r\n") != std::string_view::npos) {
    return InvalidArgumentError(name + " has DOS line breaks (\\r\\n); convert it with "
                                       "dos2unix, as sbatch asks");
  }
  bool in_header = true;
  int line_no = 0;
  for (std::string_view line : Split(text, '\n')) {
    ++line_no;
    std::string magic;
    for (std::string_view m : {"#SBATCH", "#TESSERA"}) {
      if (StartsWith(line, m) && (line.size() == m.size() || line[m.size()] == ' ' ||
                                  line[m.size()] == '\t')) {
        magic = std::string(m);
      }
    }
    if (!in_header) {
      if (!magic.empty()) {
        warnings->push_back(name + ":" + std::to_string(line_no) + ": " + magic +
                            " after the first command is ignored, as sbatch does");
      }
      continue;
    }
    if (magic.empty()) {
      const std::string_view t = Trim(line);
      in_header = t.empty() || t[0] == '#';
      continue;
    }
    const std::vector<std::string> words = SplitDirective(line.substr(magic.size()));
    const std::string prefix = name + ":" + std::to_string(line_no) + ": " + magic + " ";
    std::vector<Given> given;
    size_t i = 0;
    TESSERA_RETURN_IF_ERROR(TakeOptions(words, &i, prefix, lenient, &given, warnings));
    if (i < words.size()) {
      return InvalidArgumentError(prefix + words[i] + ": not an option");
    }
    for (Given& g : given) {
      if (g.def->where == Where::kCommandLine) {
        if (g.def->id == Opt::kParsable) {
          continue;  // sbatch allows it here; it only shapes the command's output
        }
        return InvalidArgumentError(g.where + ": only on the command line");
      }
      if (g.def->where == Where::kTessera && magic == "#SBATCH") {
        return InvalidArgumentError(g.where + ": not an sbatch option; write it in a #TESSERA "
                                              "line");
      }
      out->push_back(std::move(g));
    }
  }
  return Status::Ok();
}

}  // namespace

bool LooksLikeBatchScript(std::string_view text) {
  if (StartsWith(text, "#!")) {
    return true;
  }
  for (std::string_view line : Split(text.substr(0, 64 * 1024), '\n')) {
    if (StartsWith(line, "#SBATCH") || StartsWith(line, "#TESSERA")) {
      return true;
    }
  }
  return false;
}

bool IsSbatchOption(std::string_view option) {
  if (StartsWith(option, "--")) {
    return FindLong(option.substr(2, option.find('=') == std::string_view::npos
                                         ? std::string_view::npos
                                         : option.find('=') - 2)) != nullptr;
  }
  return option.size() >= 2 && option[0] == '-' && FindShort(option[1]) != nullptr;
}

StatusOr<SbatchArgs> ParseSbatchArgs(const std::vector<std::string>& args) {
  SbatchArgs out;
  std::vector<Given> given;
  std::vector<std::string> ignored;
  size_t i = 0;
  TESSERA_RETURN_IF_ERROR(TakeOptions(args, &i, "", /*lenient=*/true, &given, &ignored));
  for (const Given& g : given) {
    switch (g.def->id) {
      case Opt::kLenient: out.lenient = true; break;
      case Opt::kParsable: out.parsable = true; break;
      case Opt::kWrap: out.wrap = g.value; break;
      case Opt::kServer: out.server = g.value; break;
      case Opt::kToken: out.token = g.value; break;
      case Opt::kCaCert: out.ca_cert = g.value; break;
      case Opt::kInsecure: out.insecure = true; break;
      case Opt::kHelp: out.help = true; break;
      default:
        out.options.push_back(g.def->arg == Arg::kNone || (g.def->arg == Arg::kOptional && g.value.empty())
                                  ? "--" + std::string(g.def->name)
                                  : "--" + std::string(g.def->name) + "=" + g.value);
    }
  }
  // Options not in the table go on to the translator, which refuses or warns.
  for (const std::string& w : ignored) {
    out.options.push_back(w.substr(0, w.find(':')));
  }
  if (i < args.size() && out.wrap.empty()) {
    out.script = args[i++];
  }
  out.script_args.assign(args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
  if (!out.help && out.script.empty() && out.wrap.empty()) {
    return InvalidArgumentError("tessera sbatch needs a script (or --wrap=CMD); see --help");
  }
  return out;
}

std::string SbatchUsage() {
  std::ostringstream s;
  s << "Usage: tessera sbatch [OPTIONS] SCRIPT [ARGS...]   (or --wrap=CMD)\n"
       "Submits a Slurm batch script; #SBATCH and #TESSERA lines give its options, the\n"
       "command line overrides them. See docs/slurm.md.\n\nOptions:\n";
  for (const OptionDef& d : kOptions) {
    if (d.where == Where::kIgnored) {
      continue;
    }
    std::string flag = d.short_name != 0 ? std::string("-") + d.short_name + ", " : "    ";
    flag += "--" + std::string(d.name);
    if (d.arg == Arg::kRequired) {
      flag += "=V";
    }
    s << "  " << flag << std::string(flag.size() < 26 ? 26 - flag.size() : 1, ' ') << d.help
      << (d.where == Where::kTessera ? " (#TESSERA)" : "") << "\n";
  }
  s << "Accepted and ignored with a warning: --mail-type, --mail-user, --comment, --nice, ...\n";
  return s.str();
}

std::string BatchScriptLimit() {
  return "a batch script is at most " + std::to_string(kMaxBatchScriptBytes) + " (" +
         std::to_string(kMaxBatchScriptBytes / 1024) +
         " KiB): the job's command carries it whole, and holds at most " +
         std::to_string(kMaxCommandBytes) + " bytes";
}

StatusOr<SlurmJob> TranslateSlurmJob(const SlurmJobInput& in, const GpuCatalog& catalog) {
  if (in.script_text.size() > kMaxBatchScriptBytes) {
    return InvalidArgumentError((in.script_name.empty() ? "--wrap" : in.script_name) + " is " +
                                std::to_string(in.script_text.size()) + " bytes; " +
                                BatchScriptLimit());
  }
  SlurmJob job;
  std::vector<Given> given;
  const std::string name = in.script_name.empty() ? "wrap" : in.script_name;
  TESSERA_RETURN_IF_ERROR(ReadDirectives(in.script_text, name, in.lenient, &given, &job.warnings));
  {
    size_t i = 0;
    std::vector<Given> cl;
    TESSERA_RETURN_IF_ERROR(TakeOptions(in.command_line, &i, "", in.lenient, &cl, &job.warnings));
    if (i < in.command_line.size()) {
      return InvalidArgumentError(in.command_line[i] + ": not an option");
    }
    given.insert(given.end(), cl.begin(), cl.end());
  }
  SlurmRequest r;
  for (const Given& g : given) {
    TESSERA_RETURN_IF_ERROR(Apply(g, &r, &job.warnings));
  }
  job.account = r.account;
  TESSERA_ASSIGN_OR_RETURN(JobDraft draft, SlurmRequestToDraft(r, catalog, &job.warnings));
  TESSERA_RETURN_IF_ERROR(FinishSlurmJob(in, r, &draft));
  job.spec = JobDraftToJson(draft);
  return job;
}

}  // namespace tessera
