// HeartbeatTransport: how one heartbeat reaches the controller and its answer comes back.
// Two implementations, which the agent treats alike (agent_heartbeat.cc picks one per
// heartbeat):
//
//   AgentChannelClient (agent/agent_channel_client.h): the agent channel's stream, the
//     protocol's protobuf messages (api/agent_channel_codec.h); used while it is open.
//   HttpHeartbeatTransport (below): POST /v1/agents/heartbeat with the JSON encoding
//     (api/agent_protocol.h), through the agent's ControllerLinks (which follows a
//     follower's redirect and moves on to the next controller on no answer); the
//     fallback while the controller offers no channel or it cannot be opened.
//
// Both decode the answer with their codec, which checks it the same way: an answer that
// does not decode is InvalidArgument naming the field.
//
// Thread safety: one caller at a time (the agent's loop).
#pragma once

#include "api/agent_protocol.h"
#include "base/clock.h"
#include "base/status.h"

namespace tessera {

class ControllerLinks;

struct HeartbeatResult {
  // The controller's answer, or why there is none.
  StatusOr<HeartbeatResponse> answer = UnavailableError("no heartbeat sent");
  // The controller is alive but took none of the reports (its store failed: HTTP 503, or
  // the channel's `error`): the agent keeps them, and its node is not lost meanwhile.
  bool store_failed = false;
  // The transport is gone: the stream broke, did not answer within the timeout or sent
  // what does not decode, and is closed now. The agent registers again (from the next
  // controller). HTTP never sets it: each request finds its controller afresh.
  bool lost = false;
};

class HeartbeatTransport {
 public:
  virtual ~HeartbeatTransport() = default;
  // Sends `request` and waits up to `timeout` for its answer (over HTTP: for each
  // controller tried).
  virtual HeartbeatResult Exchange(const HeartbeatRequest& request, Micros timeout) = 0;
};

class HttpHeartbeatTransport final : public HeartbeatTransport {
 public:
  // `links` must outlive the transport.
  explicit HttpHeartbeatTransport(ControllerLinks* links) : links_(links) {}

  HeartbeatResult Exchange(const HeartbeatRequest& request, Micros timeout) override;

 private:
  ControllerLinks* links_;
};

}  // namespace tessera
