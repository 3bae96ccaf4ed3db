#include "store/store.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

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

StatusOr<std::vector<JobRow>> Store::LoadJobsPage(uint64_t after_id, int64_t submit_since_us,
                                                  int64_t submit_until_us, size_t limit) {
  TESSERA_ASSIGN_OR_RETURN(std::vector<JobRow> all, LoadJobs());
  std::vector<JobRow> out;
  for (JobRow& row : all) {
    if (limit > 0 && out.size() == limit) {
      break;
    }
    if (row.id > after_id && row.submit_us >= submit_since_us && row.submit_us < submit_until_us) {
      out.push_back(std::move(row));
    }
  }
  return out;
}

StatusOr<std::vector<UsageRow>> Store::LoadUsageOfJobs(uint64_t first_job, uint64_t last_job) {
  TESSERA_ASSIGN_OR_RETURN(
      std::vector<UsageRow> all,
      LoadUsage(std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()));
  std::vector<UsageRow> out;
  for (UsageRow& row : all) {  // by start_us, then insertion
    if (row.job >= first_job && row.job <= last_job) {
      out.push_back(std::move(row));
    }
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const UsageRow& a, const UsageRow& b) { return a.job < b.job; });
  return out;
}

}  // namespace tessera
