// The gRPC channel settings of an agent's connection to the agent channel, shared by the
// agent (agent_channel_client.cc) and the simulated fleet that must behave like it
// (tests/e2e/agent_fleet_stream.cc).
#pragma once

#include <grpcpp/grpcpp.h>

namespace tessera {

inline grpc::ChannelArguments AgentChannelArguments() {
  grpc::ChannelArguments args;
  // A dead controller is noticed within seconds, not at TCP's timeout.
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10'000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10'000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  // A controller back after a restart is reached within seconds, not gRPC's 2 minutes.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 1'000);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 10'000);
  args.SetMaxReceiveMessageSize(64 << 20);
  return args;
}

}  // namespace tessera
