// The agent channel's codec: the agent protocol's HeartbeatRequest and HeartbeatResponse
// (api/agent_protocol.h) to and from their protobuf messages (api/agent_channel.proto).
//
// ToProto writes every field; strings that may hold arbitrary bytes are made valid UTF-8
// as ToJson does (a proto3 string must be UTF-8), log chunks travel as bytes. FromProto
// checks what HeartbeatRequestFromJson / HeartbeatResponseFromJson check (required fields,
// ranges, enum values, string sizes, UTF-8 and NUL bytes, list lengths, environment
// names and sizes) and returns InvalidArgument naming the field ("tasks[1].key.task: must
// be between 0 and 2147483647, got -1"), so that a forged or buggy peer cannot get past
// the channel what the HTTP heartbeat refuses. For the same struct, ToProto->FromProto
// and ToJson->FromJson give equal structs.
//
// This is its own library (tessera_api_channel), apart from tessera_api, so that what
// links the API's JSON codecs (the CLI's client) does not link protobuf.
// Thread safety: pure functions.
#pragma once

#include "api/agent_channel.pb.h"
#include "api/agent_protocol.h"
#include "base/status.h"

namespace tessera {

void ToProto(const HeartbeatRequest& request, channel::HeartbeatRequest* out);
void ToProto(const HeartbeatResponse& response, channel::HeartbeatResponse* out);
channel::HeartbeatRequest ToProto(const HeartbeatRequest& request);
channel::HeartbeatResponse ToProto(const HeartbeatResponse& response);

StatusOr<HeartbeatRequest> FromProto(const channel::HeartbeatRequest& request);
StatusOr<HeartbeatResponse> FromProto(const channel::HeartbeatResponse& response);

}  // namespace tessera
