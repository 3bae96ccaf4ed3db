// Slurm's job arrays and dependencies, as a job file writes them (`array:`,
// `dependency:`) and `#SBATCH --array/--dependency` pass them on.
//
//   array: "0-999%50"      indices 0..999, at most 50 elements running at once
//   array: "1,3,5-7"       a list of indices and ranges
//   array: "0-15:4"        a range with a step: 0, 4, 8, 12
//
//   dependency: "afterok:12:13_2"        after job 12 (or every element of array 12) and
//                                        element 2 of array 13 succeeded
//   dependency: "afterany:12,singleton"  every item must hold (',')
//   dependency: "afternotok:12?after:14" any item may hold ('?')
//
// Kinds: after (the jobs started, or ended without starting), afterany (ended),
// afterok (succeeded), afternotok (failed or cancelled), singleton (no other job of the
// same user and name runs, and none submitted earlier is still to end).
// Indices are 0..kMaxArrayIndex, at most kMaxArrayElements of them, no repeats; they
// keep the order written once sorted. Errors are InvalidArgument naming what is wrong.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace tessera {

inline constexpr int64_t kMaxArrayIndex = 4'000'000;
inline constexpr size_t kMaxArrayElements = 10'000;  // one batch's jobs (job_batch.h)
// An array's text in a job file, written compactly (ArraySpecText), is at most this
// long: it is stored with each element.
inline constexpr size_t kMaxArrayText = 4096;

struct ArraySpec {
  std::vector<int64_t> indices;  // ascending, distinct
  int32_t throttle = 0;          // elements running at once; 0: no limit
  bool operator==(const ArraySpec&) const = default;
};

StatusOr<ArraySpec> ParseArraySpec(std::string_view text);
// Canonical text ("0-999%50", "1,3,5-7"): reads back to an equal spec.
std::string ArraySpecText(const ArraySpec& spec);

// A job as a dependency names it: "12" (a job, or a whole array by its first id) or
// "12_3" (element 3 of array 12).
struct JobRef {
  uint64_t id = 0;
  int64_t index = -1;  // >= 0: the array element with this index
  bool operator==(const JobRef&) const = default;
};
StatusOr<JobRef> ParseJobRef(std::string_view text);
std::string JobRefText(const JobRef& ref);

enum class DependencyKind : uint8_t { kAfter, kAfterAny, kAfterOk, kAfterNotOk, kSingleton };
std::string_view DependencyKindName(DependencyKind kind);

struct Dependency {
  DependencyKind kind = DependencyKind::kAfterOk;
  std::vector<JobRef> jobs;  // empty for singleton
  bool operator==(const Dependency&) const = default;
};

struct DependencySpec {
  std::vector<Dependency> items;
  bool any = false;  // '?': one item that holds is enough
  bool operator==(const DependencySpec&) const = default;
};

inline constexpr size_t kMaxDependencyJobs = 1000;

StatusOr<DependencySpec> ParseDependencySpec(std::string_view text);
std::string DependencySpecText(const DependencySpec& spec);

// How one dependency item stands, given how its jobs stand.
enum class DependencyState : uint8_t { kWaiting, kSatisfied, kNever };

// What a dependency needs to know of one job it names.
struct DependencyTarget {
  bool started = false;  // an attempt started (or it is running now)
  bool ended = false;
  bool succeeded = false;  // ended with success
};

// The state of `kind` over `targets` (not for singleton): satisfied when every target
// meets it, never when one cannot any more.
DependencyState EvaluateDependency(DependencyKind kind, const std::vector<DependencyTarget>& targets);

}  // namespace tessera
