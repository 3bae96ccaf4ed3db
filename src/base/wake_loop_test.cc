// WakeLoop on its own: cycles on Wake and on the interval, Start once, Stop idempotent
// and joining the cycle under way. Every wait is bounded (kPatience); no test sleeps to
// assert that something did not happen.
#include "base/wake_loop.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace tessera {
namespace wake_loop_test {

constexpr auto kPatience = std::chrono::seconds(20);
constexpr Micros kHour = 3'600'000'000;  // an interval no test waits out

// Counts the cycles run; lets a test wait (bounded) for a count.
class Cycles {
 public:
  void Ran() {
    {
      MutexLock lock(mu_);
      ++count_;
    }
    cv_.NotifyAll();
  }
  int count() {
    MutexLock lock(mu_);
    return count_;
  }
  // True once at least `n` cycles ran; false after kPatience.
  bool AtLeast(int n) {
    MutexLock lock(mu_);
    return cv_.WaitFor(mu_, kPatience, [this, n]() REQUIRES(mu_) { return count_ >= n; });
  }

 private:
  Mutex mu_;
  CondVar cv_;
  int count_ GUARDED_BY(mu_) = 0;
};

TEST(WakeLoopTest, WakeRunsACycleWithoutWaitingOutTheInterval) {
  Cycles cycles;
  WakeLoop loop;
  ASSERT_TRUE(loop.Start([&] { cycles.Ran(); }, kHour));
  loop.Wake();
  EXPECT_TRUE(cycles.AtLeast(1));
  loop.Wake();
  EXPECT_TRUE(cycles.AtLeast(2));
  loop.Stop();
}

TEST(WakeLoopTest, CyclesRunEveryIntervalUnwoken) {
  Cycles cycles;
  WakeLoop loop;
  ASSERT_TRUE(loop.Start([&] { cycles.Ran(); }, 1'000));
  EXPECT_TRUE(cycles.AtLeast(3));
  loop.Stop();
}

TEST(WakeLoopTest, AWakeBeforeStartRunsTheFirstCycleAtOnce) {
  Cycles cycles;
  WakeLoop loop;
  loop.Wake();
  ASSERT_TRUE(loop.Start([&] { cycles.Ran(); }, kHour));
  EXPECT_TRUE(cycles.AtLeast(1));
}

// A cycle runs without the loop's lock: it may wake the loop itself (the controller's
// cycles do, through a service's step).
TEST(WakeLoopTest, ACycleMayWakeTheLoop) {
  Cycles cycles;
  WakeLoop loop;
  ASSERT_TRUE(loop.Start(
      [&] {
        if (cycles.count() == 0) {
          loop.Wake();
        }
        cycles.Ran();
      },
      kHour));
  loop.Wake();
  EXPECT_TRUE(cycles.AtLeast(2));
  loop.Stop();
}

TEST(WakeLoopTest, StartsOnceAndAgainAfterStop) {
  Cycles first, second;
  WakeLoop loop;
  loop.Stop();  // not running: nothing to do
  ASSERT_TRUE(loop.Start([&] { first.Ran(); }, kHour));
  EXPECT_FALSE(loop.Start([&] { second.Ran(); }, kHour));  // running: unchanged
  loop.Wake();
  EXPECT_TRUE(first.AtLeast(1));
  loop.Stop();
  loop.Stop();  // idempotent
  ASSERT_TRUE(loop.Start([&] { second.Ran(); }, kHour));
  loop.Wake();
  EXPECT_TRUE(second.AtLeast(1));
  loop.Stop();
  EXPECT_EQ(first.count(), 1);
}

// Stop returns only once the cycle under way has ended, and no cycle runs after it.
TEST(WakeLoopTest, StopJoinsTheCycleUnderWay) {
  Cycles entered;
  Mutex mu;
  CondVar cv;
  bool release = false, finished = false;
  WakeLoop loop;
  ASSERT_TRUE(loop.Start(
      [&] {
        entered.Ran();
        MutexLock lock(mu);
        cv.WaitFor(mu, kPatience, [&]() REQUIRES(mu) { return release; });
        finished = true;
      },
      kHour));
  loop.Wake();
  ASSERT_TRUE(entered.AtLeast(1));
  bool stopped = false, finished_at_stop = false;
  std::thread stopper([&] {
    loop.Stop();
    {
      MutexLock lock(mu);
      stopped = true;
      finished_at_stop = finished;
    }
    cv.NotifyAll();
  });
  {
    // Gives a Stop that does not wait for the cycle the time to return (a right one
    // passes however long this waits), then lets the cycle end.
    MutexLock lock(mu);
    cv.WaitFor(mu, std::chrono::milliseconds(100), [&]() REQUIRES(mu) { return stopped; });
    release = true;
  }
  cv.NotifyAll();
  stopper.join();
  EXPECT_TRUE(finished_at_stop);
  loop.Wake();  // stopped: no cycle
  EXPECT_EQ(entered.count(), 1);
}

}  // namespace wake_loop_test
}  // namespace tessera
