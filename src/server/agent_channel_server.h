// AgentChannelServer: the controller's end of the agent channel (api/agent_channel.proto),
// a gRPC server on its own port, apart from the users' HTTP API, so that neither kind of
// traffic can starve the other.
//
// Serving: gRPC's callback API, so an open stream holds no thread; a small pool of
// workers runs the controller's side of each agent message (Controller::Heartbeat), which
// waits for the store. Workers take messages from every stream, so reports from many
// agents share the store's group commits; one stream's messages are handled in order
// (the next is read only after the last was answered).
//
// Delivery and durability are the agent protocol's: a report is answered (ack) only
// once the controller made it durable, and the answer carries every launch and stop the
// agent has not acknowledged; Push hands a node's new launches and stops to its stream
// the moment they are durable (the controller calls it from Publish), so an agent does
// not wait for its next heartbeat. A push that is lost with a broken stream is in the
// next answer. A node has one stream: a new one (a reconnect, a new agent) replaces it.
//
// Authentication: the node's credential in the "authorization" metadata; the hello's
// node must be the credential's. Anything else ends the stream with PERMISSION_DENIED
// or UNAUTHENTICATED before the controller sees a message.
//
// Messages: the protocol's protobuf messages (api/agent_channel.proto), decoded and
// checked by api/agent_channel_codec.h as the HTTP heartbeat's JSON is: a heartbeat that
// does not decode, or that speaks for another node, ends the stream with
// INVALID_ARGUMENT or PERMISSION_DENIED.
//
// Thread safety: Push and the accessors from any thread; Stop once, from one thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "api/agent_protocol.h"
#include "base/status.h"

namespace tessera {

class Controller;

struct AgentChannelOptions {
  std::string host = "127.0.0.1";
  int port = 0;          // 0: any free port (see port())
  std::string tls_cert;  // PEM text; both set: TLS
  std::string tls_key;
  int workers = 4;  // threads running the controller's side of agent messages
  // The node a bearer header's credential belongs to, or why it may not open a stream
  // (PermissionDenied: a join token, a revoked credential; Unauthenticated otherwise).
  std::function<StatusOr<std::string>(const std::string& authorization, const std::string& peer)>
      authenticate;
};

class AgentChannelServer {
 public:
  // Binds and serves. Unavailable when the port cannot be bound.
  static StatusOr<std::unique_ptr<AgentChannelServer>> Start(AgentChannelOptions options,
                                                             Controller& controller);
  ~AgentChannelServer();
  AgentChannelServer(const AgentChannelServer&) = delete;
  AgentChannelServer& operator=(const AgentChannelServer&) = delete;

  // Ends every stream (agents reconnect elsewhere or later) and stops the workers.
  void Stop();
  int port() const;
  // Hands `commands` to the node's stream, if it has one; never blocks on the network.
  void Push(const std::string& node, const HeartbeatResponse& commands);
  size_t streams() const;   // open streams with a node (after their hello)
  uint64_t pushes() const;  // push messages handed to streams
  // The channel's families in the Prometheus text format (for /metrics).
  std::string Metrics() const;

  struct Impl;

 private:
  explicit AgentChannelServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera
