// Server: the agent channel's start and its authentication (declared in server.h).
#include <fstream>
#include <sstream>

#include "server/agent_channel_server.h"
#include "server/http/auth.h"
#include "server/http/server.h"

namespace tessera {
namespace {

StatusOr<std::string> ReadPem(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) {
    return UnavailableError("cannot read " + path);
  }
  return text.str();
}

// "ipv4:127.0.0.1:4242" -> "ipv4:127.0.0.1": failed attempts are counted per address.
std::string PeerAddress(const std::string& peer) {
  const size_t colon = peer.rfind(':');
  return colon == std::string::npos || colon < peer.find(':') + 1 ? peer : peer.substr(0, colon);
}

}  // namespace

Status Server::StartChannel() {
  if (options_.agent_port < 0) {
    return Status::Ok();
  }
  AgentChannelOptions o;
  o.host = options_.host;
  o.port = options_.agent_port;
  o.workers = options_.agent_workers;
  if (!options_.tls_cert.empty() && !options_.tls_key.empty()) {
    TESSERA_ASSIGN_OR_RETURN(o.tls_cert, ReadPem(options_.tls_cert));
    TESSERA_ASSIGN_OR_RETURN(o.tls_key, ReadPem(options_.tls_key));
  }
  o.authenticate = [this](const std::string& authorization, const std::string& peer) {
    return AuthenticateNode(authorization, peer);
  };
  TESSERA_ASSIGN_OR_RETURN(channel_, AgentChannelServer::Start(std::move(o), *controller_));
  controller_->SetPushSink(
      [channel = channel_.get()](const std::string& node, const HeartbeatResponse& commands) {
        channel->Push(node, commands);
      });
  return Status::Ok();
}

int Server::agent_port() const { return channel_ == nullptr ? 0 : channel_->port(); }

size_t Server::channel_streams() const { return channel_ == nullptr ? 0 : channel_->streams(); }

uint64_t Server::channel_pushes() const { return channel_ == nullptr ? 0 : channel_->pushes(); }

std::string Server::ChannelMetrics() const {
  return channel_ == nullptr ? "" : channel_->Metrics();
}

StatusOr<std::string> Server::AuthenticateNode(const std::string& authorization,
                                               const std::string& peer) {
  StatusOr<Principal> who = tokens_->Authenticate(authorization);
  if (!who.ok()) {
    const std::string address = PeerAddress(peer);
    if (throttle_->Blocked(address) > 0) {
      return ResourceExhaustedError("too many failed authentications from " + address +
                                    "; retry later");
    }
    if (std::string revoked = RevokedMessage(authorization); !revoked.empty()) {
      return PermissionDeniedError(revoked);
    }
    if (!authorization.empty()) {
      throttle_->Failed(address);
    }
    return who.status();
  }
  if (who->role != Role::kNode) {
    return PermissionDeniedError(
        "the agent channel needs the node's credential (from its first registration), not "
        "the join token");
  }
  return who->name;
}

}  // namespace tessera
