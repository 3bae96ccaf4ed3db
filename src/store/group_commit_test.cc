#include "store/group_commit.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace tessera {
namespace {

using Groups = std::vector<std::vector<std::string>>;

WriteBatch Batch(const std::string& key) {
  WriteBatch batch;
  batch.kv = {{key, "v"}};
  return batch;
}

// A WriteGroupFn for tests: records each group's keys (kv[0]) in order, can hold the first
// group until released, fails the batches whose key starts with "bad" alone
// (AlreadyExists naming the key), and returns `group_error` for the groups it names.
class Writer {
 public:
  GroupCommit::WriteGroupFn Fn() {
    return [this](std::span<GroupCommit::Write* const> group) { return Write(group); };
  }

  void HoldFirstGroup() { hold_ = true; }
  void WaitUntilHolding() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return holding_; });
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    released_ = true;
    cv_.notify_all();
  }
  // Group number `index` (from 0) fails as a whole with `error`.
  void FailGroup(size_t index, Status error) {
    std::lock_guard<std::mutex> lock(mu_);
    fail_index_ = index;
    fail_error_ = std::move(error);
  }
  Groups groups() const {
    std::lock_guard<std::mutex> lock(mu_);
    return groups_;
  }
  // Whether `key` was in a group the WriteGroupFn has written.
  bool written(const std::string& key) const {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& group : groups_) {
      for (const auto& k : group) {
        if (k == key) {
          return true;
        }
      }
    }
    return false;
  }
  int max_inside() const { return max_inside_.load(); }

 private:
  Status Write(std::span<GroupCommit::Write* const> group) {
    const int inside = inside_.fetch_add(1) + 1;
    int seen = max_inside_.load();
    while (inside > seen && !max_inside_.compare_exchange_weak(seen, inside)) {
    }
    std::vector<std::string> keys;
    for (GroupCommit::Write* write : group) {
      const std::string& key = write->batch->kv.at(0).first;
      keys.push_back(key);
      if (key.rfind("bad", 0) == 0) {
        write->status = AlreadyExistsError("refused " + key);
      }
    }
    std::unique_lock<std::mutex> lock(mu_);
    if (hold_ && groups_.empty()) {
      holding_ = true;
      cv_.notify_all();
      cv_.wait(lock, [this] { return released_; });
    }
    const size_t index = groups_.size();
    groups_.push_back(std::move(keys));
    inside_.fetch_sub(1);
    return index == fail_index_ ? fail_error_ : Status::Ok();
  }

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool hold_ = false, holding_ = false, released_ = false;
  size_t fail_index_ = static_cast<size_t>(-1);
  Status fail_error_;
  Groups groups_;
  std::atomic<int> inside_{0}, max_inside_{0};
};

// Commits `key` on a thread of its own; the future has its result.
std::future<Status> CommitAsync(GroupCommit& gc, const std::string& key) {
  return std::async(std::launch::async, [&gc, key] { return gc.Commit(Batch(key)); });
}

// Waits until `n` writes wait in the queue (so that the next ones queue behind them).
void WaitQueued(const GroupCommit& gc, size_t n) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (gc.queued() != n && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(gc.queued(), n);
}

// Holds the first group ("first") and queues `keys` behind it one by one, in order.
std::vector<std::future<Status>> QueueBehindAHeldGroup(GroupCommit& gc, Writer& writer,
                                                       std::future<Status>* first,
                                                       const std::vector<std::string>& keys) {
  *first = CommitAsync(gc, "first");
  writer.WaitUntilHolding();
  std::vector<std::future<Status>> results;
  for (size_t i = 0; i < keys.size(); ++i) {
    results.push_back(CommitAsync(gc, keys[i]));
    WaitQueued(gc, i + 1);
  }
  return results;
}

TEST(GroupCommitTest, WritesQueuedDuringACommitAreTheNextGroupInQueueOrder) {
  Writer writer;
  writer.HoldFirstGroup();
  GroupCommit gc(writer.Fn(), {});
  std::future<Status> first;
  auto later = QueueBehindAHeldGroup(gc, writer, &first, {"b", "c", "d"});
  // Nothing is acknowledged while its group is being written.
  EXPECT_EQ(first.wait_for(std::chrono::milliseconds(50)), std::future_status::timeout);
  EXPECT_EQ(later[0].wait_for(std::chrono::milliseconds(0)), std::future_status::timeout);
  writer.Release();
  EXPECT_TRUE(first.get().ok());
  EXPECT_TRUE(writer.written("first"));
  for (auto& result : later) {
    EXPECT_TRUE(result.get().ok());
  }
  EXPECT_EQ(writer.groups(), (Groups{{"first"}, {"b", "c", "d"}}));
  EXPECT_EQ(gc.queued(), 0u);
}

TEST(GroupCommitTest, EachCallerGetsItsOwnResult) {
  Writer writer;
  writer.HoldFirstGroup();
  GroupCommit gc(writer.Fn(), {});
  std::future<Status> first;
  auto later = QueueBehindAHeldGroup(gc, writer, &first, {"ok1", "bad2", "ok3", "bad4"});
  writer.Release();
  EXPECT_TRUE(first.get().ok());
  EXPECT_TRUE(later[0].get().ok());
  Status bad2 = later[1].get();
  EXPECT_EQ(bad2.code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(bad2.message(), "refused bad2");
  EXPECT_TRUE(later[2].get().ok());
  Status bad4 = later[3].get();
  EXPECT_EQ(bad4.code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(bad4.message(), "refused bad4");
  EXPECT_EQ(writer.groups(), (Groups{{"first"}, {"ok1", "bad2", "ok3", "bad4"}}));
}

TEST(GroupCommitTest, AFailedCommitFailsEveryWriteOfItsGroupAndOnlyThatGroup) {
  Writer writer;
  writer.HoldFirstGroup();
  writer.FailGroup(1, UnavailableError("disk gone"));
  GroupCommit gc(writer.Fn(), {});
  std::future<Status> first;
  auto later = QueueBehindAHeldGroup(gc, writer, &first, {"p", "bad-q", "r"});
  writer.Release();
  EXPECT_TRUE(first.get().ok());
  Status p = later[0].get();
  EXPECT_EQ(p.code(), StatusCode::kUnavailable);
  EXPECT_EQ(p.message(), "disk gone");
  // A batch that failed alone keeps its own error.
  Status q = later[1].get();
  EXPECT_EQ(q.code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(q.message(), "refused bad-q");
  Status r = later[2].get();
  EXPECT_EQ(r.code(), StatusCode::kUnavailable);
  EXPECT_EQ(r.message(), "disk gone");
  // The next group is written on its own.
  EXPECT_TRUE(gc.Commit(Batch("s")).ok());
  EXPECT_EQ(writer.groups(), (Groups{{"first"}, {"p", "bad-q", "r"}, {"s"}}));
}

TEST(GroupCommitTest, MaxGroupCutsTheQueueIntoGroupsInOrder) {
  Writer writer;
  writer.HoldFirstGroup();
  GroupCommit::Options options;
  options.max_group = 2;
  GroupCommit gc(writer.Fn(), options);
  std::future<Status> first;
  auto later = QueueBehindAHeldGroup(gc, writer, &first, {"b", "c", "d", "e", "f"});
  writer.Release();
  EXPECT_TRUE(first.get().ok());
  for (auto& result : later) {
    EXPECT_TRUE(result.get().ok());
  }
  EXPECT_EQ(writer.groups(), (Groups{{"first"}, {"b", "c"}, {"d", "e"}, {"f"}}));
}

TEST(GroupCommitTest, AMaxGroupOfZeroIsOne) {
  Writer writer;
  writer.HoldFirstGroup();
  GroupCommit::Options options;
  options.max_group = 0;
  GroupCommit gc(writer.Fn(), options);
  std::future<Status> first;
  auto later = QueueBehindAHeldGroup(gc, writer, &first, {"b", "c"});
  writer.Release();
  EXPECT_TRUE(first.get().ok());
  EXPECT_TRUE(later[0].get().ok());
  EXPECT_TRUE(later[1].get().ok());
  EXPECT_EQ(writer.groups(), (Groups{{"first"}, {"b"}, {"c"}}));
}

TEST(GroupCommitTest, AnEmptyBatchIsOkWithoutAWrite) {
  Writer writer;
  GroupCommit gc(writer.Fn(), {});
  EXPECT_TRUE(gc.Commit(WriteBatch{}).ok());
  EXPECT_TRUE(gc.Commit(Batch("a")).ok());
  EXPECT_EQ(writer.groups(), (Groups{{"a"}}));
}

TEST(GroupCommitTest, StopWritesWhatIsQueuedThenRefusesEveryCommit) {
  Writer writer;
  writer.HoldFirstGroup();
  GroupCommit gc(writer.Fn(), {});
  std::future<Status> first;
  auto later = QueueBehindAHeldGroup(gc, writer, &first, {"b", "c"});
  std::thread stopper([&gc] { gc.Stop(); });
  // An empty batch is refused (rather than answered OK at once) once Stop has begun.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (gc.Commit(WriteBatch{}).ok() && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  Status late = gc.Commit(Batch("late"));
  EXPECT_EQ(late.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(late.message(), "store is closed");
  writer.Release();
  stopper.join();
  EXPECT_TRUE(first.get().ok());
  EXPECT_TRUE(later[0].get().ok());
  EXPECT_TRUE(later[1].get().ok());
  EXPECT_EQ(writer.groups(), (Groups{{"first"}, {"b", "c"}}));
  gc.Stop();  // again: nothing to do
  EXPECT_EQ(gc.Commit(Batch("after")).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(writer.groups().size(), 2u);
}

TEST(GroupCommitTest, ManyCallersEachGetTheirOwnResultFromOneWriterAtATime) {
  Writer writer;
  GroupCommit gc(writer.Fn(), {});
  constexpr int kThreads = 8;
  constexpr int kPerThread = 200;
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const std::string key =
            (i % 3 == 0 ? "bad-" : "ok-") + std::to_string(t) + "-" + std::to_string(i);
        Status status = gc.Commit(Batch(key));
        const bool right = i % 3 == 0 ? status.message() == "refused " + key : status.ok();
        if (!right || !writer.written(key)) {
          wrong.fetch_add(1);
        }
      }
    });
  }
  for (std::thread& thread : threads) {
    thread.join();
  }
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(writer.max_inside(), 1);
  // Every write once, each thread's in the order it committed them.
  std::vector<int> next(kThreads, 0);
  size_t total = 0;
  for (const auto& group : writer.groups()) {
    for (const std::string& key : group) {
      const size_t dash = key.find('-');
      const size_t dash2 = key.find('-', dash + 1);
      const int t = std::stoi(key.substr(dash + 1, dash2 - dash - 1));
      const int i = std::stoi(key.substr(dash2 + 1));
      EXPECT_EQ(i, next[static_cast<size_t>(t)]) << key;
      next[static_cast<size_t>(t)] = i + 1;
      ++total;
    }
  }
  EXPECT_EQ(total, static_cast<size_t>(kThreads * kPerThread));
}

}  // namespace
}  // namespace tessera
