// Who is who inside tenants: user tokens (POST/GET /v1/tokens), GET /v1/whoami, the
// job history (GET /v1/history) and usage by user.
#include <httplib.h>

#include <algorithm>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "base/strings.h"
#include "server/job_history.h"
#include "server/http/server.h"
#include "server/http/server_util.h"
#include "server/modules/usage_report.h"

namespace tessera {

using namespace server_internal;  // NOLINT: the handlers' own helpers

namespace {

constexpr int64_t kDefaultHistoryPage = 100;
constexpr int64_t kMaxHistoryPage = 1000;
// Store rows one history request reads at most, however selective its filters.
constexpr size_t kHistoryScan = 5000;

}  // namespace

StatusOr<nlohmann::json> Server::UsageByUser(Micros since, Micros until,
                                             const std::string& tenant) {
  TESSERA_ASSIGN_OR_RETURN(nlohmann::json by_job, views_->Usage(since, until, "job", tenant));
  std::set<uint64_t> ids;
  for (const nlohmann::json& row : by_job["rows"]) {
    StatusOr<int64_t> id = ParseInt64(row.value("key", ""));
    if (id.ok() && id.value() > 0) {
      ids.insert(static_cast<uint64_t>(id.value()));
    }
  }
  TESSERA_ASSIGN_OR_RETURN(auto owners, LoadJobOwners(*store_, ids));
  return ::tessera::UsageByUser(by_job, owners);
}

void Server::AccountRoutes() {
  httplib::Server& s = *http_;
  using Req = httplib::Request;
  using Res = httplib::Response;

  s.Get("/v1/whoami", Authed([](const Principal& who, const Req&, Res& res) {
          SendJson(res, {{"role", std::string(RoleName(who.role))},
                         {"tenant", who.tenant},
                         {"user", who.user},
                         {"name", who.name}});
        }));

  // Admin: a token for a tenant, or for one user inside it.
  s.Post("/v1/tokens", Authed([this](const Principal& who, const Req& req, Res& res) {
           Status st = AdminOnly(who);
           StatusOr<nlohmann::json> body = st.ok() ? ParseBody(req) : StatusOr<nlohmann::json>(st);
           if (body.ok() && !body->is_object()) {
             body = InvalidArgumentError("the body must be a JSON object");
           }
           std::string tenant, user, name;
           if (body.ok()) {
             for (auto [field, target] : {std::pair{"tenant", &tenant}, std::pair{"user", &user},
                                          std::pair{"name", &name}}) {
               if (body->contains(field) && !(*body)[field].is_string()) {
                 body = InvalidArgumentError(std::string(field) + ": expected a string");
                 break;
               }
               *target = body->value(field, "");
             }
           }
           if (body.ok() && tenant.empty()) {
             body = InvalidArgumentError("tenant: a tenant name is required");
           }
           if (!body.ok()) {
             SendError(res, body.status());
             return;
           }
           if (name.empty()) {
             name = user.empty() ? tenant : user + "@" + tenant;
           }
           StatusOr<std::string> token = CreateTenantToken(tenant, name, user);
           if (!token.ok()) {
             SendError(res, token.status());
             return;
           }
           SendJson(res,
                    {{"tenant", tenant}, {"user", user}, {"name", name}, {"token", token.value()}},
                    201);
         }));

  // Admin: the user-facing tokens (admin, tenant, metrics, join), never their hashes.
  s.Get("/v1/tokens", Authed([this](const Principal& who, const Req&, Res& res) {
          Status st = AdminOnly(who);
          StatusOr<std::vector<TokenRow>> rows =
              st.ok() ? store_->LoadTokens() : StatusOr<std::vector<TokenRow>>(st);
          if (!rows.ok()) {
            SendError(res, rows.status());
            return;
          }
          nlohmann::json out = nlohmann::json::array();
          for (const TokenRow& row : rows.value()) {
            if (!ParseRole(row.role).ok() || row.role == "node") {
              continue;  // node credentials and revoked ones: `tessera nodes`
            }
            out.push_back({{"name", row.name},
                           {"role", row.role},
                           {"tenant", row.tenant},
                           {"user", row.user},
                           {"created", row.created_us > 0 ? FormatRfc3339(row.created_us) : ""}});
          }
          std::sort(out.begin(), out.end(), [](const nlohmann::json& a, const nlohmann::json& b) {
            return std::tie(a["tenant"], a["user"], a["name"]) <
                   std::tie(b["tenant"], b["user"], b["name"]);
          });
          SendJson(res, {{"tokens", std::move(out)}});
        }));

  s.Get("/v1/history", Authed([this](const Principal& who, const Req& req, Res& res) {
          HistoryQuery q;
          const Micros now = clock_.NowMicros();
          q.since = now - 24LL * 3600 * 1'000'000;
          q.until = now + 1;
          Status st = ParseWindow(req, &q.since, &q.until);
          StatusOr<int64_t> limit = ParseIntParam(req, "limit", kDefaultHistoryPage);
          StatusOr<int64_t> after = ParseIntParam(req, "after", 0);
          if (st.ok() && (!limit.ok() || !after.ok())) {
            st = !limit.ok() ? limit.status() : after.status();
          }
          if (!st.ok()) {
            SendError(res, st);
            return;
          }
          q.limit = static_cast<size_t>(std::min(limit.value(), kMaxHistoryPage));
          q.after = static_cast<uint64_t>(after.value());
          q.user = req.get_param_value("user");
          // A tenant reads its own jobs only.
          q.tenant = who.role == Role::kTenant ? who.tenant : req.get_param_value("tenant");
          for (std::string_view state : Split(req.get_param_value("state"), ',')) {
            if (!state.empty()) {
              q.states.emplace_back(state);
            }
          }
          StatusOr<HistoryPage> page = ReadHistory(*store_, q, kHistoryScan);
          if (!page.ok()) {
            SendError(res, page.status());
            return;
          }
          limiter_->Charge(
              HashToken(req.get_header_value("Authorization")),
              static_cast<double>(page->jobs.size()) / std::max(options_.list_rows_per_token, 1.0));
          SendJson(res, {{"jobs", std::move(page->jobs)},
                         {"next", page->next > 0 ? nlohmann::json(std::to_string(page->next))
                                                 : nlohmann::json(nullptr)}});
        }));
}

}  // namespace tessera
