#include "cli/sbatch_command.h"

#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api/job_keys.h"
#include "base/strings.h"
#include "model/gpu_catalog.h"

extern char** environ;  // NOLINT(readability-redundant-declaration): POSIX declares it nowhere

namespace tessera {
namespace {

using nlohmann::json;

std::map<std::string, std::string> ProcessEnvironmentMap() {
  std::map<std::string, std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string kv = *e;
    const size_t eq = kv.find('=');
    if (eq != std::string::npos && eq > 0) {
      env.emplace(kv.substr(0, eq), kv.substr(eq + 1));
    }
  }
  return env;
}

StatusOr<std::string> ReadScript(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return InvalidArgumentError("cannot read '" + path + "'");
  }
  // One byte past the limit says it is over, without reading a large file whole.
  std::string text(kMaxBatchScriptBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad()) {
    return InvalidArgumentError("cannot read '" + path + "'");
  }
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxBatchScriptBytes) {
    return InvalidArgumentError("'" + path + "' is over " + std::to_string(kMaxBatchScriptBytes) +
                                " bytes; " + BatchScriptLimit());
  }
  return text;
}

// The flags' document over the script's: resources and env key by key, the rest whole.
void Overlay(const json& overrides, json* spec) {
  for (const auto& [key, value] : overrides.items()) {
    if ((key == job_keys::kResources || key == job_keys::kEnv) && spec->contains(key) &&
        value.is_object()) {
      for (const auto& [k, v] : value.items()) {
        (*spec)[key][k] = v;
      }
    } else {
      (*spec)[key] = value;
    }
  }
}

// -A/--account against the token's tenant. A controller that cannot say is warned about.
Status CheckAccount(ApiClient& client, const std::string& account, std::ostream& err) {
  StatusOr<json> me = client.GetJson("/v1/whoami");
  if (!me.ok()) {
    if (me.status().code() == StatusCode::kNotFound) {
      err << "tessera: warning: --account=" << account
          << " not checked: the controller does not say which tenant a token is\n";
      return Status::Ok();
    }
    return me.status();
  }
  const json* tenant = me->is_object() && me->contains("tenant") ? &(*me)["tenant"] : nullptr;
  if (tenant == nullptr || !tenant->is_string() || *tenant != account) {
    return InvalidArgumentError("--account=" + account + ": this token's tenant is '" +
                                (tenant != nullptr && tenant->is_string()
                                     ? tenant->get<std::string>()
                                     : std::string()) +
                                "'; jobs run as their token's tenant");
  }
  return Status::Ok();
}

}  // namespace

bool IsBatchScriptFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return false;
  }
  std::string head(64 * 1024, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<size_t>(in.gcount()));
  return LooksLikeBatchScript(head);
}

StatusOr<json> SubmitFlagOverrides(const SubmitOptions& options) {
  SubmitOptions o = options;
  o.command = {"-"};
  o.submit_dir.clear();
  TESSERA_ASSIGN_OR_RETURN(JobDraft draft, JobDraftFromFlags(o));
  draft.command.clear();
  if (draft.env && draft.env->empty()) {
    draft.env.reset();  // no --env: the script's --export stands
  }
  return JobDraftToJson(draft);
}

int RunBatchSubmit(const ClientConfig& config, const BatchSubmitOptions& o, std::ostream& out,
                   std::ostream& err) {
  if (!o.output.empty() && o.output != "json") {
    return ReportError(InvalidArgumentError("-o must be json (got '" + o.output + "')"), err);
  }
  StatusOr<SlurmJob> job = TranslateSlurmJob(o.input, GpuCatalog::Default());
  if (!job.ok()) {
    return ReportError(job.status(), err);
  }
  for (const std::string& w : job->warnings) {
    err << "tessera: warning: " << w << "\n";
  }
  if (o.overrides.is_object()) {
    Overlay(o.overrides, &job->spec);
  }
  StatusOr<std::unique_ptr<ApiClient>> client = ApiClient::Create(config);
  if (!client.ok()) {
    return ReportError(client.status(), err);
  }
  if (!job->account.empty()) {
    if (Status s = CheckAccount(**client, job->account, err); !s.ok()) {
      return ReportError(s, err);
    }
  }
  const ExtraHeaders headers{
      {"Idempotency-Key", o.idempotency_key.empty() ? NewIdempotencyKey() : o.idempotency_key}};
  StatusOr<ApiResponse> response =
      (*client)->Post("/v1/jobs", job->spec.dump(-1, ' ', false, json::error_handler_t::replace),
                      "application/json", headers);
  if (!response.ok()) {
    return ReportError(response.status(), err);
  }
  StatusOr<json> answer = ParseJsonBody(response->body, "POST /v1/jobs");
  if (!answer.ok()) {
    return ReportError(answer.status(), err);
  }
  if (o.output == "json") {
    out << answer->dump(2) << "\n";
    return 0;
  }
  if (!answer->contains("id") || !(*answer)["id"].is_number_integer()) {
    return ReportError(InternalError("the controller's answer to POST /v1/jobs has no job id"), err);
  }
  const int64_t id = (*answer)["id"].get<int64_t>();
  if (o.sbatch_style && !o.parsable) {
    out << "Submitted batch job " << id << "\n";
  } else {
    out << id << "\n";
  }
  return 0;
}

void AddSbatchCommand(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<std::vector<std::string>>();
  CLI::App* cmd = app.add_subcommand(
      "sbatch", "Submit a Slurm batch script (#SBATCH lines; sbatch's options; docs/slurm.md)");
  // sbatch's options are read by the translator, not CLI11, so that they keep Slurm's
  // forms (-N2, --time 1:00:00, --gres=gpu:a100:2) and its messages.
  cmd->set_help_flag();
  cmd->prefix_command();
  cmd->allow_extras();
  cmd->callback([cmd, exit_code] {
    StatusOr<SbatchArgs> a = ParseSbatchArgs(cmd->remaining());
    if (!a.ok()) {
      *exit_code = ReportError(a.status(), std::cerr);
      return;
    }
    if (a->help) {
      std::cout << SbatchUsage();
      *exit_code = 0;
      return;
    }
    BatchSubmitOptions o;
    o.parsable = a->parsable;
    o.input.command_line = a->options;
    o.input.lenient = a->lenient;
    o.input.script_args = a->script_args;
    o.input.submit_dir = CurrentDirForJobs();
    o.input.environment = ProcessEnvironmentMap();
    if (!a->wrap.empty()) {
      o.input.script_text = "#!/bin/sh\n" + a->wrap + "\n";
    } else {
      StatusOr<std::string> text = ReadScript(a->script);
      if (!text.ok()) {
        *exit_code = ReportError(text.status(), std::cerr);
        return;
      }
      o.input.script_name = a->script;
      o.input.script_text = *text;
    }
    ConnectionFlags flags{a->server, a->token, a->ca_cert, a->insecure};
    StatusOr<ClientConfig> config = ResolveClientConfig(flags, ProcessEnvironment());
    if (!config.ok()) {
      *exit_code = ReportError(config.status(), std::cerr);
      return;
    }
    *exit_code = RunBatchSubmit(*config, o, std::cout, std::cerr);
  });
}

int RunSubmitScript(const ClientConfig& config, const SubmitOptions& options, bool lenient,
                    std::ostream& out, std::ostream& err) {
  BatchSubmitOptions o;
  o.sbatch_style = false;
  o.output = options.output;
  o.idempotency_key = options.idempotency_key;
  StatusOr<json> overrides = SubmitFlagOverrides(options);
  if (!overrides.ok()) {
    return ReportError(overrides.status(), err);
  }
  o.overrides = *overrides;
  StatusOr<std::string> text = ReadScript(options.command[0]);
  if (!text.ok()) {
    return ReportError(text.status(), err);
  }
  o.input.script_name = options.command[0];
  o.input.script_text = *text;
  o.input.script_args.assign(options.command.begin() + 1, options.command.end());
  o.input.lenient = lenient;
  o.input.submit_dir = options.submit_dir;
  o.input.environment = ProcessEnvironmentMap();
  return RunBatchSubmit(config, o, out, err);
}

}  // namespace tessera
