// A tenant's registry credentials (services/registry_credentials_service.h): the secret its jobs
// pull private images with. A tenant token sets, lists and removes its own tenant's; an
// admin names the tenant (?tenant=). Nothing here ever answers with a credential.
//   GET    /v1/registry-credentials            {"tenant", "registries": [...]}
//   PUT    /v1/registry-credentials/REGISTRY   {"username", "password"}
//   DELETE /v1/registry-credentials/REGISTRY
#include <httplib.h>

#include <string>

#include "server/controller.h"
#include "server/http/server.h"
#include "server/http/server_util.h"

namespace tessera {

using namespace server_internal;  // NOLINT: the handlers' own helpers

namespace {

// The tenant a request acts for: a tenant token's own; an admin's ?tenant=.
StatusOr<std::string> TenantOf(const Principal& who, const httplib::Request& req) {
  if (who.role == Role::kTenant) {
    const std::string named = req.get_param_value("tenant");
    if (!named.empty() && named != who.tenant) {
      return PermissionDeniedError("a tenant's token acts for its own tenant only");
    }
    return who.tenant;
  }
  if (who.role != Role::kAdmin) {
    return PermissionDeniedError("only a tenant or an admin may do this");
  }
  const std::string tenant = req.get_param_value("tenant");
  if (tenant.empty()) {
    return InvalidArgumentError("tenant: an admin names the tenant (?tenant=NAME)");
  }
  return tenant;
}

}  // namespace

void Server::RegistryRoutes() {
  httplib::Server& s = *http_;
  using Req = httplib::Request;
  using Res = httplib::Response;

  s.Get("/v1/registry-credentials", Authed([this](const Principal& who, const Req& req, Res& res) {
          StatusOr<std::string> tenant = TenantOf(who, req);
          if (!tenant.ok()) {
            SendError(res, tenant.status());
            return;
          }
          SendJson(res, {{"tenant", *tenant},
                         {"registries", registry_credentials_->Registries(*tenant)}});
        }));

  auto change = [this](bool set) {
    return [this, set](const Principal& who, const Req& req, Res& res) {
      StatusOr<std::string> tenant = TenantOf(who, req);
      std::string username, password;
      Status st = tenant.status();
      if (st.ok() && set) {
        StatusOr<nlohmann::json> body = ParseBody(req);
        st = body.status();
        if (st.ok() &&
            (!body->is_object() || !body->value("username", nlohmann::json()).is_string() ||
             !body->value("password", nlohmann::json()).is_string())) {
          st = InvalidArgumentError("the body must be {\"username\": ..., \"password\": ...}");
        }
        if (st.ok()) {
          username = (*body)["username"].get<std::string>();
          password = (*body)["password"].get<std::string>();
          if (username.empty() || password.empty()) {
            st = InvalidArgumentError("username and password must not be empty");
          }
        }
      }
      const std::string registry = req.matches[1];
      if (st.ok()) {
        st = registry_credentials_->Set(*tenant, registry, username, password);
      }
      if (!st.ok()) {
        SendError(res, st);
        return;
      }
      SendJson(res, {{"tenant", *tenant}, {"registry", registry}, {"set", set}});
    };
  };
  s.Put(R"(/v1/registry-credentials/([^/]+))", Authed(change(true)));
  s.Delete(R"(/v1/registry-credentials/([^/]+))", Authed(change(false)));
}

}  // namespace tessera
