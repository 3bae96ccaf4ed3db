#include "cli/queues_import_command.h"

#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include "api/kueue_import.h"
#include "api/queue_config.h"

namespace tessera {
namespace {

StatusOr<std::string> ReadText(const std::string& file) {
  std::ostringstream text;
  if (file == "-") {
    text << std::cin.rdbuf();
    return text.str();
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    return InvalidArgumentError("cannot read '" + file + "'");
  }
  text << in.rdbuf();
  return text.str();
}

std::string Counts(const QueueTreeSpec& spec) {
  size_t queues = 0;
  size_t cohorts = 0;
  for (const QueueNodeSpec& n : spec.nodes) {
    ++(n.cohort ? cohorts : queues);
  }
  return std::to_string(queues) + (queues == 1 ? " queue, " : " queues, ") +
         std::to_string(cohorts) + (cohorts == 1 ? " cohort" : " cohorts");
}

}  // namespace

int RunQueuesImport(const ClientConfig* config, const QueuesImportOptions& o, std::ostream& out,
                    std::ostream& err) {
  if (o.file.empty()) {
    return ReportError(InvalidArgumentError("give the Kueue YAML file ('-': stdin)"), err);
  }
  StatusOr<std::string> text = ReadText(o.file);
  if (!text.ok()) {
    return ReportError(text.status(), err);
  }
  const GpuCatalog& catalog = GpuCatalog::Default();
  StatusOr<KueueImport> imported = ImportKueueYaml(
      *text, catalog, KueueImportOptions{.lenient = o.lenient}, o.file == "-" ? "stdin" : o.file);
  if (!imported.ok()) {
    const int code = ReportError(imported.status(), err);
    if (!o.lenient) {
      err << "tessera: --lenient imports the rest and warns about such fields\n";
    }
    return code;
  }
  for (const std::string& w : imported->warnings) {
    err << "tessera: warning: " << w << "\n";
  }
  const std::string yaml = "# Imported from Kueue objects by `tessera queues import`.\n" +
                           QueueTreeYaml(imported->spec, catalog);
  if (!o.out_file.empty()) {
    std::ofstream file(o.out_file, std::ios::binary | std::ios::trunc);
    file << yaml;
    file.close();
    if (!file) {
      return ReportError(InvalidArgumentError("cannot write '" + o.out_file + "'"), err);
    }
    out << "wrote " << o.out_file << " (" << Counts(imported->spec) << ")\n";
  }
  if (o.apply) {
    if (config == nullptr) {
      return ReportError(InternalError("--apply without a connection"), err);
    }
    StatusOr<std::unique_ptr<ApiClient>> client = ApiClient::Create(*config);
    if (!client.ok()) {
      return ReportError(client.status(), err);
    }
    StatusOr<ApiResponse> response = (*client)->Put("/v1/queues", yaml, "application/yaml");
    if (!response.ok()) {
      return ReportError(response.status(), err);
    }
    out << "queue configuration replaced (" << Counts(imported->spec) << ")\n";
  }
  if (o.out_file.empty() && !o.apply) {
    out << yaml;
  }
  return 0;
}

}  // namespace tessera
