#include "server/job_eta.h"

#include <nlohmann/json.hpp>
#include <utility>

#include "base/time_format.h"

namespace tessera {

namespace {

// A job behind a gate: no estimate, and why.
nlohmann::json GatedFields(const EtaTable& table, const std::string& reason) {
  return {{"eta", nullptr},
          {"eta_note", "no estimate until it may start: " + reason},
          {"eta_computed_at", FormatRfc3339(table.computed_at)},
          {"position", nullptr},
          {"queue_position", nullptr},
          {"blocking", {{"kind", "gate"}, {"reason", reason}}}};
}

nlohmann::json EstimateFields(const EtaTable& table, const JobEta& e) {
  nlohmann::json j = nlohmann::json::object();
  if (e.eta) {
    j["eta"] = FormatRfc3339(*e.eta);
  } else {
    j["eta"] = nullptr;
    j["eta_note"] = "no estimate before " + FormatRfc3339(table.horizon_end);
  }
  j["eta_computed_at"] = FormatRfc3339(table.computed_at);
  j["position"] = e.position;
  j["queue_position"] = e.queue_position;
  nlohmann::json b = {{"kind", e.blocking}};
  if (!e.blocking_queue.empty()) {
    b["queue"] = e.blocking_queue;
  }
  if (!e.blocking_model.empty()) {
    b["model"] = e.blocking_model;
  }
  if (e.blocking_job.valid()) {
    b["job"] = e.blocking_job.value();
  }
  j["blocking"] = std::move(b);
  return j;
}

}  // namespace

std::string EtaFieldsJson(const EtaTable* table, JobNumber id) {
  nlohmann::json j = {{"eta", nullptr},
                      {"eta_note", "not estimated yet: waiting for the next ETA refresh"},
                      {"position", nullptr},
                      {"queue_position", nullptr},
                      {"blocking", nullptr}};
  if (table != nullptr) {
    if (auto g = table->gated.find(id.value()); g != table->gated.end()) {
      j = GatedFields(*table, g->second);
    } else if (auto e = table->jobs.find(id.value()); e != table->jobs.end()) {
      j = EstimateFields(*table, e->second);
    }
  }
  std::string out;
  for (const auto& [key, value] : j.items()) {
    out += ',';
    out += nlohmann::json(key).dump();
    out += ':';
    out += value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  return out;
}

}  // namespace tessera
