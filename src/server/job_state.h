// A job's state as the controller keeps it, and its name in the store and the API
// ("pending", "running", "stopping", "succeeded", "failed", "cancelled").
// Thread safety: values and pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace tessera {

enum class JobState : uint8_t { kPending, kRunning, kStopping, kSucceeded, kFailed, kCancelled };

inline std::string_view JobStateName(JobState s) {
  switch (s) {
    case JobState::kPending:
      return "pending";
    case JobState::kRunning:
      return "running";
    case JobState::kStopping:
      return "stopping";
    case JobState::kSucceeded:
      return "succeeded";
    case JobState::kFailed:
      return "failed";
    case JobState::kCancelled:
      return "cancelled";
  }
  return "?";
}

// nullopt for a name that is none of the above.
inline std::optional<JobState> ParseJobState(std::string_view name) {
  for (JobState s : {JobState::kPending, JobState::kRunning, JobState::kStopping,
                     JobState::kSucceeded, JobState::kFailed, JobState::kCancelled}) {
    if (JobStateName(s) == name) {
      return s;
    }
  }
  return std::nullopt;
}

inline bool Terminal(JobState s) {
  return s == JobState::kSucceeded || s == JobState::kFailed || s == JobState::kCancelled;
}

}  // namespace tessera
