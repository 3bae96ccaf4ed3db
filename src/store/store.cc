#include "store/store.h"

#include <algorithm>

namespace tessera {

bool WriteBatch::empty() const {
  return jobs.empty() && usage.empty() && tokens.empty() && kv.empty();
}

bool IsValidJobState(std::string_view state) {
  return std::find(kJobStates.begin(), kJobStates.end(), state) != kJobStates.end();
}

Status ValidateBatch(const WriteBatch& batch) {
  for (const JobRow& job : batch.jobs) {
    if (job.id == 0) {
      return InvalidArgumentError("job row with id 0");
    }
    if (!IsValidJobState(job.state)) {
      return InvalidArgumentError("job " + std::to_string(job.id) + ": unknown state '" +
                                  job.state + "'");
    }
  }
  for (const UsageRow& usage : batch.usage) {
    if (usage.job == 0) {
      return InvalidArgumentError("usage row with job 0");
    }
    if (usage.end_us != 0 && usage.end_us < usage.start_us) {
      return InvalidArgumentError("usage row of job " + std::to_string(usage.job) +
                                  " ends before it starts");
    }
  }
  for (const TokenRow& token : batch.tokens) {
    if (token.hash.empty()) {
      return InvalidArgumentError("token row with an empty hash");
    }
  }
  for (const auto& [key, value] : batch.kv) {
    if (key.empty()) {
      return InvalidArgumentError("kv row with an empty key");
    }
  }
  return Status::Ok();
}

}  // namespace tessera
