#include "agent/agent_channel_client.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <iostream>
#include <utility>

#include "agent/agent_channel_args.h"
#include "api/agent_channel.grpc.pb.h"
#include "api/agent_channel_codec.h"
#include "base/mutex.h"

namespace tessera {

using channel::AgentMessage;

namespace {

using channel::ControllerMessage;

std::chrono::system_clock::time_point After(Micros timeout) {
  return std::chrono::system_clock::now() + std::chrono::microseconds(timeout);
}

Status FromGrpc(const grpc::Status& s, const std::string& what) {
  const std::string message = what + ": " + s.error_message();
  switch (s.error_code()) {
    case grpc::StatusCode::OK:
      return UnavailableError(what + ": the controller ended the stream");
    case grpc::StatusCode::PERMISSION_DENIED:
      return PermissionDeniedError(message);
    case grpc::StatusCode::UNAUTHENTICATED:
      return UnauthenticatedError(message);
    case grpc::StatusCode::INVALID_ARGUMENT:
      return InvalidArgumentError(message);
    default:
      return UnavailableError(message);
  }
}

}  // namespace

struct AgentChannelClient::Impl {
  PushHandler on_push;
  std::function<void()> on_end;
  std::shared_ptr<grpc::Channel> channel;  // kept across streams to the same place
  std::string channel_key;                 // address and TLS settings it was made with
  std::unique_ptr<channel::AgentChannel::Stub> stub;
  std::unique_ptr<grpc::ClientContext> context;
  std::unique_ptr<grpc::ClientReaderWriter<AgentMessage, ControllerMessage>> stream;
  std::thread reader;
  std::string where;  // "the agent channel at host:port"

  mutable Mutex mu;
  CondVar cv;
  uint64_t next_seq GUARDED_BY(mu) = 1;
  uint64_t waiting_for GUARDED_BY(mu) = 0;
  std::optional<ControllerMessage> answer GUARDED_BY(mu);
  bool broken GUARDED_BY(mu) = false;
  bool closing GUARDED_BY(mu) = false;  // Close cancelled the stream

  void Read() {
    ControllerMessage m;
    while (stream->Read(&m)) {
      if (m.ack() == 0) {
        Deliver(m);
        continue;
      }
      MutexLock lock(mu);
      if (m.ack() == waiting_for) {
        answer = std::move(m);
        cv.NotifyAll();
      }
    }
    bool cancelled = false;
    {
      MutexLock lock(mu);
      broken = true;
      cancelled = closing;
      cv.NotifyAll();
    }
    if (!cancelled) {
      on_end();
    }
  }

  void Deliver(const ControllerMessage& m) {
    StatusOr<HeartbeatResponse> commands =
        m.has_commands() ? FromProto(m.commands())
                         : StatusOr<HeartbeatResponse>(InvalidArgumentError("no commands"));
    if (!commands.ok()) {
      std::cerr << "tessera agent: a push from the controller: " << commands.status().ToString()
                << "\n";
      return;
    }
    on_push(commands.value());
  }
};

AgentChannelClient::AgentChannelClient(PushHandler on_push, std::function<void()> on_end)
    : impl_(std::make_unique<Impl>()) {
  impl_->on_push = std::move(on_push);
  impl_->on_end = std::move(on_end);
}

AgentChannelClient::~AgentChannelClient() { (void)Close(); }

bool AgentChannelClient::open() const { return impl_->stream != nullptr; }

StatusOr<HeartbeatResponse> AgentChannelClient::Open(const AgentChannelTarget& target,
                                                     Micros timeout) {
  (void)Close();
  Impl& c = *impl_;
  const std::string host =
      target.host.find(':') != std::string::npos ? "[" + target.host + "]" : target.host;
  const std::string address = host + ":" + std::to_string(target.port);
  c.where = "the agent channel at " + address;
  // The next stream rides the connection the last one had while it lives: a controller
  // that answers "register again" then sets up one connection per agent, not two.
  const std::string key = address + (target.tls ? "\ntls\n" + target.ca_cert_pem : "");
  if (c.channel == nullptr || c.channel_key != key) {
    std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
    if (target.tls) {
      grpc::SslCredentialsOptions ssl;
      ssl.pem_root_certs = target.ca_cert_pem;
      credentials = grpc::SslCredentials(ssl);
    }
    c.channel = grpc::CreateCustomChannel(address, credentials, AgentChannelArguments());
    c.channel_key = key;
  }
  if (!c.channel->WaitForConnected(After(timeout))) {
    c.channel.reset();  // the next try starts afresh, not in this one's backoff
    return UnavailableError("cannot reach " + c.where);
  }
  c.stub = channel::AgentChannel::NewStub(c.channel);
  c.context = std::make_unique<grpc::ClientContext>();
  c.context->AddMetadata("authorization", "Bearer " + target.credential);
  c.stream = c.stub->Connect(c.context.get());
  {
    MutexLock lock(c.mu);
    c.broken = false;
    c.closing = false;
    c.next_seq = 1;
  }
  c.reader = std::thread([&c] { c.Read(); });
  AgentMessage hello;
  hello.set_node(target.node);
  hello.set_agent_id(target.agent_id);
  bool store_failed = false;
  return Send(std::move(hello), timeout, &store_failed);
}

HeartbeatResult AgentChannelClient::Exchange(const HeartbeatRequest& request, Micros timeout) {
  AgentMessage m;
  ToProto(request, m.mutable_heartbeat());
  HeartbeatResult result;
  result.answer = Send(std::move(m), timeout, &result.store_failed);
  if (!result.answer.ok() && !result.store_failed) {
    (void)Close();  // a stream that broke, stopped answering or sent nonsense is done
    result.lost = true;
  }
  return result;
}

StatusOr<HeartbeatResponse> AgentChannelClient::Send(AgentMessage m, Micros timeout,
                                                     bool* store_failed) {
  Impl& c = *impl_;
  *store_failed = false;
  if (c.stream == nullptr) {
    return UnavailableError("the agent channel is not open");
  }
  {
    MutexLock lock(c.mu);
    m.set_seq(c.next_seq++);
    c.waiting_for = m.seq();
    c.answer.reset();
  }
  bool answered = false;
  if (c.stream->Write(m)) {
    MutexLock lock(c.mu);
    answered = c.cv.WaitFor(c.mu, std::chrono::microseconds(timeout), [&c]() REQUIRES(c.mu) {
      return c.answer.has_value() || c.broken;
    }) && c.answer.has_value();
  }
  if (!answered) {
    bool timed_out = false;
    {
      MutexLock lock(c.mu);  // the reader thread sets it
      timed_out = !c.broken;
    }
    Status ended = Close();
    return timed_out ? UnavailableError(c.where + ": no answer within " +
                                        std::to_string(timeout / 1000) + " ms")
                     : ended;
  }
  ControllerMessage reply;
  {
    MutexLock lock(c.mu);
    reply = std::move(*c.answer);
    c.answer.reset();
  }
  if (!reply.error().empty()) {
    *store_failed = true;
    return UnavailableError("the controller took no reports: " + reply.error());
  }
  if (!reply.has_commands()) {
    return InvalidArgumentError(c.where + ": an answer without commands");
  }
  StatusOr<HeartbeatResponse> commands = FromProto(reply.commands());
  if (!commands.ok()) {
    return InvalidArgumentError(c.where + ": an answer that does not decode: " +
                                commands.status().message());
  }
  return commands;
}

Status AgentChannelClient::Close() {
  Impl& c = *impl_;
  if (c.stream == nullptr) {
    return UnavailableError("the agent channel is not open");
  }
  bool broken = false;
  {
    MutexLock lock(c.mu);
    broken = c.broken;
    c.closing = true;
  }
  if (!broken) {
    c.context->TryCancel();
  }
  if (c.reader.joinable()) {
    c.reader.join();
  }
  const grpc::Status end = c.stream->Finish();
  c.stream.reset();
  c.context.reset();
  c.stub.reset();
  return FromGrpc(end, c.where);
}

}  // namespace tessera
