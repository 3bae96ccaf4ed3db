#include "store/store_migrate.h"

#include <limits>
#include <utility>
#include <vector>

namespace tessera {
namespace {

constexpr int64_t kAllTimeFrom = std::numeric_limits<int64_t>::min();
constexpr int64_t kAllTimeTo = std::numeric_limits<int64_t>::max();

// Everything a store holds, as read back for comparison.
struct Snapshot {
  std::vector<JobRow> jobs;
  std::vector<UsageRow> usage;
  std::vector<TokenRow> tokens;
  std::vector<std::pair<std::string, std::string>> kv;
};

StatusOr<Snapshot> ReadAll(Store& store) {
  Snapshot s;
  TESSERA_ASSIGN_OR_RETURN(s.jobs, store.LoadJobs());
  TESSERA_ASSIGN_OR_RETURN(s.usage, store.LoadUsage(kAllTimeFrom, kAllTimeTo));
  TESSERA_ASSIGN_OR_RETURN(s.tokens, store.LoadTokens());
  TESSERA_ASSIGN_OR_RETURN(s.kv, store.ListKv(""));
  return s;
}

template <typename Row>
Status Compare(const std::vector<Row>& want, const std::vector<Row>& got, const char* what) {
  if (want.size() != got.size()) {
    return InternalError(std::string("after the migration the destination has ") +
                         std::to_string(got.size()) + " " + what + " rows, the source " +
                         std::to_string(want.size()));
  }
  for (size_t i = 0; i < want.size(); ++i) {
    if (!(want[i] == got[i])) {
      return InternalError(std::string("after the migration ") + what + " row " +
                           std::to_string(i) + " differs from the source's");
    }
  }
  return Status::Ok();
}

}  // namespace

StatusOr<MigrateCounts> MigrateStore(Store& from, Store& to, const MigrateOptions& options) {
  const size_t batch_rows = options.batch_rows == 0 ? 1 : options.batch_rows;
  TESSERA_ASSIGN_OR_RETURN(Snapshot existing, ReadAll(to));
  if (!existing.jobs.empty() || !existing.usage.empty() || !existing.tokens.empty() ||
      !existing.kv.empty()) {
    return FailedPreconditionError(
        "the destination store is not empty (" + std::to_string(existing.jobs.size()) + " jobs, " +
        std::to_string(existing.usage.size()) + " usage rows, " +
        std::to_string(existing.tokens.size()) + " tokens, " + std::to_string(existing.kv.size()) +
        " kv rows); migrate into an empty one");
  }
  TESSERA_ASSIGN_OR_RETURN(Snapshot source, ReadAll(from));

  MigrateCounts done;
  WriteBatch batch;
  size_t rows = 0;
  auto flush = [&]() -> Status {
    if (rows == 0) {
      return Status::Ok();
    }
    const MigrateCounts in_batch{batch.jobs.size(), batch.usage.size(), batch.tokens.size(),
                                 batch.kv.size()};
    TESSERA_RETURN_IF_ERROR(to.Commit(std::move(batch)));
    batch = WriteBatch();
    rows = 0;
    done.jobs += in_batch.jobs;
    done.usage += in_batch.usage;
    done.tokens += in_batch.tokens;
    done.kv += in_batch.kv;
    if (options.progress) {
      options.progress(done);
    }
    return Status::Ok();
  };
  auto add = [&](auto& list, const auto& row) -> Status {
    list.push_back(row);
    return ++rows >= batch_rows ? flush() : Status::Ok();
  };
  for (const TokenRow& row : source.tokens) {
    TESSERA_RETURN_IF_ERROR(add(batch.tokens, row));
  }
  for (const auto& row : source.kv) {
    TESSERA_RETURN_IF_ERROR(add(batch.kv, row));
  }
  for (const JobRow& row : source.jobs) {
    TESSERA_RETURN_IF_ERROR(add(batch.jobs, row));
  }
  for (const UsageRow& row : source.usage) {
    TESSERA_RETURN_IF_ERROR(add(batch.usage, row));
  }
  TESSERA_RETURN_IF_ERROR(flush());

  TESSERA_ASSIGN_OR_RETURN(Snapshot copied, ReadAll(to));
  TESSERA_RETURN_IF_ERROR(Compare(source.jobs, copied.jobs, "job"));
  TESSERA_RETURN_IF_ERROR(Compare(source.usage, copied.usage, "usage"));
  TESSERA_RETURN_IF_ERROR(Compare(source.tokens, copied.tokens, "token"));
  TESSERA_RETURN_IF_ERROR(Compare(source.kv, copied.kv, "kv"));
  return done;
}

}  // namespace tessera
