#include "server/scheduler_memory.h"

#include <iostream>
#include <optional>
#include <string>
#include <utility>

namespace tessera {
namespace scheduler_memory {

nlohmann::json UsageJson(const QueueUsage::Saved& saved) {
  nlohmann::json queues = nlohmann::json::object();
  for (const auto& [name, usage] : saved.decayed) {
    queues[name] = usage;
  }
  // The user level (policy feature fair-users): [queue, user, decayed] per user.
  nlohmann::json users = nlohmann::json::array();
  for (const QueueUsage::SavedUser& u : saved.users) {
    users.push_back({u.queue, u.user, u.decayed});
  }
  return {{"at_us", saved.at},
          {"decayed_milli_gpu_seconds", std::move(queues)},
          {"users", std::move(users)}};
}

StatusOr<QueueUsage::Saved> UsageFromJson(const nlohmann::json& j) {
  QueueUsage::Saved saved;
  if (!j.is_object() || !j.contains("at_us") || !j["at_us"].is_number_integer() ||
      !j.contains("decayed_milli_gpu_seconds") || !j["decayed_milli_gpu_seconds"].is_object()) {
    return InvalidArgumentError("stored fair-share usage is malformed");
  }
  saved.at = j["at_us"].get<Micros>();
  for (const auto& [name, v] : j["decayed_milli_gpu_seconds"].items()) {
    if (!v.is_number() || v.get<double>() < 0) {
      return InvalidArgumentError("stored fair-share usage of queue '" + name + "' is malformed");
    }
    saved.decayed.emplace_back(name, v.get<double>());
  }
  // Absent in what controllers before the user level wrote.
  if (const auto users = j.find("users"); users != j.end()) {
    if (!users->is_array()) {
      return InvalidArgumentError("stored fair-share usage of users is malformed");
    }
    for (const nlohmann::json& u : *users) {
      if (!u.is_array() || u.size() != 3 || !u[0].is_string() || !u[1].is_string() ||
          !u[2].is_number() || u[2].get<double>() < 0) {
        return InvalidArgumentError("stored fair-share usage of a user is malformed");
      }
      saved.users.push_back({u[0].get<std::string>(), u[1].get<std::string>(), u[2].get<double>()});
    }
  }
  return saved;
}

nlohmann::json PredictorJson(const RuntimePredictor::State& state) {
  nlohmann::json histograms = nlohmann::json::array();
  for (const RuntimePredictor::State::Histogram& h : state.histograms) {
    nlohmann::json bins = nlohmann::json::array();
    for (const auto& [bin, weight] : h.bins) {
      bins.push_back({bin, weight});
    }
    histograms.push_back(
        {{"key", h.key}, {"epoch", h.epoch}, {"total", h.total}, {"bins", std::move(bins)}});
  }
  return {{"observations", state.observations}, {"histograms", std::move(histograms)}};
}

StatusOr<RuntimePredictor::State> PredictorFromJson(const nlohmann::json& j) {
  RuntimePredictor::State state;
  const Status bad = InvalidArgumentError("stored runtime predictor is malformed");
  if (!j.is_object() || !j.contains("observations") || !j["observations"].is_number_integer() ||
      !j.contains("histograms") || !j["histograms"].is_array()) {
    return bad;
  }
  state.observations = j["observations"].get<int64_t>();
  for (const nlohmann::json& h : j["histograms"]) {
    if (!h.is_object() || !h.contains("key") || !h["key"].is_string() || !h.contains("epoch") ||
        !h["epoch"].is_number_integer() || !h.contains("total") || !h["total"].is_number() ||
        !h.contains("bins") || !h["bins"].is_array()) {
      return bad;
    }
    RuntimePredictor::State::Histogram out;
    out.key = h["key"].get<std::string>();
    out.epoch = h["epoch"].get<int64_t>();
    out.total = h["total"].get<double>();
    for (const nlohmann::json& b : h["bins"]) {
      if (!b.is_array() || b.size() != 2 || !b[0].is_number_integer() || !b[1].is_number()) {
        return bad;
      }
      out.bins.emplace_back(b[0].get<int>(), b[1].get<double>());
    }
    state.histograms.push_back(std::move(out));
  }
  return state;
}

nlohmann::json WorkloadJson(const WorkloadLearner::Saved& saved) {
  nlohmann::json shapes = nlohmann::json::array();
  for (const WorkloadLearner::Shape& s : saved.shapes) {
    shapes.push_back({s.cpu, s.gpu_milli, s.gpu_count, s.models, s.weight, s.memory_weighted});
  }
  return {{"observed", saved.observed},
          {"shapes_cpu_milli_gpus_models_weight_memory", std::move(shapes)}};
}

StatusOr<WorkloadLearner::Saved> WorkloadFromJson(const nlohmann::json& j) {
  const Status bad = InvalidArgumentError("stored workload model is malformed");
  const char* key = "shapes_cpu_milli_gpus_models_weight_memory";
  if (!j.is_object() || !j.contains("observed") || !j["observed"].is_number_integer() ||
      !j.contains(key) || !j[key].is_array()) {
    return bad;
  }
  WorkloadLearner::Saved saved;
  saved.observed = j["observed"].get<int64_t>();
  for (const nlohmann::json& s : j[key]) {
    if (!s.is_array() || s.size() != 6 || !s[0].is_number_integer() || !s[1].is_number_integer() ||
        !s[2].is_number_integer() || !s[3].is_number_unsigned() || !s[4].is_number() ||
        !s[5].is_number()) {
      return bad;
    }
    saved.shapes.push_back(WorkloadLearner::Shape{s[0].get<int64_t>(), s[1].get<int64_t>(),
                                                  s[2].get<int32_t>(), s[3].get<uint64_t>(),
                                                  s[4].get<double>(), s[5].get<double>()});
  }
  return saved;
}

}  // namespace scheduler_memory

namespace {

// A stored value that cannot be read is reported and ignored (see the header).
std::optional<nlohmann::json> ReadJson(Store& store, const char* key) {
  StatusOr<std::optional<std::string>> text = store.GetKv(key);
  if (!text.ok() || !text->has_value()) {
    return std::nullopt;
  }
  nlohmann::json j = nlohmann::json::parse(**text, nullptr, false);
  if (j.is_discarded()) {
    std::cerr << "tessera server: stored " << key << " is not JSON; starting without it\n";
    return std::nullopt;
  }
  return j;
}

}  // namespace

void SchedulerMemory::Load(Store& store, CoreSession& core, Micros now) {
  if (std::optional<nlohmann::json> j = ReadJson(store, kFairShareKey)) {
    StatusOr<QueueUsage::Saved> saved = scheduler_memory::UsageFromJson(*j);
    if (saved.ok()) {
      core.carried_usage() = std::move(saved).value();
    } else {
      std::cerr << "tessera server: " << saved.status().message() << "; starting without it\n";
    }
  }
  if (std::optional<nlohmann::json> j = ReadJson(store, kPredictorKey)) {
    StatusOr<RuntimePredictor::State> state = scheduler_memory::PredictorFromJson(*j);
    Status s = state.ok() ? core.predictor().Restore(*state) : state.status();
    if (!s.ok()) {
      std::cerr << "tessera server: " << s.message() << "; starting without it\n";
    }
  }
  if (std::optional<nlohmann::json> j = ReadJson(store, kWorkloadKey)) {
    StatusOr<WorkloadLearner::Saved> saved = scheduler_memory::WorkloadFromJson(*j);
    Status s = saved.ok() ? core.learner().Restore(*saved) : saved.status();
    if (s.ok()) {
      core.learner().Refresh();  // the first scheduler places with it
    } else {
      std::cerr << "tessera server: " << s.message() << "; starting without it\n";
    }
  }
  // What was just read is what the store holds: not written again until it changes.
  saved_at_ = now;
  predictor_observations_ = core.predictor().observations();
  workload_observed_ = core.learner().observed();
}

void SchedulerMemory::Save(Micros now, CoreSession& core, WriteBatch& batch) {
  if (now - saved_at_ < interval_) {
    return;
  }
  saved_at_ = now;
  core.CarryUsage(now);
  if (core.carried_usage()) {
    batch.kv.emplace_back(kFairShareKey, scheduler_memory::UsageJson(*core.carried_usage()).dump());
  }
  if (core.predictor().observations() != predictor_observations_) {
    predictor_observations_ = core.predictor().observations();
    batch.kv.emplace_back(kPredictorKey,
                          scheduler_memory::PredictorJson(core.predictor().Save()).dump());
  }
  if (core.learner().observed() != workload_observed_) {
    workload_observed_ = core.learner().observed();
    batch.kv.emplace_back(kWorkloadKey,
                          scheduler_memory::WorkloadJson(core.learner().Save()).dump());
  }
}

nlohmann::json FairShareJson(const CoreSession& core, QueueId q) {
  if (core.scheduler() == nullptr || core.rebuild_pending() || !core.tree().is_queue(q)) {
    return nullptr;
  }
  const QueueUsage& usage = core.scheduler()->usage();
  return {{"decayed_gpu_hours", usage.decayed_gpu_seconds(q) / 1000.0 / 3600.0},
          {"factor", usage.FairShareFactor(q)}};
}

}  // namespace tessera
