// EtcdStore: the reads (every one linearizable, large ranges paged at one revision).
#include <algorithm>
#include <limits>
#include <tuple>
#include <utility>

#include "store/etcd/etcd_store.h"
#include "store/etcd/etcd_store_codec.h"

namespace tessera {
namespace {

using etcd_store::Keys;

constexpr int64_t kPage = 1000;  // keys per Range

Status Corrupt(const std::string& key) {
  return InternalError("etcd store: the value of " + key + " cannot be decoded");
}

}  // namespace

Status EtcdStore::Scan(const std::string& begin, const std::string& end,
                       const std::function<bool(const EtcdKeyValue&)>& visit) {
  std::string from = begin;
  int64_t revision = 0;
  for (;;) {
    TESSERA_ASSIGN_OR_RETURN(EtcdRangeResult page, client_->Range(from, end, kPage, revision));
    if (revision == 0) {
      revision = page.revision;  // later pages read the same snapshot
    }
    for (const EtcdKeyValue& kv : page.kvs) {
      if (!visit(kv)) {
        return Status::Ok();
      }
    }
    if (!page.more || page.kvs.empty()) {
      return Status::Ok();
    }
    from = page.kvs.back().key + std::string(1, '\0');
  }
}

StatusOr<std::vector<JobRow>> EtcdStore::LoadJobs() {
  return LoadJobsPage(0, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(),
                      0);
}

StatusOr<std::optional<JobRow>> EtcdStore::LoadJob(uint64_t id) {
  TESSERA_RETURN_IF_ERROR(CheckOpen());
  const Keys keys{options_.prefix};
  TESSERA_ASSIGN_OR_RETURN(std::optional<EtcdKeyValue> kv, client_->Get(keys.Job(id)));
  if (!kv) {
    return std::optional<JobRow>();
  }
  std::optional<JobRow> row = etcd_store::DecodeJob(kv->value);
  if (!row) {
    return Corrupt(kv->key);
  }
  return row;
}

StatusOr<std::vector<JobRow>> EtcdStore::LoadJobsPage(uint64_t after_id, int64_t submit_since_us,
                                                      int64_t submit_until_us, size_t limit) {
  TESSERA_RETURN_IF_ERROR(CheckOpen());
  std::vector<JobRow> out;
  if (after_id == std::numeric_limits<uint64_t>::max()) {
    return out;
  }
  const Keys keys{options_.prefix};
  Status decode;
  TESSERA_RETURN_IF_ERROR(
      Scan(keys.Job(after_id + 1), EtcdClient::PrefixEnd(keys.Jobs()), [&](const EtcdKeyValue& kv) {
        std::optional<JobRow> row = etcd_store::DecodeJob(kv.value);
        if (!row) {
          decode = Corrupt(kv.key);
          return false;
        }
        if (row->submit_us >= submit_since_us && row->submit_us < submit_until_us) {
          out.push_back(std::move(*row));
        }
        return limit == 0 || out.size() < limit;
      }));
  TESSERA_RETURN_IF_ERROR(decode);
  return out;
}

namespace {

struct SeqUsage {
  uint64_t seq;
  UsageRow row;
};

}  // namespace

StatusOr<std::vector<UsageRow>> EtcdStore::LoadUsage(int64_t since_us, int64_t until_us) {
  TESSERA_RETURN_IF_ERROR(CheckOpen());
  const Keys keys{options_.prefix};
  std::vector<SeqUsage> found;
  Status decode;
  TESSERA_RETURN_IF_ERROR(
      Scan(keys.Usages(), EtcdClient::PrefixEnd(keys.Usages()), [&](const EtcdKeyValue& kv) {
        std::optional<UsageRow> row = etcd_store::DecodeUsage(kv.value);
        if (!row) {
          decode = Corrupt(kv.key);
          return false;
        }
        if (row->start_us < until_us && (row->end_us == 0 || row->end_us > since_us)) {
          found.push_back({etcd_store::UsageSeq(kv.key), std::move(*row)});
        }
        return true;
      }));
  TESSERA_RETURN_IF_ERROR(decode);
  std::sort(found.begin(), found.end(), [](const SeqUsage& a, const SeqUsage& b) {
    return std::tie(a.row.start_us, a.seq) < std::tie(b.row.start_us, b.seq);
  });
  std::vector<UsageRow> out;
  out.reserve(found.size());
  for (SeqUsage& u : found) {
    out.push_back(std::move(u.row));
  }
  return out;
}

StatusOr<std::vector<UsageRow>> EtcdStore::LoadUsageOfJobs(uint64_t first_job, uint64_t last_job) {
  TESSERA_RETURN_IF_ERROR(CheckOpen());
  std::vector<UsageRow> out;
  if (first_job > last_job) {
    return out;
  }
  const Keys keys{options_.prefix};
  std::vector<SeqUsage> found;
  Status decode;
  // Keys are by job, then insertion: only the order by start within a job is left to do.
  TESSERA_RETURN_IF_ERROR(Scan(keys.UsageOf(first_job),
                               EtcdClient::PrefixEnd(keys.UsageOf(last_job)),
                               [&](const EtcdKeyValue& kv) {
                                 std::optional<UsageRow> row = etcd_store::DecodeUsage(kv.value);
                                 if (!row) {
                                   decode = Corrupt(kv.key);
                                   return false;
                                 }
                                 found.push_back({etcd_store::UsageSeq(kv.key), std::move(*row)});
                                 return true;
                               }));
  TESSERA_RETURN_IF_ERROR(decode);
  std::stable_sort(found.begin(), found.end(), [](const SeqUsage& a, const SeqUsage& b) {
    return std::tie(a.row.job, a.row.start_us) < std::tie(b.row.job, b.row.start_us);
  });
  out.reserve(found.size());
  for (SeqUsage& u : found) {
    out.push_back(std::move(u.row));
  }
  return out;
}

StatusOr<std::vector<TokenRow>> EtcdStore::LoadTokens() {
  TESSERA_RETURN_IF_ERROR(CheckOpen());
  const Keys keys{options_.prefix};
  std::vector<TokenRow> out;
  Status decode;
  TESSERA_RETURN_IF_ERROR(
      Scan(keys.Tokens(), EtcdClient::PrefixEnd(keys.Tokens()), [&](const EtcdKeyValue& kv) {
        std::optional<TokenRow> row = etcd_store::DecodeToken(kv.value);
        if (!row) {
          decode = Corrupt(kv.key);
          return false;
        }
        out.push_back(std::move(*row));
        return true;
      }));
  TESSERA_RETURN_IF_ERROR(decode);
  return out;
}

StatusOr<std::optional<std::string>> EtcdStore::GetKv(std::string_view key) {
  TESSERA_RETURN_IF_ERROR(CheckOpen());
  const Keys keys{options_.prefix};
  TESSERA_ASSIGN_OR_RETURN(std::optional<EtcdKeyValue> kv, client_->Get(keys.Kv(key)));
  if (!kv) {
    return std::optional<std::string>();
  }
  return std::optional<std::string>(std::move(kv->value));
}

StatusOr<std::vector<std::pair<std::string, std::string>>> EtcdStore::ListKv(
    std::string_view prefix) {
  TESSERA_RETURN_IF_ERROR(CheckOpen());
  const Keys keys{options_.prefix};
  const std::string begin = keys.Kv(prefix);
  const size_t strip = keys.Kvs().size();
  std::vector<std::pair<std::string, std::string>> out;
  TESSERA_RETURN_IF_ERROR(Scan(begin, EtcdClient::PrefixEnd(begin), [&](const EtcdKeyValue& kv) {
    out.emplace_back(kv.key.substr(strip), kv.value);
    return true;
  }));
  return out;
}

}  // namespace tessera
