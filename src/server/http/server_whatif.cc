// GET /v1/admin/history (admin): the recorded history that `tessera whatif` replays
// (ClusterViews::History). Query: since, until (RFC 3339; default the last 7 days up to
// now), after (a job id, the cursor of the previous page), limit (jobs per page,
// default 1000).
#include <httplib.h>

#include "base/time_format.h"
#include "server/http/server.h"
#include "server/http/server_util.h"

namespace tessera {

using server_internal::AdminOnly;
using server_internal::ParseIntParam;
using server_internal::SendError;
using server_internal::SendJson;

void Server::HistoryRoutes() {
  httplib::Server& s = *http_;
  using Req = httplib::Request;
  using Res = httplib::Response;

  s.Get("/v1/admin/history", Authed([this](const Principal& who, const Req& req, Res& res) {
          if (Status st = AdminOnly(who); !st.ok()) {
            SendError(res, st);
            return;
          }
          const Micros now = clock_.NowMicros();
          Micros window[2] = {now - 7LL * 24 * 3600 * 1'000'000, now};
          const char* names[2] = {"since", "until"};
          for (int i = 0; i < 2; ++i) {
            if (req.has_param(names[i])) {
              StatusOr<Micros> t = ParseRfc3339(req.get_param_value(names[i]));
              if (!t.ok()) {
                SendError(res, InvalidArgumentError(std::string(names[i]) + ": " +
                                                    t.status().message()));
                return;
              }
              window[i] = t.value();
            }
          }
          StatusOr<int64_t> after = ParseIntParam(req, "after", 0);
          StatusOr<int64_t> limit = ParseIntParam(req, "limit", 1000);
          Status st = !after.ok() ? after.status() : limit.status();
          if (st.ok() && after.value() < 0) {
            st = InvalidArgumentError("after: a job id is required");
          }
          if (!st.ok()) {
            SendError(res, st);
            return;
          }
          StatusOr<nlohmann::json> out = views_->History(
              window[0], window[1], static_cast<uint64_t>(after.value()), limit.value());
          if (!out.ok()) {
            SendError(res, out.status());
            return;
          }
          SendJson(res, out.value());
        }));
}

}  // namespace tessera
