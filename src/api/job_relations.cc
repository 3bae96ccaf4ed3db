#include "api/job_relations.h"

#include <algorithm>
#include <charconv>

#include "base/strings.h"

namespace tessera {
namespace {

StatusOr<int64_t> Number(std::string_view text, std::string_view what, std::string_view whole) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || p != text.data() + text.size() || v < 0) {
    return InvalidArgumentError("'" + std::string(whole.substr(0, 80)) + "': " + std::string(what) +
                                " '" + std::string(text.substr(0, 40)) +
                                "' is not a non-negative integer");
  }
  return v;
}

}  // namespace

StatusOr<ArraySpec> ParseArraySpec(std::string_view text) {
  const std::string_view whole = Trim(text);
  if (whole.empty()) {
    return InvalidArgumentError("an array needs indices, e.g. 0-9 or 1,3,5-7%2");
  }
  ArraySpec spec;
  std::string_view list = whole;
  if (size_t pct = whole.find('%'); pct != std::string_view::npos) {
    TESSERA_ASSIGN_OR_RETURN(int64_t t, Number(whole.substr(pct + 1), "throttle", whole));
    if (t < 1 || t > static_cast<int64_t>(kMaxArrayElements)) {
      return InvalidArgumentError("'" + std::string(whole) + "': the throttle after % must be 1.." +
                                  std::to_string(kMaxArrayElements));
    }
    spec.throttle = static_cast<int32_t>(t);
    list = whole.substr(0, pct);
  }
  for (std::string_view item : Split(list, ',')) {
    item = Trim(item);
    int64_t step = 1;
    if (size_t colon = item.find(':'); colon != std::string_view::npos) {
      TESSERA_ASSIGN_OR_RETURN(step, Number(item.substr(colon + 1), "step", whole));
      if (step < 1) {
        return InvalidArgumentError("'" + std::string(whole) + "': a step must be at least 1");
      }
      item = item.substr(0, colon);
    }
    int64_t first = 0;
    int64_t last = 0;
    if (size_t dash = item.find('-'); dash != std::string_view::npos) {
      TESSERA_ASSIGN_OR_RETURN(first, Number(item.substr(0, dash), "index", whole));
      TESSERA_ASSIGN_OR_RETURN(last, Number(item.substr(dash + 1), "index", whole));
      if (last < first) {
        return InvalidArgumentError("'" + std::string(whole) + "': the range " + std::string(item) +
                                    " ends before it starts");
      }
    } else {
      TESSERA_ASSIGN_OR_RETURN(first, Number(item, "index", whole));
      last = first;
    }
    if (last > kMaxArrayIndex) {
      return InvalidArgumentError("'" + std::string(whole) + "': indices go up to " +
                                  std::to_string(kMaxArrayIndex));
    }
    for (int64_t i = first; i <= last; i += step) {
      if (spec.indices.size() == kMaxArrayElements) {
        return InvalidArgumentError("'" + std::string(whole) + "': an array has at most " +
                                    std::to_string(kMaxArrayElements) + " elements");
      }
      spec.indices.push_back(i);
    }
  }
  std::sort(spec.indices.begin(), spec.indices.end());
  if (std::adjacent_find(spec.indices.begin(), spec.indices.end()) != spec.indices.end()) {
    return InvalidArgumentError("'" + std::string(whole) + "': an index is repeated");
  }
  return spec;
}

std::string ArraySpecText(const ArraySpec& spec) {
  // Runs of three or more indices with one step are written "first-last:step" (a step
  // of 1 also for two), so that "0-3999999:400" stays short rather than 10,000 numbers.
  std::string out;
  const std::vector<int64_t>& v = spec.indices;
  for (size_t i = 0; i < v.size();) {
    size_t j = i;
    if (i + 1 < v.size()) {
      const int64_t step = v[i + 1] - v[i];
      // A stepped run stops before an index that starts a run of consecutive ones.
      auto consecutive_at = [&](size_t k) { return k + 1 < v.size() && v[k + 1] == v[k] + 1; };
      while (j + 1 < v.size() && v[j + 1] - v[j] == step &&
             (step == 1 || !consecutive_at(j + 1))) {
        ++j;
      }
      if (step != 1 && j - i < 2) {
        j = i;  // two indices with a step: written as a list
      }
    }
    if (!out.empty()) {
      out += ',';
    }
    out += std::to_string(v[i]);
    if (j > i) {
      out += '-' + std::to_string(v[j]);
      if (const int64_t step = v[i + 1] - v[i]; step != 1) {
        out += ':' + std::to_string(step);
      }
    }
    i = j + 1;
  }
  if (spec.throttle > 0) {
    out += '%' + std::to_string(spec.throttle);
  }
  return out;
}

StatusOr<JobRef> ParseJobRef(std::string_view text) {
  JobRef ref;
  std::string_view id = text;
  if (size_t us = text.find('_'); us != std::string_view::npos) {
    TESSERA_ASSIGN_OR_RETURN(ref.index, Number(text.substr(us + 1), "array index", text));
    id = text.substr(0, us);
  }
  TESSERA_ASSIGN_OR_RETURN(int64_t v, Number(id, "job id", text));
  if (v == 0) {
    return InvalidArgumentError("'" + std::string(text.substr(0, 80)) + "': job ids start at 1");
  }
  ref.id = static_cast<uint64_t>(v);
  return ref;
}

std::string JobRefText(const JobRef& ref) {
  return std::to_string(ref.id) + (ref.index >= 0 ? "_" + std::to_string(ref.index) : "");
}

std::string_view DependencyKindName(DependencyKind kind) {
  switch (kind) {
    case DependencyKind::kAfter:
      return "after";
    case DependencyKind::kAfterAny:
      return "afterany";
    case DependencyKind::kAfterOk:
      return "afterok";
    case DependencyKind::kAfterNotOk:
      return "afternotok";
    case DependencyKind::kSingleton:
      return "singleton";
  }
  return "?";
}

StatusOr<DependencySpec> ParseDependencySpec(std::string_view text) {
  const std::string_view whole = Trim(text);
  DependencySpec spec;
  const bool has_comma = whole.find(',') != std::string_view::npos;
  spec.any = whole.find('?') != std::string_view::npos;
  if (has_comma && spec.any) {
    return InvalidArgumentError("'" + std::string(whole.substr(0, 80)) +
                                "': use either ',' (all) or '?' (any), not both");
  }
  size_t jobs = 0;
  for (std::string_view item : Split(whole, spec.any ? '?' : ',')) {
    item = Trim(item);
    std::vector<std::string_view> parts = Split(item, ':');
    const std::string_view name = parts.empty() ? std::string_view() : parts[0];
    Dependency dep;
    bool known = false;
    for (DependencyKind k : {DependencyKind::kAfter, DependencyKind::kAfterAny,
                             DependencyKind::kAfterOk, DependencyKind::kAfterNotOk,
                             DependencyKind::kSingleton}) {
      if (name == DependencyKindName(k)) {
        dep.kind = k;
        known = true;
      }
    }
    if (!known) {
      return InvalidArgumentError(
          "'" + std::string(item.substr(0, 80)) +
          "' is not a dependency: use after, afterany, afterok, afternotok (each :JOB[:JOB...]) "
          "or singleton");
    }
    if (dep.kind == DependencyKind::kSingleton) {
      if (parts.size() > 1) {
        return InvalidArgumentError("singleton takes no jobs");
      }
    } else if (parts.size() < 2) {
      return InvalidArgumentError("'" + std::string(item.substr(0, 80)) + "': name its jobs, e.g. " +
                                  std::string(name) + ":12");
    }
    for (size_t i = 1; i < parts.size(); ++i) {
      std::string_view job = parts[i];
      // Slurm's "+time" delay after a job is not supported: say so rather than ignore it.
      if (job.find('+') != std::string_view::npos) {
        return InvalidArgumentError("'" + std::string(job.substr(0, 40)) +
                                    "': a delay after a dependency (+minutes) is not supported");
      }
      TESSERA_ASSIGN_OR_RETURN(JobRef ref, ParseJobRef(job));
      if (++jobs > kMaxDependencyJobs) {
        return InvalidArgumentError("a dependency names at most " +
                                    std::to_string(kMaxDependencyJobs) + " jobs");
      }
      dep.jobs.push_back(ref);
    }
    spec.items.push_back(std::move(dep));
  }
  if (spec.items.empty()) {
    return InvalidArgumentError("an empty dependency");
  }
  return spec;
}

std::string DependencySpecText(const DependencySpec& spec) {
  std::string out;
  for (const Dependency& d : spec.items) {
    if (!out.empty()) {
      out += spec.any ? '?' : ',';
    }
    out += DependencyKindName(d.kind);
    for (const JobRef& r : d.jobs) {
      out += ':' + JobRefText(r);
    }
  }
  return out;
}

DependencyState EvaluateDependency(DependencyKind kind,
                                   const std::vector<DependencyTarget>& targets) {
  DependencyState out = DependencyState::kSatisfied;
  for (const DependencyTarget& t : targets) {
    bool met = false;
    bool never = false;
    switch (kind) {
      case DependencyKind::kAfter:
        met = t.started || t.ended;
        break;
      case DependencyKind::kAfterAny:
        met = t.ended;
        break;
      case DependencyKind::kAfterOk:
        met = t.ended && t.succeeded;
        never = t.ended && !t.succeeded;
        break;
      case DependencyKind::kAfterNotOk:
        met = t.ended && !t.succeeded;
        never = t.ended && t.succeeded;
        break;
      case DependencyKind::kSingleton:
        break;
    }
    if (never) {
      return DependencyState::kNever;
    }
    if (!met) {
      out = DependencyState::kWaiting;
    }
  }
  return out;
}

}  // namespace tessera
