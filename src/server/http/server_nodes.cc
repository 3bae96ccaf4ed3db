// Server: the agent endpoints and node membership (credentials, removal, revocation).
// See server.h ("Node identity") for the rules.
#include <httplib.h>

#include <iostream>

#include "base/mutex.h"
#include "api/agent_protocol.h"
#include "api/http_errors.h"
#include "server/http/auth.h"
#include "server/http/server.h"
#include "server/http/server_util.h"

namespace tessera {
namespace {

constexpr const char* kNodeRole = "node";
constexpr const char* kRevokedRole = "node_revoked";
constexpr const char* kRemovedRole = "removed";

using server_internal::ParseBody;
using server_internal::SendError;
using server_internal::SendJson;

// The token of "Bearer <token>" (scheme case-insensitive), or "".
std::string BearerToken(const std::string& header) {
  const size_t space = header.find(' ');
  if (space == std::string::npos || space != 6) {
    return "";
  }
  std::string scheme = header.substr(0, 6);
  for (char& c : scheme) {
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  if (scheme != "bearer") {
    return "";
  }
  const size_t begin = header.find_first_not_of(" \t", space);
  const size_t end = header.find_last_not_of(" \t");
  return begin == std::string::npos ? "" : header.substr(begin, end - begin + 1);
}

}  // namespace

bool Server::LoadNodeCredential(const TokenRow& row) {
  if (row.role == kRemovedRole) {
    return true;  // a removed node's credential: nothing to load
  }
  if (row.role != kNodeRole && row.role != kRevokedRole) {
    return false;
  }
  const bool revoked = row.role == kRevokedRole;
  MutexLock lock(cred_mu_);
  node_creds_[row.name] = NodeCredential{row.hash, revoked};
  if (revoked) {
    revoked_[row.hash] = row.name;
  } else {
    tokens_->Add(row.hash, Principal{Role::kNode, "", row.name});
  }
  return true;
}

std::string Server::RevokedMessage(const std::string& authorization) {
  const std::string token = BearerToken(authorization);
  if (token.empty()) {
    return "";
  }
  const std::string hash = HashToken(token);
  MutexLock lock(cred_mu_);
  auto it = revoked_.find(hash);
  if (it == revoked_.end()) {
    return "";
  }
  return "the credential of node '" + it->second +
         "' was revoked; the admin must remove the node (tessera nodes remove " + it->second +
         ") before it can join again";
}

// Registration with the join token: only a name without a credential, which then gets
// one.
void Server::JoinNode(const RegisterRequest& r, const std::string& remote_addr,
                      httplib::Response& res) {
  const std::string& name = r.inventory.spec.name;
  // The name is claimed first, so that two agents racing for it cannot both get a
  // credential; the commits run outside the lock, so that new nodes join side by
  // side rather than one at a time.
  {
    MutexLock lock(cred_mu_);
    if (node_creds_.count(name) > 0) {
      SendError(res,
                PermissionDeniedError(
                    "node '" + name + "' is already registered: its agent must use " +
                    "the node's credential (node.credential in its data directory), " +
                    "or the admin must remove the node first (tessera nodes remove " +
                    name + ")"));
      return;
    }
    if (!joining_.insert(name).second) {
      SendError(res, UnavailableError("another agent is registering node '" + name +
                                      "' at this moment"));
      return;
    }
  }
  struct Unclaim {
    Server* server;
    const std::string& name;
    ~Unclaim() {
      MutexLock lock(server->cred_mu_);
      server->joining_.erase(name);
    }
  } unclaim{this, name};
  // Before the name's first registration: its removal marker cleared, durably.
  if (Status cleared = NodeRegistry::ClearRemoved(*store_, name); !cleared.ok()) {
    SendError(res, UnavailableError("state store: " + cleared.message()));
    return;
  }
  controller_->CountForeignReports(name, r.tasks);
  StatusOr<RegisterResponse> out = controller_->Register(r, remote_addr);
  if (!out.ok()) {
    SendError(res, out.status());
    return;
  }
  // Durable before it is handed out: a credential the store lost would lock the name.
  const std::string credential = GenerateToken("tsr_node");
  TokenRow row{HashToken(credential), kNodeRole, "", name, clock_.NowMicros()};
  WriteBatch batch;
  batch.tokens.push_back(row);
  if (Status committed = store_->Commit(std::move(batch)); !committed.ok()) {
    SendError(res, UnavailableError("could not store the node's credential: " +
                                    committed.message()));
    return;
  }
  {
    MutexLock lock(cred_mu_);
    tokens_->Add(row.hash, Principal{Role::kNode, "", name});
    node_creds_[name] = NodeCredential{row.hash, false};
  }
  std::cerr << "tessera server: node " << name << " joined from " << remote_addr
            << " and got its credential\n";
  out->credential = credential;
  out->channel_port = agent_port();
  SendJson(res, ToJson(out.value()));
}

// The agents' registration and heartbeats.
void Server::NodeRoutes() {
  httplib::Server& s = *http_;
  using Req = httplib::Request;
  using Res = httplib::Response;

  s.Post(
      "/v1/agents/register",
      Authed(
          [this](const Principal& who, const Req& req, Res& res) {
            StatusOr<nlohmann::json> body = ParseBody(req);
            StatusOr<RegisterRequest> r = body.ok()
                                              ? RegisterRequestFromJson(body.value(), *catalog_)
                                              : StatusOr<RegisterRequest>(body.status());
            if (!r.ok()) {
              SendError(res, r.status());
              return;
            }
            const std::string name = r->inventory.spec.name;
            if (who.role == Role::kNode) {
              if (who.name != name) {
                SendError(res, PermissionDeniedError("this credential belongs to node '" +
                                                     who.name + "', not '" + name + "'"));
                return;
              }
              controller_->CountForeignReports(name, r->tasks);
              StatusOr<RegisterResponse> out = controller_->Register(r.value(), req.remote_addr);
              if (!out.ok()) {
                SendError(res, out.status());
                return;
              }
              out->channel_port = agent_port();
              SendJson(res, ToJson(out.value()));
              return;
            }
            JoinNode(r.value(), req.remote_addr, res);
          },
          Access::kAgent));

  s.Post("/v1/agents/heartbeat",
         Authed(
             [this](const Principal& who, const Req& req, Res& res) {
               if (who.role != Role::kNode) {
                 SendError(
                     res,
                     PermissionDeniedError(
                         "heartbeats need the node's credential (from its first registration), "
                         "not the join token"));
                 return;
               }
               StatusOr<nlohmann::json> body = ParseBody(req);
               StatusOr<HeartbeatRequest> r = body.ok() ? HeartbeatRequestFromJson(body.value())
                                                        : StatusOr<HeartbeatRequest>(body.status());
               if (r.ok() && r->node != who.name) {
                 r = PermissionDeniedError("this credential belongs to node '" + who.name +
                                           "', not '" + r->node + "'");
               }
               if (r.ok()) {
                 controller_->CountForeignReports(who.name, r->tasks);
               }
               StatusOr<HeartbeatResponse> out = r.ok() ? controller_->Heartbeat(r.value())
                                                        : StatusOr<HeartbeatResponse>(r.status());
               if (!out.ok()) {
                 SendError(res, out.status());
                 return;
               }
               SendJson(res, ToJson(out.value()));
             },
             Access::kAgent));

}

// Admin: forgetting a node and revoking its credential.
void Server::NodeAdminRoutes() {
  httplib::Server& s = *http_;
  using Req = httplib::Request;
  using Res = httplib::Response;

  // Admin: DELETE /v1/nodes/{name} (the CLI's client posts to /remove).
  auto remove = [this](const Principal& who, const Req& req, Res& res) {
    if (who.role != Role::kAdmin) {
      SendError(res, PermissionDeniedError("only an admin may do this"));
      return;
    }
    const std::string name = req.matches[1];
    MutexLock lock(cred_mu_);
    if (joining_.count(name) > 0) {
      SendError(res, UnavailableError("node '" + name + "' is registering at this moment; " +
                                      "remove it once it has"));
      return;
    }
    auto cred = node_creds_.find(name);
    WriteBatch extra;
    if (cred != node_creds_.end()) {
      extra.tokens.push_back(
          TokenRow{cred->second.hash, kRemovedRole, "", name, clock_.NowMicros()});
    }
    StatusOr<nlohmann::json> out = node_actions_->RemoveNode(name, extra);
    if (!out.ok() && out.status().code() == StatusCode::kNotFound && !extra.tokens.empty()) {
      // A credential whose node the controller no longer knows: forget the credential.
      Status committed = store_->Commit(std::move(extra));
      out = committed.ok() ? StatusOr<nlohmann::json>(nlohmann::json{{"removed", name}})
                           : StatusOr<nlohmann::json>(committed);
    }
    if (!out.ok()) {
      SendError(res, out.status());
      return;
    }
    if (cred != node_creds_.end()) {
      tokens_->Remove(cred->second.hash);
      revoked_.erase(cred->second.hash);
      node_creds_.erase(cred);
    }
    SendJson(res, out.value());
  };
  s.Delete(R"(/v1/nodes/([^/]+))", Authed(remove, Access::kUser));
  s.Post(R"(/v1/nodes/([^/]+)/remove)", Authed(remove, Access::kUser));

  s.Post(R"(/v1/nodes/([^/]+)/revoke)",
         Authed(
             [this](const Principal& who, const Req& req, Res& res) {
               if (who.role != Role::kAdmin) {
                 SendError(res, PermissionDeniedError("only an admin may do this"));
                 return;
               }
               const std::string name = req.matches[1];
               {
                 MutexLock lock(cred_mu_);
                 auto cred = node_creds_.find(name);
                 if (cred == node_creds_.end()) {
                   SendError(res, NotFoundError("node '" + name + "' has no credential"));
                   return;
                 }
                 if (!cred->second.revoked) {
                   WriteBatch batch;
                   batch.tokens.push_back(
                       TokenRow{cred->second.hash, kRevokedRole, "", name, clock_.NowMicros()});
                   if (Status committed = store_->Commit(std::move(batch)); !committed.ok()) {
                     SendError(res, UnavailableError("state store: " + committed.message()));
                     return;
                   }
                   tokens_->Remove(cred->second.hash);
                   revoked_[cred->second.hash] = name;
                   cred->second.revoked = true;
                   std::cerr << "tessera server: the credential of node " << name
                             << " was revoked\n";
                 }
               }
               // Its work is requeued now rather than after the heartbeat timeout: the node is no
               // longer trusted to report on it.
               Status fenced = node_actions_->FenceNode(name, "its credential was revoked");
               if (!fenced.ok() && fenced.code() != StatusCode::kNotFound) {
                 SendError(res, fenced);
                 return;
               }
               SendJson(res, {{"node", name}, {"revoked", true}});
             },
             Access::kUser));
}

}  // namespace tessera
