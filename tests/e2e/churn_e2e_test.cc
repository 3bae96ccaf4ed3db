// Preemption churn on a real `tessera server` and `tessera agent`: 500 mixed jobs (whole
// GPUs, 2-task gangs, MIG instances, GPU shares; three priorities; two tenants that
// borrow from each other) arrive in waves while earlier ones run and are preempted.
// Once it settles, every job has ended, none was left `stopping` (an attempt stopped as
// it was being launched once stayed there for good, holding its GPU, and its preemptor
// waited forever) and none was preempted over and over (a victim restarted into the
// resources freed for its preemptor was once preempted again 14 times in a second).
// Every wait is bounded; the processes are stopped by the test.
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>

#include "e2e/cluster_fixture.h"
#include "e2e/process.h"

namespace tessera::e2e {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

class ChurnTest : public ServerAndAgentsTest {
 protected:
  std::string Prefix() const override { return "churn"; }

  // Job `i` of the churn: its shape and priority from a seeded generator.
  static json ChurnJob(int i, std::mt19937& rng) {
    const int shape = static_cast<int>(rng() % 10);
    const int priorities[] = {0, 5, 10};
    const int ms = 50 + static_cast<int>(rng() % 350);  // short: more arrivals per run
    json job = {{"name", "churn-" + std::to_string(i)},
                {"queue", rng() % 2 == 0 ? "team-a" : "team-b"},
                {"priority", priorities[rng() % 3]},
                {"command", {"/bin/sh", "-c", "sleep " + std::to_string(ms / 1000.0)}}};
    if (shape < 4) {
      job["resources"] = {{"gpus", 1}, {"gpu_model", "H100-80GB"}};
    } else if (shape < 6) {
      job["replicas"] = 2;
      job["resources"] = {{"gpus", 1}, {"gpu_model", "H100-80GB"}};
    } else if (shape < 8) {
      job["resources"] = {{"mig", "1g.10gb"}, {"gpu_model", "A100-80GB"}};
    } else {
      job["resources"] = {{"gpus", 1}, {"gpu_fraction", 0.25}, {"gpu_memory", "10GiB"},
                          {"gpu_model", "A100-80GB"}};
    }
    return job;
  }

  // Submits 500 jobs in 10 waves of 50 (as the admin, into both tenants' queues), then
  // waits up to 240 s for every one to end. Returns the jobs as listed at the end.
  json Churn(uint32_t seed) {
    std::mt19937 rng(seed);
    httplib::Client c("127.0.0.1", port_);
    c.set_bearer_token_auth(admin_);
    c.set_read_timeout(30, 0);
    for (int wave = 0; wave < 10; ++wave) {
      json batch = {{"jobs", json::array()}};
      for (int k = 0; k < 50; ++k) {
        batch["jobs"].push_back(ChurnJob(wave * 50 + k, rng));
      }
      httplib::Result r = c.Post("/v1/jobs/batch", batch.dump(), "application/json");
      EXPECT_TRUE(r && r->status == 201) << (r ? r->body : "no answer");
      std::this_thread::sleep_for(300ms);
    }
    json jobs;
    const auto deadline = std::chrono::steady_clock::now() + 240s;
    while (std::chrono::steady_clock::now() < deadline) {
      jobs = Get("/v1/jobs?limit=1000").value("jobs", json::array());
      size_t open = 0;
      for (const json& j : jobs) {
        const std::string state = j.value("state", "");
        open += state == "pending" || state == "running" || state == "stopping" ? 1 : 0;
      }
      if (jobs.size() >= 500 && open == 0) {
        break;
      }
      std::this_thread::sleep_for(500ms);
    }
    return jobs;
  }
};

TEST_F(ChurnTest, FiveHundredMixedJobsSettleWithNoneStoppingAndNoPreemptionLoop) {
  StartAgent("n1", "4xH100-80GB,1xA100-80GB:mig,1xA100-80GB:shared");
  const json jobs = Churn(35);
  ASSERT_EQ(jobs.size(), 500u);
  std::map<std::string, int> states;
  int preemptions = 0;
  int most = 0;
  std::string stuck;
  for (const json& j : jobs) {
    const std::string state = j.value("state", "");
    ++states[state];
    const int p = j.value("preemptions", 0);
    preemptions += p;
    most = std::max(most, p);
    if (state != "succeeded" && stuck.size() < 2000) {
      stuck += j.dump() + "\n";
    }
  }
  std::cout << "churn: " << states["succeeded"] << " succeeded, " << preemptions
            << " preemptions, at most " << most << " of one job\n";
  EXPECT_EQ(states["succeeded"], 500) << "not every job ended well:\n" << stuck;
  EXPECT_EQ(states["stopping"], 0) << stuck;
  EXPECT_EQ(states["pending"], 0) << stuck;
  // Three priorities and two borrowing tenants preempt some jobs a few times; a victim
  // restarted into the resources freed for its preemptor is preempted again and again.
  EXPECT_LE(most, 20) << "a job was preempted " << most << " times";
}

}  // namespace
}  // namespace tessera::e2e
