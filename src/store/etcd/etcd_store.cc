// EtcdStore: opening, group commit and fencing (reads: etcd_store_read.cc). See etcd_store.h.
#include "store/etcd/etcd_store.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <random>
#include <set>
#include <utility>

#include "store/etcd/etcd_store_codec.h"

namespace tessera {
namespace {

using Clock = std::chrono::steady_clock;
using etcd_store::Keys;

constexpr int kMaxAttempts = 20;    // per group: marker conflicts and lost answers
constexpr size_t kOpOverhead = 16;  // bytes of framing counted per operation

// Unavailable, as a client should take it: this controller cannot write, the leader can
// (the API answers 503 and clients go on to the next controller).
Status FencedError() {
  return UnavailableError("fenced: this controller is no longer the leader");
}

// The writes of one batch or one Txn: the last value per key (nullopt: delete).
struct Writes {
  std::map<std::string, std::optional<std::string>> ops;
  size_t bytes = 0;

  void Set(std::string key, std::optional<std::string> value) {
    bytes += key.size() + (value ? value->size() : 0) + kOpOverhead;
    ops.insert_or_assign(std::move(key), std::move(value));
  }
  void Merge(Writes&& other) {
    for (auto& [key, value] : other.ops) {
      Set(key, std::move(value));
    }
  }
};

// The group's batches applied in order in memory, from the rows read for them, to find
// each batch's idempotency conflicts and its writes.
class Simulation {
 public:
  using TenantKey = std::pair<std::string, std::string>;

  // owner: the job id of each idempotency key read; job_key: each job read's key ("" none).
  Simulation(const Keys& keys, std::map<TenantKey, uint64_t> owner,
             std::map<uint64_t, TenantKey> job_key, uint64_t next_seq)
      : keys_(keys), owner_(std::move(owner)), job_key_(std::move(job_key)), next_seq_(next_seq) {}

  // Applies one batch: its writes, or AlreadyExists (and no change) on a conflict.
  Status Apply(const WriteBatch& batch, Writes* writes) {
    undo_owner_.clear();
    undo_job_.clear();
    seq_before_ = next_seq_;
    for (const JobRow& job : batch.jobs) {
      TenantKey now{job.tenant, job.idempotency_key};
      if (!job.idempotency_key.empty()) {
        auto found = owner_.find(now);
        if (found != owner_.end() && found->second != job.id) {
          Status conflict =
              AlreadyExistsError("job " + std::to_string(job.id) + ": tenant '" + job.tenant +
                                 "' already has job " + std::to_string(found->second) +
                                 " with idempotency key '" + job.idempotency_key + "'");
          Undo();
          return conflict;
        }
      }
      TenantKey before;
      if (auto it = job_key_.find(job.id); it != job_key_.end()) {
        before = it->second;
      }
      if (before != now || job.idempotency_key.empty()) {
        if (!before.second.empty()) {
          SetOwner(before, std::nullopt);
          writes->Set(keys_.Idempotency(before.first, before.second), std::nullopt);
        }
        if (!now.second.empty()) {
          SetOwner(now, job.id);
          writes->Set(keys_.Idempotency(now.first, now.second), std::to_string(job.id));
        }
      }
      undo_job_.emplace_back(job.id, job_key_.count(job.id) > 0
                                         ? std::optional<TenantKey>(job_key_[job.id])
                                         : std::nullopt);
      job_key_[job.id] = job.idempotency_key.empty() ? TenantKey{} : now;
      writes->Set(keys_.Job(job.id), etcd_store::EncodeJob(job));
    }
    for (const UsageRow& usage : batch.usage) {
      writes->Set(keys_.Usage(usage.job, next_seq_++), etcd_store::EncodeUsage(usage));
    }
    for (const TokenRow& token : batch.tokens) {
      writes->Set(keys_.Token(token.hash), etcd_store::EncodeToken(token));
    }
    for (const auto& [key, value] : batch.kv) {
      writes->Set(keys_.Kv(key), value);
    }
    return Status::Ok();
  }

  // Takes back the last Apply.
  void Undo() {
    while (!undo_owner_.empty()) {
      auto& [key, value] = undo_owner_.back();
      if (value) {
        owner_[key] = *value;
      } else {
        owner_.erase(key);
      }
      undo_owner_.pop_back();
    }
    while (!undo_job_.empty()) {
      auto& [id, value] = undo_job_.back();
      if (value) {
        job_key_[id] = *value;
      } else {
        job_key_.erase(id);
      }
      undo_job_.pop_back();
    }
    next_seq_ = seq_before_;
  }

  uint64_t next_seq() const { return next_seq_; }

 private:
  void SetOwner(const TenantKey& key, std::optional<uint64_t> id) {
    auto found = owner_.find(key);
    undo_owner_.emplace_back(
        key, found == owner_.end() ? std::nullopt : std::optional<uint64_t>(found->second));
    if (id) {
      owner_[key] = *id;
    } else if (found != owner_.end()) {
      owner_.erase(found);
    }
  }

  const Keys& keys_;
  std::map<TenantKey, uint64_t> owner_;
  std::map<uint64_t, TenantKey> job_key_;
  uint64_t next_seq_;
  uint64_t seq_before_ = 0;
  std::vector<std::pair<TenantKey, std::optional<uint64_t>>> undo_owner_;
  std::vector<std::pair<uint64_t, std::optional<TenantKey>>> undo_job_;
};

}  // namespace

struct EtcdStore::Pending {
  const WriteBatch* batch = nullptr;
  Status status;
  bool done = false;  // guarded by EtcdStore::mu_
  std::condition_variable cv;
};

EtcdStore::EtcdStore(EtcdStoreOptions options, std::shared_ptr<EtcdClient> client)
    : options_(std::move(options)), client_(std::move(client)) {
  std::random_device random;
  nonce_base_ = std::to_string(random()) + "-" + std::to_string(random()) + "-";
}

EtcdStore::~EtcdStore() { static_cast<void>(Close()); }

StatusOr<std::unique_ptr<EtcdStore>> EtcdStore::Open(EtcdStoreOptions options) {
  if (options.prefix.empty()) {
    return InvalidArgumentError("etcd store: the key prefix must not be empty");
  }
  if (options.max_txn_ops < 2) {
    return InvalidArgumentError("etcd store: max_txn_ops must be at least 2");
  }
  EtcdClientOptions client_options;
  client_options.endpoints = options.endpoints;
  client_options.ca_file = options.ca_file;
  client_options.cert_file = options.cert_file;
  client_options.key_file = options.key_file;
  client_options.user = options.user;
  client_options.password = options.password;
  client_options.deadline_ms = options.deadline_ms;
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<EtcdClient> client,
                           EtcdClient::Create(std::move(client_options)));
  std::unique_ptr<EtcdStore> store(
      new EtcdStore(std::move(options), std::shared_ptr<EtcdClient>(std::move(client))));
  std::string nonce;
  TESSERA_RETURN_IF_ERROR(store->ReadMarker({}, &nonce));
  store->committer_ = std::thread([s = store.get()] { s->CommitterLoop(); });
  return store;
}

Status EtcdStore::ReadMarker(EtcdClient::Deadline deadline, std::string* nonce) {
  const Keys keys{options_.prefix};
  TESSERA_ASSIGN_OR_RETURN(std::optional<EtcdKeyValue> kv, client_->Get(keys.Marker(), deadline));
  marker_rev_ = 0;
  next_usage_seq_ = 1;
  nonce->clear();
  if (kv) {
    std::optional<etcd_store::Marker> marker = etcd_store::DecodeMarker(kv->value);
    if (!marker) {
      return FailedPreconditionError("etcd store: " + keys.Marker() +
                                     " is not a Tessera commit marker");
    }
    marker_rev_ = kv->mod_revision;
    next_usage_seq_ = marker->next_usage_seq;
    *nonce = marker->nonce;
  }
  marker_known_ = true;
  return Status::Ok();
}

Status EtcdStore::Commit(WriteBatch batch) {
  TESSERA_RETURN_IF_ERROR(ValidateBatch(batch));
  Pending pending;
  pending.batch = &batch;
  std::unique_lock<std::mutex> lock(mu_);
  if (closing_) {
    return FailedPreconditionError("store is closed");
  }
  if (batch.empty()) {
    return Status::Ok();
  }
  queue_.push_back(&pending);
  work_cv_.notify_one();
  pending.cv.wait(lock, [&pending] { return pending.done; });
  return pending.status;
}

void EtcdStore::CommitterLoop() {
  std::vector<Pending*> group;
  for (;;) {
    group.clear();
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [this] { return closing_ || !queue_.empty(); });
      if (queue_.empty()) {
        return;  // closing, and everything submitted is written
      }
      group.assign(queue_.begin(), queue_.end());
      queue_.clear();
    }
    WriteGroup(group);
    std::lock_guard<std::mutex> lock(mu_);
    for (Pending* pending : group) {
      pending->done = true;
      pending->cv.notify_one();
    }
  }
}

void EtcdStore::SetFence(std::string key, int64_t create_revision) {
  std::lock_guard<std::mutex> lock(mu_);
  fence_key_ = std::move(key);
  fence_rev_ = create_revision;
  fenced_ = false;
}

void EtcdStore::ClearFence() {
  std::lock_guard<std::mutex> lock(mu_);
  fence_key_.clear();
  fence_rev_ = 0;
  fenced_ = false;
}

void EtcdStore::WriteGroup(const std::vector<Pending*>& group) {
  const Keys keys{options_.prefix};
  const auto deadline = Clock::now() + std::chrono::milliseconds(options_.deadline_ms);
  std::string fence_key;
  int64_t fence_rev = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!fence_key_.empty() && fenced_) {
      for (Pending* p : group) {
        p->status = FencedError();
      }
      return;
    }
    fence_key = fence_key_;
    fence_rev = fence_rev_;
  }
  const bool fenced_group = !fence_key.empty();

  // Txns whose answer was lost, by nonce: the batches they carried and their outcomes.
  struct Lost {
    std::vector<std::pair<Pending*, Status>> results;
    uint64_t next_seq = 1;
    int64_t base_rev = 0;  // the marker revision the Txn was conditioned on
  };
  std::map<std::string, Lost> lost;
  std::deque<Pending*> remaining(group.begin(), group.end());
  Status last_error = UnavailableError("etcd store: commit not attempted");

  // Settles the batches of a lost Txn that turned out applied.
  auto settle = [&](const std::string& nonce, int64_t rev) {
    auto it = lost.find(nonce);
    if (it == lost.end()) {
      // Those conditioned on another revision can no longer apply.
      for (auto l = lost.begin(); l != lost.end();) {
        l = l->second.base_rev != rev ? lost.erase(l) : std::next(l);
      }
      return;
    }
    for (auto& [p, status] : it->second.results) {
      p->status = status;
      remaining.erase(std::find(remaining.begin(), remaining.end(), p));
    }
    txns_.fetch_add(1, std::memory_order_relaxed);
    lost.clear();
  };

  for (int attempt = 0; attempt < kMaxAttempts && !remaining.empty(); ++attempt) {
    if (Clock::now() >= deadline) {
      break;
    }
    if (!marker_known_) {
      std::string nonce;
      Status read = ReadMarker(deadline, &nonce);
      if (!read.ok()) {
        last_error = read;
        if (read.code() != StatusCode::kUnavailable) {
          break;
        }
        continue;
      }
      settle(nonce, marker_rev_);
      if (remaining.empty()) {
        break;
      }
    }
    // What the simulation needs: the rows of the jobs written and the owners of their keys.
    std::set<uint64_t> ids;
    std::set<Simulation::TenantKey> idem_set;
    for (Pending* p : remaining) {
      for (const JobRow& job : p->batch->jobs) {
        ids.insert(job.id);
        if (!job.idempotency_key.empty()) {
          idem_set.emplace(job.tenant, job.idempotency_key);
        }
      }
    }
    const std::vector<Simulation::TenantKey> idem(idem_set.begin(), idem_set.end());
    std::vector<EtcdOp> reads;
    for (uint64_t id : ids) {
      reads.push_back(EtcdOp::Get(keys.Job(id)));
    }
    for (const auto& [tenant, key] : idem) {
      reads.push_back(EtcdOp::Get(keys.Idempotency(tenant, key)));
    }
    std::map<Simulation::TenantKey, uint64_t> owner;
    std::map<uint64_t, Simulation::TenantKey> job_key;
    Status read_status;
    for (size_t begin = 0; begin < reads.size() && read_status.ok();
         begin += options_.max_txn_ops) {
      const size_t end = std::min(reads.size(), begin + options_.max_txn_ops);
      std::vector<EtcdOp> chunk(reads.begin() + static_cast<std::ptrdiff_t>(begin),
                                reads.begin() + static_cast<std::ptrdiff_t>(end));
      auto answer = client_->Txn({}, chunk, {}, deadline);
      if (!answer.ok()) {
        read_status = answer.status();
        break;
      }
      for (size_t i = 0; i < answer->responses.size() && begin + i < ids.size() + idem.size();
           ++i) {
        if (answer->responses[i].kvs.empty()) {
          continue;
        }
        const EtcdKeyValue& kv = answer->responses[i].kvs[0];
        if (begin + i < ids.size()) {
          if (auto row = etcd_store::DecodeJob(kv.value)) {
            job_key[row->id] = row->idempotency_key.empty()
                                   ? Simulation::TenantKey{}
                                   : Simulation::TenantKey{row->tenant, row->idempotency_key};
          }
        } else {
          owner[idem[begin + i - ids.size()]] = std::strtoull(kv.value.c_str(), nullptr, 10);
        }
      }
    }
    if (!read_status.ok()) {
      last_error = read_status;
      if (read_status.code() != StatusCode::kUnavailable) {
        break;
      }
      continue;
    }

    // Apply in order; write a Txn whenever the next batch would not fit in it.
    Simulation sim(keys, std::move(owner), std::move(job_key), next_usage_seq_);
    Writes txn;
    std::vector<std::pair<Pending*, Status>> results;  // the batches of `txn`
    bool again = false;                                // build the group again from a fresh marker
    bool stop = false;  // the group is finished (fenced, or a hard error)
    auto flush = [&]() {
      if (results.empty()) {
        return;
      }
      if (txn.ops.empty()) {  // every batch failed alone: nothing to write
        for (auto& [p, status] : results) {
          p->status = status;
          remaining.erase(std::find(remaining.begin(), remaining.end(), p));
        }
        results.clear();
        return;
      }
      const std::string nonce = nonce_base_ + std::to_string(++nonce_counter_);
      std::vector<EtcdCompare> compares;
      std::vector<EtcdOp> success, failure;
      if (fenced_group) {
        compares.push_back(EtcdCompare::CreateRevision(fence_key, fence_rev));
        failure.push_back(EtcdOp::Get(fence_key));
      }
      compares.push_back(EtcdCompare::ModRevision(keys.Marker(), marker_rev_));
      failure.push_back(EtcdOp::Get(keys.Marker()));
      for (auto& [key, value] : txn.ops) {
        success.push_back(value ? EtcdOp::Put(key, std::move(*value)) : EtcdOp::Delete(key));
      }
      success.push_back(
          EtcdOp::Put(keys.Marker(), etcd_store::EncodeMarker({nonce, sim.next_seq()})));
      auto answer = client_->Txn(compares, success, failure, deadline);
      txn = Writes{};
      if (!answer.ok()) {
        last_error = answer.status();
        if (EtcdOutcomeUnknown(answer.status())) {
          lost[nonce] = Lost{results, sim.next_seq(), marker_rev_};
          marker_known_ = false;
          again = true;
        } else if (answer.status().code() == StatusCode::kUnavailable) {
          again = true;  // not sent: build it again
        } else {
          for (auto& [p, status] : results) {
            p->status = answer.status();
            remaining.erase(std::find(remaining.begin(), remaining.end(), p));
          }
          again = true;  // the later batches were built on this Txn's writes
        }
        results.clear();
        return;
      }
      if (answer->succeeded) {
        txns_.fetch_add(1, std::memory_order_relaxed);
        marker_rev_ = answer->revision;
        next_usage_seq_ = sim.next_seq();
        lost.clear();  // conditioned on an older marker: they can no longer apply
        for (auto& [p, status] : results) {
          p->status = status;
          remaining.erase(std::find(remaining.begin(), remaining.end(), p));
        }
        results.clear();
        return;
      }
      results.clear();
      size_t r = 0;
      if (fenced_group) {
        const auto& fence = answer->responses[r++].kvs;
        if (fence.empty() || fence[0].create_revision != fence_rev) {
          last_error = FencedError();
          stop = true;
          return;
        }
      }
      // The marker moved: another writer, or a lost Txn of ours applied after all.
      const auto& marker = answer->responses[r].kvs;
      marker_rev_ = marker.empty() ? 0 : marker[0].mod_revision;
      std::optional<etcd_store::Marker> decoded =
          marker.empty() ? std::nullopt : etcd_store::DecodeMarker(marker[0].value);
      next_usage_seq_ = decoded ? decoded->next_usage_seq : 1;
      settle(decoded ? decoded->nonce : "", marker_rev_);
      last_error =
          UnavailableError("etcd store: commit gave up after " + std::to_string(kMaxAttempts) +
                           " tries: another writer kept moving the commit marker");
      again = true;
    };

    const std::vector<Pending*> order(remaining.begin(), remaining.end());
    for (Pending* p : order) {
      if (again || stop) {
        break;
      }
      Writes writes;
      Status status = sim.Apply(*p->batch, &writes);
      if (!status.ok()) {
        writes = Writes{};  // a conflict: nothing of the batch
      } else if (writes.ops.size() + 1 > options_.max_txn_ops ||
                 writes.bytes > options_.max_txn_bytes) {
        sim.Undo();
        status = InvalidArgumentError(
            "etcd store: a batch of " + std::to_string(writes.ops.size() + 1) + " operations (" +
            std::to_string(writes.bytes) +
            " bytes) does not fit in one etcd transaction (at most " +
            std::to_string(options_.max_txn_ops) + " operations, etcd's --max-txn-ops, and " +
            std::to_string(options_.max_txn_bytes) +
            " bytes, under --max-request-bytes); run etcd with --max-txn-ops 10000 "
            "--max-request-bytes 33554432 and raise the store's max_txn_ops and max_txn_bytes");
        writes = Writes{};
      }
      if (!writes.ops.empty() && (txn.ops.size() + writes.ops.size() + 1 > options_.max_txn_ops ||
                                  txn.bytes + writes.bytes > options_.max_txn_bytes)) {
        flush();  // this batch was simulated after the Txn's batches: it goes in the next one
        if (again || stop) {
          break;
        }
      }
      txn.Merge(std::move(writes));
      results.emplace_back(p, std::move(status));
    }
    if (!again && !stop) {
      flush();
    }
    if (stop) {
      break;
    }
  }

  const bool fenced = last_error.code() == FencedError().code() &&
                      last_error.message() == FencedError().message();
  if (fenced) {
    bool call = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (fence_key_ == fence_key && fence_rev_ == fence_rev && !fenced_) {
        fenced_ = true;
        call = true;
      }
    }
    if (call && options_.on_fenced) {
      options_.on_fenced();
    }
  }
  for (Pending* p : remaining) {
    if (fenced) {
      p->status = FencedError();
      continue;
    }
    bool maybe = false;
    for (const auto& [nonce, l] : lost) {
      for (const auto& [q, status] : l.results) {
        maybe = maybe || q == p;
      }
    }
    p->status = Status(
        last_error.ok() ? StatusCode::kUnavailable : last_error.code(),
        last_error.message() + (maybe ? " (the batch may or may not have been applied)" : ""));
    marker_known_ = false;
  }
}

Status EtcdStore::CheckOpen() const {
  if (closed_.load(std::memory_order_acquire)) {
    return FailedPreconditionError("store is closed");
  }
  return Status::Ok();
}

Status EtcdStore::Close() {
  std::lock_guard<std::mutex> close_lock(close_mu_);
  if (closed_.exchange(true)) {
    return Status::Ok();
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    closing_ = true;
  }
  work_cv_.notify_all();
  if (committer_.joinable()) {
    committer_.join();
  }
  return Status::Ok();
}

StatusOr<std::unique_ptr<Store>> OpenEtcdStore(EtcdStoreOptions options) {
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<EtcdStore> store, EtcdStore::Open(std::move(options)));
  return std::unique_ptr<Store>(std::move(store));
}

}  // namespace tessera
