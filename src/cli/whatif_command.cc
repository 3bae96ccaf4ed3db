#include "cli/whatif_command.h"

#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "api/queue_config.h"
#include "base/time_format.h"
#include "cli/table.h"
#include "sim/whatif.h"

namespace tessera {

int RunWhatIfCommand(const ClientConfig& config, const WhatIfCommandOptions& o,
                     const Clock& clock, std::ostream& out, std::ostream& err) {
  const GpuCatalog& catalog = GpuCatalog::Default();
  if (o.policy.empty() && o.queues_file.empty()) {
    return ReportError(InvalidArgumentError("give --policy, --queues or both"), err);
  }
  if (!o.policy.empty()) {
    if (StatusOr<SchedulerPolicy> p = ParseSchedulerPolicy(o.policy); !p.ok()) {
      return ReportError(InvalidArgumentError("--policy: " + p.status().message()), err);
    }
  }
  const Micros now = clock.NowMicros();
  StatusOr<Micros> since = ParseTimeArgument(o.since, now);
  if (!since.ok()) {
    return ReportError(InvalidArgumentError("--since: " + since.status().message()), err);
  }
  StatusOr<Micros> until = ParseTimeArgument(o.until, now);
  if (!until.ok()) {
    return ReportError(InvalidArgumentError("--until: " + until.status().message()), err);
  }
  if (*until <= *since) {
    return ReportError(InvalidArgumentError("--until is not after --since: the window is empty"),
                       err);
  }
  // The API takes whole seconds: the window is widened to them, so that what happened
  // in the last second is in it.
  *since -= *since % 1'000'000;
  *until += (1'000'000 - *until % 1'000'000) % 1'000'000;
  WhatIfOptions options;
  options.policy = o.policy;
  if (!o.queues_file.empty()) {
    StatusOr<QueueTreeSpec> queues = LoadQueueTreeFile(o.queues_file, catalog);
    if (!queues.ok()) {
      return ReportError(InvalidArgumentError("--queues: " + queues.status().message()), err);
    }
    options.queues = std::move(queues).value();
  }

  StatusOr<std::unique_ptr<ApiClient>> client = ApiClient::Create(config);
  if (!client.ok()) {
    return ReportError(client.status(), err);
  }
  RecordedHistory history;
  uint64_t after = 0;
  do {
    StatusOr<nlohmann::json> page = (*client)->GetJson(
        "/v1/admin/history", {{"since", FormatRfc3339(*since)},
                              {"until", FormatRfc3339(*until)},
                              {"after", std::to_string(after)},
                              {"limit", std::to_string(o.page_size)}});
    if (!page.ok()) {
      return ReportError(page.status(), err);
    }
    StatusOr<uint64_t> next = AddHistoryPage(*page, catalog, &history);
    if (!next.ok()) {
      return ReportError(InternalError("GET /v1/admin/history: " + next.status().message()), err);
    }
    after = *next;
  } while (after != 0);

  StatusOr<WhatIfReport> report = RunWhatIf(history, options, catalog);
  if (!report.ok()) {
    // No job or node in the window, or a policy or queues the history cannot run under:
    // the caller's to change (exit 2).
    const Status& s = report.status();
    return ReportError(s.code() == StatusCode::kFailedPrecondition ||
                               s.code() == StatusCode::kInvalidArgument
                           ? InvalidArgumentError(s.message())
                           : s,
                       err);
  }
  if (o.json) {
    out << WhatIfJson(*report).dump(2) << "\n";
    return 0;
  }
  out << "From " << FormatRfc3339(*since) << " to " << FormatRfc3339(*until) << "\n"
      << WhatIfText(*report);
  return 0;
}

void AddWhatIfCommand(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<ConnectionFlags>();
  auto o = std::make_shared<WhatIfCommandOptions>();
  CLI::App* cmd = app.add_subcommand(
      "whatif", "Replay the cluster's recent history under another policy or queues (admin)");
  cmd->add_option("--policy", o->policy,
                  "the policy to compare with: a preset (tessera, tiresias, fifo, ...) or a "
                  "combination (see `tessera sim jobs --help`)");
  cmd->add_option("--queues", o->queues_file,
                  "a queue configuration (YAML) for the other side; default the cluster's");
  cmd->add_option("--since", o->since, "start: 2026-11-01, RFC 3339, or ago: 24h, 7d")
      ->capture_default_str();
  cmd->add_option("--until", o->until, "end: now, a date, RFC 3339, or ago")
      ->capture_default_str();
  cmd->add_flag("--json", o->json, "the comparison as JSON");
  cmd->add_option("--server", flags->server, kServerFlagHelp);
  cmd->add_option("--token", flags->token,
                  "admin API token (env TESSERA_TOKEN, or a file named by TESSERA_TOKEN_FILE)");
  cmd->add_option("--ca-cert", flags->ca_cert,
                  "PEM file of CA certificates for https:// (env TESSERA_CA_CERT)");
  cmd->add_flag("--insecure", flags->insecure, "skip TLS certificate verification");
  cmd->callback([flags, o, exit_code] {
    StatusOr<ClientConfig> config = ResolveClientConfig(*flags, ProcessEnvironment());
    if (!config.ok()) {
      *exit_code = ReportError(config.status(), std::cerr);
      return;
    }
    *exit_code = RunWhatIfCommand(*config, *o, SystemClock(), std::cout, std::cerr);
  });
}

}  // namespace tessera
