// AgentChannelClient: the agent's end of the agent channel (api/agent_channel.proto), one
// of its two HeartbeatTransports (agent/heartbeat_transport.h). One stream to the
// controller, carrying the protocol's protobuf messages (api/agent_channel_codec.h):
// Exchange sends a heartbeat and waits for its answer (which the controller sends once
// the reports are durable); pushes (launches and stops the controller made durable
// between answers) go to the push handler as they arrive, on the client's reader thread.
// What the controller sends is checked by the codec; a push that does not decode is
// logged and dropped, an answer that does not decode ends the stream (lost).
//
// Thread safety: Open, Exchange and Close from one thread (the agent's loop); the push
// handler runs on the reader thread and must be thread-safe against the loop.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "agent/heartbeat_transport.h"
#include "api/agent_protocol.h"
#include "base/clock.h"
#include "base/status.h"

namespace tessera {

namespace channel {
class AgentMessage;
}

struct AgentChannelTarget {
  std::string host;  // the controller's host, as in its URL
  int port = 0;
  std::string credential;  // the node's
  bool tls = false;
  std::string ca_cert_pem;  // tls: "" = the system's roots
  std::string node;
  std::string agent_id;
};

class AgentChannelClient final : public HeartbeatTransport {
 public:
  using PushHandler = std::function<void(const HeartbeatResponse& commands)>;
  // `on_end` runs on the reader thread when the stream ends by itself (the controller
  // went away or ended it), so that the agent reconnects without waiting.
  AgentChannelClient(PushHandler on_push, std::function<void()> on_end);
  ~AgentChannelClient() override;
  AgentChannelClient(const AgentChannelClient&) = delete;
  AgentChannelClient& operator=(const AgentChannelClient&) = delete;

  // Opens the stream and says hello; the answer to the hello is returned (it may ask the
  // agent to register again). Unavailable when the controller cannot be reached within
  // `timeout`; the stream's end status otherwise.
  StatusOr<HeartbeatResponse> Open(const AgentChannelTarget& target, Micros timeout);
  // Sends `request` and waits up to `timeout` for its answer. An answer that says the
  // store failed is Unavailable with `store_failed` set; any other failure (the stream
  // broke, the answer did not come or does not decode) closes the stream and sets `lost`.
  HeartbeatResult Exchange(const HeartbeatRequest& request, Micros timeout) override;
  // Ends the stream; returns how it ended (the controller's status, or Unavailable).
  Status Close();
  bool open() const;

  struct Impl;

 private:
  StatusOr<HeartbeatResponse> Send(channel::AgentMessage m, Micros timeout, bool* store_failed);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera
