// Validation runs (admin only; the ValidationService, services/validation_service.h):
//   GET    /v1/admin/validations                    the checks, with each node's state
//   POST   /v1/admin/validations                    add a check (validation.h's fields)
//   DELETE /v1/admin/validations/{name}             remove it
//   POST   /v1/admin/validations/{name}/run         run it now; body {"node"?}
//   GET    /v1/admin/validations/results            ?check=&node=&limit= (newest first)
#include <httplib.h>

#include "server/http/server.h"
#include "server/http/server_util.h"

namespace tessera {

using server_internal::AdminOnly;
using server_internal::ParseBody;
using server_internal::ParseIntParam;
using server_internal::SendError;
using server_internal::SendJson;

void Server::ValidationRoutes() {
  httplib::Server& s = *http_;
  using Req = httplib::Request;
  using Res = httplib::Response;
  // Sends `out` or its error.
  auto reply = [](Res& res, const StatusOr<nlohmann::json>& out) {
    if (!out.ok()) {
      SendError(res, out.status());
      return;
    }
    SendJson(res, out.value());
  };

  s.Get("/v1/admin/validations", Authed([this](const Principal& who, const Req&, Res& res) {
          if (Status st = AdminOnly(who); !st.ok()) {
            SendError(res, st);
            return;
          }
          SendJson(res, validations_->List());
        }));
  s.Post("/v1/admin/validations", Authed([this](const Principal& who, const Req& req, Res& res) {
           if (Status st = AdminOnly(who); !st.ok()) {
             SendError(res, st);
             return;
           }
           StatusOr<nlohmann::json> body = ParseBody(req);
           if (!body.ok()) {
             SendError(res, body.status());
             return;
           }
           StatusOr<nlohmann::json> out = validations_->Add(body.value());
           if (!out.ok()) {
             SendError(res, out.status());
             return;
           }
           SendJson(res, out.value(), 201);
         }));
  s.Get("/v1/admin/validations/results",
        Authed([this, reply](const Principal& who, const Req& req, Res& res) {
          if (Status st = AdminOnly(who); !st.ok()) {
            SendError(res, st);
            return;
          }
          StatusOr<int64_t> limit = ParseIntParam(req, "limit", 100);
          if (!limit.ok() || limit.value() < 1 || limit.value() > 10'000) {
            SendError(res, InvalidArgumentError("limit: expected 1 to 10000"));
            return;
          }
          reply(res, validations_->Results(req.get_param_value("check"),
                                           req.get_param_value("node"),
                                           static_cast<size_t>(limit.value())));
        }));
  s.Delete(R"(/v1/admin/validations/([^/]+))",
           Authed([this, reply](const Principal& who, const Req& req, Res& res) {
             if (Status st = AdminOnly(who); !st.ok()) {
               SendError(res, st);
               return;
             }
             reply(res, validations_->Remove(req.matches[1]));
           }));
  s.Post(R"(/v1/admin/validations/([^/]+)/run)",
         Authed([this, reply](const Principal& who, const Req& req, Res& res) {
           if (Status st = AdminOnly(who); !st.ok()) {
             SendError(res, st);
             return;
           }
           std::string node;
           if (!req.body.empty()) {
             StatusOr<nlohmann::json> body = ParseBody(req);
             if (!body.ok() || !body.value().is_object()) {
               SendError(res, InvalidArgumentError("the body must be a JSON object"));
               return;
             }
             const nlohmann::json& j = body.value();
             if (j.contains("node") && !j["node"].is_null()) {
               if (!j["node"].is_string()) {
                 SendError(res, InvalidArgumentError("node: expected a node name"));
                 return;
               }
               node = j["node"].get<std::string>();
             }
           }
           reply(res, validations_->Run(req.matches[1], node));
         }));
}

}  // namespace tessera
