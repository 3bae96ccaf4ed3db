#include "sim/sim_idle.h"

#include <algorithm>
#include <cmath>

namespace tessera {

int UtilisationAt(const std::vector<SimUtilisation>& steps, Micros since) {
  int pct = 100;
  for (const SimUtilisation& s : steps) {
    if (s.after > since) {
      break;
    }
    pct = s.pct;
  }
  return pct;
}

double CardContribution(int pct, int64_t milli) {
  return pct * static_cast<double>(std::min<int64_t>(milli, 1000)) / 1000.0;
}

int CardPercent(double contributions) {
  return static_cast<int>(std::llround(std::min(100.0, contributions)));
}

std::map<std::pair<NodeId, int>, int> CardUtilisation(const std::vector<JobRecord>& jobs,
                                                      const std::vector<SimJob>& specs,
                                                      Micros now) {
  std::map<std::pair<NodeId, int>, double> sum;
  for (size_t id = 0; id < jobs.size(); ++id) {
    const JobRecord& job = jobs[id];
    if (job.phase != JobPhase::kRunning && job.phase != JobPhase::kStopping) {
      continue;
    }
    const int pct = UtilisationAt(specs[id].utilisation, now - job.run_start);
    for (size_t t = 0; t < job.allocations.size() && t < job.attempt.tasks.size(); ++t) {
      if (job.attempt.tasks[t].exited) {
        continue;
      }
      for (const GpuGrant& g : job.allocations[t].gpus) {
        sum[{job.allocations[t].node, g.gpu}] += CardContribution(pct, g.milli.value());
      }
    }
  }
  std::map<std::pair<NodeId, int>, int> out;
  for (const auto& [card, v] : sum) {
    out[card] = CardPercent(v);
  }
  return out;
}

SimIdle::SimIdle(std::map<std::string, IdlePolicy> policies, const std::vector<SimJob>& specs)
    : policies_(std::move(policies)), specs_(specs) {
  enabled_ = Enabled(policies_);
}

bool SimIdle::Enabled(const std::map<std::string, IdlePolicy>& policies) {
  return std::any_of(policies.begin(), policies.end(), [](const auto& p) {
    return p.second.below_pct > 0 && p.second.action != IdleAction::kNotify;
  });
}

const IdlePolicy& SimIdle::PolicyOf(const std::string& queue) const {
  static const IdlePolicy kDefault;
  auto it = policies_.find(queue);
  return it != policies_.end() ? it->second : kDefault;
}

std::vector<std::pair<uint64_t, StopRequest>> SimIdle::Sample(const std::vector<JobRecord>& jobs,
                                                              const std::vector<int>& attempts,
                                                              const QueueTree& tree, Micros now,
                                                              Micros grace) {
  std::vector<std::pair<uint64_t, StopRequest>> stops;
  const std::map<std::pair<NodeId, int>, int> cards = CardUtilisation(jobs, specs_, now);
  for (size_t id = 0; id < jobs.size(); ++id) {
    const JobRecord& job = jobs[id];
    if (job.phase != JobPhase::kRunning) {
      continue;
    }
    double used = 0, held = 0;
    bool measured = true;
    for (const Allocation& a : job.allocations) {
      for (const GpuGrant& g : a.gpus) {
        if (g.is_mig()) {
          measured = false;
          break;
        }
        auto card = cards.find({a.node, g.gpu});
        const int card_pct = card != cards.end() ? card->second : 0;  // nothing live on it
        used += static_cast<double>(g.milli.value()) *
                GrantUtilisation(g.milli.value(), static_cast<double>(card_pct));
        held += static_cast<double>(g.milli.value());
      }
    }
    if (!measured || held <= 0) {
      continue;
    }
    const IdleWatch::Verdict v = watch_.Sample(id, attempts[id], job.run_start, now, used / held,
                                               PolicyOf(tree.spec(job.queue).name), grace);
    if (v.stop) {
      stops.emplace_back(id, *v.stop);
    }
  }
  watch_.Retain([&](uint64_t id) { return jobs[id].phase == JobPhase::kRunning; });
  return stops;
}

}  // namespace tessera
