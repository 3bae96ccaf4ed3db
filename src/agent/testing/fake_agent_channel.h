// The agent channel of a FakeController (agent/testing/fake_controller.h), for agent
// tests: a gRPC server on loopback that answers the hello with no commands and each
// heartbeat as the FakeController's HTTP route does (FakeController::TakeHeartbeat: the
// same queued answers, the same FailNext, the same record of what came), through the
// channel's codec (api/agent_channel_codec.h). While it lives, the controller's
// registrations name its port, so that an agent heartbeats over it.
// Thread safety: gRPC's threads serve the streams; the accessors from any thread. The
// FakeController must outlive it.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>

#include "agent/testing/fake_controller.h"
#include "api/agent_channel.grpc.pb.h"
#include "api/agent_channel_codec.h"

namespace tessera {

class FakeAgentChannel final : public channel::AgentChannel::Service {
 public:
  explicit FakeAgentChannel(FakeController& controller) : controller_(controller) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(this);
    server_ = builder.BuildAndStart();
    controller_.SetChannelPort(port_);
  }
  ~FakeAgentChannel() override { Stop(); }
  FakeAgentChannel(const FakeAgentChannel&) = delete;
  FakeAgentChannel& operator=(const FakeAgentChannel&) = delete;

  // Ends every stream and stops listening, as a controller that went away; registrations
  // no longer name the channel.
  void Stop() {
    if (server_ != nullptr) {
      controller_.SetChannelPort(0);
      server_->Shutdown(std::chrono::system_clock::now());
      server_.reset();
    }
  }

  bool ok() const { return server_ != nullptr && port_ > 0; }
  int port() const { return port_; }
  int streams() const { return streams_.load(); }
  int heartbeats() const { return heartbeats_.load(); }  // taken or failed, after the hello

  grpc::Status Connect(grpc::ServerContext*,
                       grpc::ServerReaderWriter<channel::ControllerMessage, channel::AgentMessage>*
                           stream) override {
    ++streams_;
    channel::AgentMessage in;
    while (stream->Read(&in)) {
      channel::ControllerMessage out;
      out.set_ack(in.seq());
      if (!in.has_heartbeat()) {
        out.mutable_commands();  // the hello: nothing to do
      } else {
        StatusOr<HeartbeatRequest> decoded = FromProto(in.heartbeat());
        if (!decoded.ok()) {
          return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, decoded.status().message());
        }
        ++heartbeats_;
        std::optional<HeartbeatResponse> answer =
            controller_.TakeHeartbeat(ToJson(*decoded), std::move(decoded));
        if (answer.has_value()) {
          ToProto(*answer, out.mutable_commands());
        } else {
          out.set_error("busy");
        }
      }
      if (!stream->Write(out)) {
        break;
      }
    }
    return grpc::Status::OK;
  }

 private:
  FakeController& controller_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  std::atomic<int> streams_{0};
  std::atomic<int> heartbeats_{0};
};

}  // namespace tessera
