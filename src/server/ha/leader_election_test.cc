// LeaderElection against an in-memory backend with real lease expiry (1 s leases, so
// these tests take a few seconds in all).
#include "server/ha/leader_election.h"
#include "server/ha/testing/fake_election_backend.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace tessera {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

// One controller's election and the events it saw.
struct Candidate {
  Candidate(FakeElectionBackend& backend, const Clock& clock, const std::string& url) {
    LeaderElectionOptions options;
    options.identity = url;
    options.lease_ttl_s = 1;
    options.poll_ms = 20;
    election = std::make_unique<LeaderElection>(backend, clock, options,
                                                [this](const ElectionEvent& e) {
                                                  std::lock_guard<std::mutex> lock(mu);
                                                  events.push_back(e);
                                                });
  }
  std::vector<ElectionEvent> Events() {
    std::lock_guard<std::mutex> lock(mu);
    return events;
  }
  std::mutex mu;
  std::vector<ElectionEvent> events;
  std::unique_ptr<LeaderElection> election;
};

// Polls `done` every 5 ms for at most `limit`; the time it took.
template <typename F>
milliseconds WaitFor(F done, milliseconds limit = milliseconds(5000)) {
  const auto start = steady_clock::now();
  while (!done() && steady_clock::now() - start < limit) {
    std::this_thread::sleep_for(milliseconds(5));
  }
  return std::chrono::duration_cast<milliseconds>(steady_clock::now() - start);
}

int Leaders(const std::vector<Candidate*>& cs) {
  int n = 0;
  for (Candidate* c : cs) n += c->election->leading() ? 1 : 0;
  return n;
}

TEST(LeaderElectionTest, OneLeadsTheOthersKnowItAndTheFenceIsTheKeysRevision) {
  SystemClock clock;
  FakeElectionBackend backend(clock);
  Candidate a(backend, clock, "http://a"), b(backend, clock, "http://b"), c(backend, clock, "http://c");
  std::vector<Candidate*> all = {&a, &b, &c};
  for (Candidate* x : all) x->election->Start();
  WaitFor([&] { return Leaders(all) == 1; });
  // Stays one for a few renewals (1 s lease, renewed every 333 ms).
  for (int i = 0; i < 30; ++i) {
    ASSERT_EQ(Leaders(all), 1);
    std::this_thread::sleep_for(milliseconds(50));
  }
  const std::optional<LeaderRecord> holder = backend.Holder("/tessera/leader");
  ASSERT_TRUE(holder.has_value());
  for (Candidate* x : all) {
    EXPECT_EQ(x->election->leader(), holder->value);
    if (x->election->leading()) {
      ASSERT_EQ(x->Events().size(), 1u);
      EXPECT_EQ(x->Events()[0].kind, ElectionEvent::Kind::kElected);
      EXPECT_EQ(x->Events()[0].fence_revision, holder->create_revision);
    } else {
      EXPECT_TRUE(x->Events().empty());
    }
  }
}

TEST(LeaderElectionTest, AResigningLeaderIsReplacedAtOnceACrashedOneAfterItsLease) {
  SystemClock clock;
  FakeElectionBackend backend(clock);
  Candidate a(backend, clock, "http://a");
  a.election->Start();
  WaitFor([&] { return a.election->leading(); });
  ASSERT_TRUE(a.election->leading());
  Candidate b(backend, clock, "http://b");
  b.election->Start();
  WaitFor([&] { return b.election->leader() == "http://a"; });
  a.election->Stop(/*resign=*/true);
  const milliseconds resigned = WaitFor([&] { return b.election->leading(); });
  EXPECT_TRUE(b.election->leading());
  EXPECT_LT(resigned.count(), 500) << "a resigned leader's key is freed at once";
  ASSERT_EQ(a.Events().size(), 2u);
  EXPECT_EQ(a.Events()[1].kind, ElectionEvent::Kind::kLost);

  Candidate c(backend, clock, "http://c");
  c.election->Start();
  WaitFor([&] { return c.election->leader() == "http://b"; });
  const auto crash = steady_clock::now();
  b.election->Stop(/*resign=*/false);  // a crash: the lease is left to expire
  WaitFor([&] { return c.election->leading(); });
  const auto took = std::chrono::duration_cast<milliseconds>(steady_clock::now() - crash);
  EXPECT_TRUE(c.election->leading());
  EXPECT_GE(took.count(), 500) << "taken over before the crashed leader's lease could expire";
  EXPECT_LT(took.count(), 2000);
}

TEST(LeaderElectionTest, ALeaderCutOffFromTheStoreStepsDownBeforeItsLeaseEnds) {
  SystemClock clock;
  FakeElectionBackend backend(clock);
  Candidate a(backend, clock, "http://a");
  a.election->Start();
  WaitFor([&] { return a.election->leading(); });
  ASSERT_TRUE(a.election->leading());
  backend.SetDown(true);
  const auto cut = steady_clock::now();
  WaitFor([&] { return !a.election->leading(); });
  const auto took = std::chrono::duration_cast<milliseconds>(steady_clock::now() - cut);
  EXPECT_FALSE(a.election->leading());
  EXPECT_LE(took.count(), 1100) << "it must stop leading by its lease's end";
  ASSERT_EQ(a.Events().size(), 2u);
  EXPECT_EQ(a.Events()[1].kind, ElectionEvent::Kind::kLost);
  EXPECT_NE(a.Events()[1].why.find("renew"), std::string::npos) << a.Events()[1].why;
  EXPECT_EQ(a.election->leader(), "");
  WaitFor([&] { return !a.election->last_error().empty(); });
  EXPECT_NE(a.election->last_error().find("no quorum"), std::string::npos);
  // The store comes back: it leads again, in a new term with a new fence.
  backend.SetDown(false);
  WaitFor([&] { return a.election->leading(); });
  EXPECT_TRUE(a.election->leading());
  ASSERT_EQ(a.Events().size(), 3u);
  EXPECT_GT(a.Events()[2].fence_revision, a.Events()[0].fence_revision);
  EXPECT_EQ(a.election->terms(), 2u);
}

TEST(LeaderElectionTest, StepDownHandsTheLeadOverAndEventsAlternate) {
  SystemClock clock;
  FakeElectionBackend backend(clock);
  Candidate a(backend, clock, "http://a"), b(backend, clock, "http://b");
  std::vector<Candidate*> all = {&a, &b};
  a.election->Start();
  WaitFor([&] { return a.election->leading(); });
  b.election->Start();
  for (int round = 0; round < 4; ++round) {
    Candidate* leader = a.election->leading() ? &a : &b;
    Candidate* other = leader == &a ? &b : &a;
    WaitFor([&] { return other->election->leader() == leader->election->leader(); });
    leader->election->StepDown("fenced");
    WaitFor([&] { return other->election->leading(); });
    ASSERT_TRUE(other->election->leading()) << "round " << round;
    ASSERT_FALSE(leader->election->leading());
    EXPECT_EQ(leader->Events().back().why, "fenced");
  }
  EXPECT_LE(Leaders(all), 1);
  for (Candidate* x : all) {
    const std::vector<ElectionEvent> events = x->Events();
    for (size_t i = 0; i < events.size(); ++i) {
      EXPECT_EQ(events[i].kind, i % 2 == 0 ? ElectionEvent::Kind::kElected : ElectionEvent::Kind::kLost);
    }
  }
}

}  // namespace
}  // namespace tessera
