#include "api/job_codec_relations.h"

#include <algorithm>

#include <csignal>

#include "api/job_keys.h"
#include "api/job_relations.h"
#include "api/units.h"
#include "base/strings.h"

namespace tessera {
namespace {

namespace keys = job_keys;

constexpr std::pair<const char*, int> kSignals[] = {
    {"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT}, {"ABRT", SIGABRT},
    {"KILL", SIGKILL}, {"USR1", SIGUSR1}, {"SEGV", SIGSEGV}, {"USR2", SIGUSR2},
    {"PIPE", SIGPIPE}, {"ALRM", SIGALRM}, {"TERM", SIGTERM}, {"CONT", SIGCONT},
    {"STOP", SIGSTOP}, {"TSTP", SIGTSTP}, {"URG", SIGURG},   {"XCPU", SIGXCPU},
    {"XFSZ", SIGXFSZ}, {"VTALRM", SIGVTALRM}, {"PROF", SIGPROF}, {"WINCH", SIGWINCH}};

}  // namespace

std::string SignalName(int sig) {
  for (const auto& [name, value] : kSignals) {
    if (value == sig) {
      return name;
    }
  }
  return std::to_string(sig);
}

StatusOr<int> ParseSignalName(std::string_view text) {
  std::string name(Trim(text));
  for (char& c : name) {
    c = static_cast<char>(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
  }
  if (name.rfind("SIG", 0) == 0) {
    name.erase(0, 3);
  }
  for (const auto& [n, value] : kSignals) {
    if (name == n) {
      return value;
    }
  }
  if (StatusOr<int64_t> v = ParseInt64(name); v.ok() && *v >= 1 && *v <= 64) {
    return static_cast<int>(*v);
  }
  return InvalidArgumentError("'" + ToValidUtf8(std::string(text.substr(0, 40))) +
                              "' is not a signal: use a name such as USR1 or a number 1..64");
}

Status ReadJobRelations(const Json& j, FieldReader& r, JobSubmission* job) {
  constexpr size_t kMaxText = 64 * 1024;
  if (const Json* v = FindField(j, keys::kArray)) {
    TESSERA_ASSIGN_OR_RETURN(std::string text, r.ScalarText(*v, "array", kMaxText));
    StatusOr<ArraySpec> spec = ParseArraySpec(text);
    if (!spec.ok()) {
      return r.Error("array", spec.status().message());
    }
    // The compact form, or what was sent where that is shorter. An array's text is
    // stored with each of its elements and read back with each at a restart: bounded.
    job->array = ArraySpecText(*spec);
    if (const std::string_view sent = Trim(text); sent.size() < job->array.size()) {
      job->array = std::string(sent);
    }
    if (job->array.size() > kMaxArrayText) {
      return r.Error("array", "is " + std::to_string(job->array.size()) +
                                  " bytes even written compactly; at most " +
                                  std::to_string(kMaxArrayText) +
                                  ": give its indices as ranges (a-b, a-b:step)");
    }
    if (const Json* i = FindField(j, keys::kArrayIndex)) {
      TESSERA_ASSIGN_OR_RETURN(job->array_index, r.Int(*i, "array_index", 0, kMaxArrayIndex));
      if (!std::binary_search(spec->indices.begin(), spec->indices.end(), job->array_index)) {
        return r.Error("array_index", "is not one of the array's indices (" + job->array + ")");
      }
    }
  } else if (FindField(j, keys::kArrayIndex) != nullptr) {
    return r.Error("array_index", "is set only on the elements of an array");
  }
  if (const Json* v = FindField(j, keys::kDependency)) {
    TESSERA_ASSIGN_OR_RETURN(std::string text, r.ScalarText(*v, "dependency", kMaxText));
    StatusOr<DependencySpec> spec = ParseDependencySpec(text);
    if (!spec.ok()) {
      return r.Error("dependency", spec.status().message());
    }
    job->dependency = DependencySpecText(*spec);
  }
  if (const Json* v = FindField(j, keys::kHold)) {
    TESSERA_ASSIGN_OR_RETURN(job->hold, r.Bool(*v, "hold"));
  }
  // A priority written as a name (the codec read it as 0) is a class for the server.
  std::string from_priority;
  if (const Json* v = FindField(j, keys::kPriority);
      v != nullptr && v->is_string() && !ParseInt64(v->get_ref<const std::string&>()).ok()) {
    from_priority = v->get_ref<const std::string&>();
  }
  if (const Json* v = FindField(j, keys::kPriorityClass)) {
    TESSERA_ASSIGN_OR_RETURN(job->priority_class, r.ScalarText(*v, "priority_class", 128));
    if (!from_priority.empty() && from_priority != job->priority_class) {
      return r.Error("priority_class", "names '" + job->priority_class + "' but priority names '" +
                                           ToValidUtf8(from_priority.substr(0, 80)) + "'");
    }
  } else if (!from_priority.empty()) {
    if (from_priority.size() > 128) {
      return r.Error("priority", "a priority class name has at most 128 characters");
    }
    job->priority_class = from_priority;
  }
  if (const Json* v = FindField(j, keys::kSignal)) {
    TESSERA_RETURN_IF_ERROR(r.CheckObject(*v, "signal", keys::kSignalKeys));
    const Json* name = FindField(*v, keys::kName);
    if (name == nullptr) {
      return r.Error("signal.name", "is required, e.g. USR1");
    }
    TESSERA_ASSIGN_OR_RETURN(std::string text, r.ScalarText(*name, "signal.name", 40));
    StatusOr<int> sig = ParseSignalName(text);
    if (!sig.ok()) {
      return r.Error("signal.name", sig.status().message());
    }
    job->limit_signal = *sig;
    job->limit_signal_before = 60'000'000;
    if (const Json* before = FindField(*v, keys::kBefore)) {
      TESSERA_ASSIGN_OR_RETURN(job->limit_signal_before,
                               r.Quantity(*before, "signal.before", &ParseDurationMicros));
      if (job->limit_signal_before < 0 || job->limit_signal_before > 7LL * 24 * 3600 * 1'000'000) {
        return r.Error("signal.before", "must be between 0 and 7 days");
      }
    }
  }
  if (!job->priority_class.empty() && !IsValidJobName(job->priority_class)) {
    return r.Error("priority_class", "'" + ToValidUtf8(job->priority_class.substr(0, 80)) +
                                         "' is not a valid name");
  }
  return Status::Ok();
}

void WriteJobRelations(const JobSubmission& job, Json& out) {
  if (!job.array.empty()) {
    out[keys::kArray] = job.array;
    if (job.array_index >= 0) {
      out[keys::kArrayIndex] = job.array_index;
    }
  }
  if (!job.dependency.empty()) {
    out[keys::kDependency] = job.dependency;
  }
  if (job.hold) {
    out[keys::kHold] = true;
  }
  if (!job.priority_class.empty()) {
    out[keys::kPriorityClass] = job.priority_class;
  }
  if (job.limit_signal > 0) {
    out[keys::kSignal] = {{keys::kName, SignalName(job.limit_signal)},
                     {keys::kBefore, FormatDuration(job.limit_signal_before)}};
  }
}

}  // namespace tessera
