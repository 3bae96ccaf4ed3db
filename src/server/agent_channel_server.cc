#include "base/mutex.h"
#include "server/agent_channel_server.h"

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <iostream>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

#include "api/agent_channel.grpc.pb.h"
#include "api/agent_channel_codec.h"
#include "metrics/exposition.h"
#include "server/controller.h"

namespace tessera {
namespace {

using channel::AgentMessage;
using channel::ControllerMessage;

class Stream;

// What a stream's reactor shares with the workers and Push. The reactor may be gone (its
// OnDone ran) while a worker still holds this; `reactor` is then null.
struct StreamState {
  Mutex mu;
  Stream* reactor GUARDED_BY(mu) = nullptr;
  std::deque<ControllerMessage> out GUARDED_BY(mu);  // front: being written when `writing`
  bool writing GUARDED_BY(mu) = false;
  // A read is outstanding, or a worker handles what it read.
  bool reading GUARDED_BY(mu) = true;
  // No more reads or writes are started; Finish when idle.
  bool closing GUARDED_BY(mu) = false;
  bool finished GUARDED_BY(mu) = false;
  grpc::Status finish_status GUARDED_BY(mu) = grpc::Status::OK;
  // Not guarded: `peer` and `authorization` are set before the first read, the rest by
  // the hello (by a worker, before any other message of the stream is handled); a
  // stream's messages are handled one at a time.
  std::string node;
  std::string agent_id;
  std::string authorization;
  std::string peer;
  bool greeted = false;
  bool installed = false;  // the node's stream (in Impl::streams)
};

struct Work {
  std::shared_ptr<StreamState> state;
  AgentMessage message;
  std::chrono::steady_clock::time_point received = std::chrono::steady_clock::now();
};

}  // namespace

struct AgentChannelServer::Impl final : channel::AgentChannel::CallbackService {
  AgentChannelOptions options;
  Controller* controller = nullptr;
  std::unique_ptr<grpc::Server> server;
  int port = 0;

  Mutex work_mu;
  CondVar work_cv;
  std::deque<Work> work GUARDED_BY(work_mu);
  bool stopping GUARDED_BY(work_mu) = false;
  std::vector<std::thread> workers;  // started by Start, joined by Stop

  mutable Mutex streams_mu;
  // node -> its stream
  std::map<std::string, std::shared_ptr<StreamState>> streams GUARDED_BY(streams_mu);
  std::atomic<uint64_t> pushes{0};
  // Arrival of an agent's message to its answer (the wait for a worker and the durable
  // commit included).
  Histogram answer_seconds{
      {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}};

  grpc::ServerBidiReactor<AgentMessage, ControllerMessage>* Connect(
      grpc::CallbackServerContext* context) override;

  void Enqueue(Work w) {
    {
      MutexLock lock(work_mu);
      work.push_back(std::move(w));
    }
    work_cv.NotifyOne();
  }
  void WorkerLoop();
  void Handle(Work& w);
  // The hello: the credential's node must be the one named.
  Status Greet(StreamState& s, const AgentMessage& m);
  // Makes `s` its node's stream, ending the one it replaces.
  void Install(const std::shared_ptr<StreamState>& s);
  void Answer(const std::shared_ptr<StreamState>& s, uint64_t ack,
              const StatusOr<HeartbeatResponse>& answer);
  void Forget(const std::shared_ptr<StreamState>& s) {
    MutexLock lock(streams_mu);
    auto it = streams.find(s->node);
    if (it != streams.end() && it->second == s) {
      streams.erase(it);
    }
  }
};

namespace {

grpc::Status ToGrpc(const Status& s) {
  switch (s.code()) {
    case StatusCode::kInvalidArgument:
      return {grpc::StatusCode::INVALID_ARGUMENT, s.message()};
    case StatusCode::kPermissionDenied:
      return {grpc::StatusCode::PERMISSION_DENIED, s.message()};
    case StatusCode::kUnauthenticated:
      return {grpc::StatusCode::UNAUTHENTICATED, s.message()};
    case StatusCode::kUnavailable:
      return {grpc::StatusCode::UNAVAILABLE, s.message()};
    default:
      return {grpc::StatusCode::INTERNAL, s.message()};
  }
}

class Stream final : public grpc::ServerBidiReactor<AgentMessage, ControllerMessage> {
 public:
  Stream(AgentChannelServer::Impl* owner, grpc::CallbackServerContext* context)
      : owner_(owner), state_(std::make_shared<StreamState>()) {
    {
      MutexLock lock(state_->mu);  // not shared yet; for the analysis
      state_->reactor = this;
    }
    state_->peer = context->peer();
    const auto& metadata = context->client_metadata();
    if (auto it = metadata.find("authorization"); it != metadata.end()) {
      state_->authorization.assign(it->second.data(), it->second.size());
    }
    StartRead(&in_);
  }

  // Queues a message; starts writing it unless a write is in flight.
  static void Send(const std::shared_ptr<StreamState>& s, ControllerMessage m) {
    Stream* start = nullptr;
    const ControllerMessage* front = nullptr;
    {
      MutexLock lock(s->mu);
      if (s->reactor == nullptr || s->closing) {
        return;
      }
      s->out.push_back(std::move(m));
      if (!s->writing) {
        s->writing = true;
        start = s->reactor;
        front = &s->out.front();  // deque: stays put while others are appended
      }
    }
    if (start != nullptr) {
      start->StartWrite(front);
    }
  }

  // Ends the stream with `status` once nothing is in flight.
  static void Close(const std::shared_ptr<StreamState>& s, grpc::Status status) {
    Finishing finish;
    {
      MutexLock lock(s->mu);
      if (!s->closing) {
        s->closing = true;
        s->finish_status = std::move(status);
      }
      finish = TakeFinish(*s);
    }
    finish.Run();
  }

  // A worker is done with the message read: read the next one, or finish.
  static void Resume(const std::shared_ptr<StreamState>& s) {
    Finishing finish;
    Stream* r = nullptr;
    {
      MutexLock lock(s->mu);
      if (s->closing || s->reactor == nullptr) {
        s->reading = false;
        finish = TakeFinish(*s);
      } else {
        r = s->reactor;
      }
    }
    finish.Run();
    if (r != nullptr) {
      r->StartRead(&r->in_);
    }
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      {
        MutexLock lock(state_->mu);
        state_->reading = false;
      }
      Close(state_, grpc::Status::OK);
      return;
    }
    owner_->Enqueue(Work{state_, in_});
  }

  void OnWriteDone(bool ok) override {
    Finishing finish;
    const ControllerMessage* front = nullptr;
    {
      MutexLock lock(state_->mu);
      state_->out.pop_front();
      if (!ok) {
        state_->closing = true;
      }
      if (state_->closing || state_->out.empty()) {
        state_->writing = false;
        finish = TakeFinish(*state_);
      } else {
        front = &state_->out.front();
      }
    }
    finish.Run();
    if (front != nullptr) {
      StartWrite(front);
    }
  }

  void OnCancel() override { Close(state_, grpc::Status::CANCELLED); }

  void OnDone() override {
    {
      MutexLock lock(state_->mu);
      state_->reactor = nullptr;
    }
    owner_->Forget(state_);
    delete this;
  }

 private:
  // A Finish to call once the stream's lock is let go of (none when `reactor` is null).
  struct Finishing {
    Stream* reactor = nullptr;
    grpc::Status status;
    void Run() {
      if (reactor != nullptr) {
        reactor->Finish(status);
      }
    }
  };
  // The stream is to finish now when it is closing and idle: marked finished, and the
  // Finish to call returned.
  static Finishing TakeFinish(StreamState& s) REQUIRES(s.mu) {
    if (!s.closing || s.reading || s.writing || s.finished || s.reactor == nullptr) {
      return {};
    }
    s.finished = true;
    s.out.clear();
    return {s.reactor, s.finish_status};
  }

  AgentChannelServer::Impl* owner_;
  std::shared_ptr<StreamState> state_;
  AgentMessage in_;
};

}  // namespace

grpc::ServerBidiReactor<AgentMessage, ControllerMessage>* AgentChannelServer::Impl::Connect(
    grpc::CallbackServerContext* context) {
  return new Stream(this, context);
}

void AgentChannelServer::Impl::WorkerLoop() {
  MutexLock lock(work_mu);
  while (true) {
    work_cv.Wait(work_mu, [this]() REQUIRES(work_mu) { return stopping || !work.empty(); });
    if (work.empty()) {
      return;
    }
    Work w = std::move(work.front());
    work.pop_front();
    lock.Unlock();
    Handle(w);
    lock.Lock();
  }
}

Status AgentChannelServer::Impl::Greet(StreamState& s, const AgentMessage& m) {
  TESSERA_ASSIGN_OR_RETURN(std::string node, options.authenticate(s.authorization, s.peer));
  if (node != m.node()) {
    return PermissionDeniedError("this credential belongs to node '" + node + "', not '" +
                                 m.node() + "'");
  }
  if (m.agent_id().empty()) {
    return InvalidArgumentError("the hello names no agent");
  }
  s.node = m.node();
  s.agent_id = m.agent_id();
  s.greeted = true;
  return Status::Ok();
}

void AgentChannelServer::Impl::Handle(Work& w) {
  StreamState& s = *w.state;
  HeartbeatRequest request;
  if (!s.greeted) {
    if (Status greeted = Greet(s, w.message); !greeted.ok()) {
      Stream::Close(w.state, ToGrpc(greeted));
      Stream::Resume(w.state);
      return;
    }
  } else {
    StatusOr<HeartbeatRequest> r =
        w.message.has_heartbeat()
            ? FromProto(w.message.heartbeat())
            : StatusOr<HeartbeatRequest>(InvalidArgumentError("heartbeat: is required"));
    if (r.ok() && (r->node != s.node || r->agent_id != s.agent_id)) {
      r = PermissionDeniedError("a heartbeat for node '" + r->node + "' on the stream of '" +
                                s.node + "'");
    }
    if (!r.ok()) {
      Stream::Close(w.state, ToGrpc(r.status()));
      Stream::Resume(w.state);
      return;
    }
    request = std::move(r).value();
  }
  request.node = s.node;
  request.agent_id = s.agent_id;
  controller->CountForeignReports(s.node, request.tasks);
  StatusOr<HeartbeatResponse> answer = controller->Heartbeat(request);
  if (!s.installed && answer.ok() && !answer->reregister) {
    Install(w.state);  // the controller knows this agent: pushes for its node go here
  }
  Answer(w.state, w.message.seq(), answer);
  answer_seconds.Observe(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - w.received).count());
  Stream::Resume(w.state);
}

void AgentChannelServer::Impl::Install(const std::shared_ptr<StreamState>& s) {
  s->installed = true;
  std::shared_ptr<StreamState> replaced;
  {
    MutexLock lock(streams_mu);
    replaced = std::exchange(streams[s->node], s);
  }
  if (replaced != nullptr && replaced != s) {
    Stream::Close(replaced, grpc::Status(grpc::StatusCode::ABORTED, "replaced by a new stream"));
  }
}

void AgentChannelServer::Impl::Answer(const std::shared_ptr<StreamState>& s, uint64_t ack,
                                      const StatusOr<HeartbeatResponse>& answer) {
  ControllerMessage m;
  m.set_ack(ack);
  if (!answer.ok()) {
    // The store failed: the agent keeps its reports, and its node is not lost.
    m.set_error(answer.status().message());
    Stream::Send(s, std::move(m));
    return;
  }
  ToProto(answer.value(), m.mutable_commands());
  Stream::Send(s, std::move(m));
  if (answer->reregister) {
    Forget(s);
    Stream::Close(s, grpc::Status::OK);  // after the answer is written
  }
}

StatusOr<std::unique_ptr<AgentChannelServer>> AgentChannelServer::Start(AgentChannelOptions options,
                                                                        Controller& controller) {
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  impl->controller = &controller;
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
  if (!impl->options.tls_cert.empty() && !impl->options.tls_key.empty()) {
    grpc::SslServerCredentialsOptions ssl;
    ssl.pem_key_cert_pairs.push_back({impl->options.tls_key, impl->options.tls_cert});
    credentials = grpc::SslServerCredentials(ssl);
  }
  grpc::ServerBuilder builder;
  const std::string address = impl->options.host.find(':') != std::string::npos
                                  ? "[" + impl->options.host + "]"
                                  : impl->options.host;
  builder.AddListeningPort(address + ":" + std::to_string(impl->options.port), credentials,
                           &impl->port);
  builder.RegisterService(impl.get());
  builder.SetMaxReceiveMessageSize(64 << 20);
  // A dead agent's stream is noticed within seconds, not at TCP's timeout.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 10'000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10'000);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 5'000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  impl->server = builder.BuildAndStart();
  if (impl->server == nullptr || impl->port <= 0) {
    return UnavailableError("agent channel: cannot listen on " + address + ":" +
                            std::to_string(impl->options.port));
  }
  for (int i = 0; i < std::max(impl->options.workers, 1); ++i) {
    impl->workers.emplace_back([p = impl.get()] { p->WorkerLoop(); });
  }
  return std::unique_ptr<AgentChannelServer>(new AgentChannelServer(std::move(impl)));
}

AgentChannelServer::AgentChannelServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

AgentChannelServer::~AgentChannelServer() { Stop(); }

void AgentChannelServer::Stop() {
  if (impl_->server == nullptr) {
    return;
  }
  // Cancels the streams; the workers still run, to finish the ones they hold.
  impl_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  {
    MutexLock lock(impl_->work_mu);
    impl_->stopping = true;
  }
  impl_->work_cv.NotifyAll();
  for (std::thread& t : impl_->workers) {
    t.join();
  }
  impl_->workers.clear();
  impl_->server->Wait();
  impl_->server.reset();
}

int AgentChannelServer::port() const { return impl_->port; }

void AgentChannelServer::Push(const std::string& node, const HeartbeatResponse& commands) {
  std::shared_ptr<StreamState> s;
  {
    MutexLock lock(impl_->streams_mu);
    auto it = impl_->streams.find(node);
    if (it == impl_->streams.end()) {
      return;
    }
    s = it->second;
  }
  ControllerMessage m;
  ToProto(commands, m.mutable_commands());
  Stream::Send(s, std::move(m));
  impl_->pushes.fetch_add(1);
}

size_t AgentChannelServer::streams() const {
  MutexLock lock(impl_->streams_mu);
  return impl_->streams.size();
}

uint64_t AgentChannelServer::pushes() const { return impl_->pushes.load(); }

std::string AgentChannelServer::Metrics() const {
  MetricsWriter w;
  w.Family("tessera_agent_channel_streams", MetricType::kGauge,
           "Agents connected on the agent channel (streams past their hello).");
  w.Sample({}, static_cast<double>(streams()));
  w.Family("tessera_agent_channel_pushes_total", MetricType::kCounter,
           "Launches and stops pushed to agents the moment they were durable.");
  w.Sample({}, static_cast<double>(pushes()));
  w.Family("tessera_agent_channel_answer_seconds", MetricType::kHistogram,
           "From an agent's message arriving to its answer, the durable commit of its reports "
           "included.");
  w.Sample({}, impl_->answer_seconds.Read());
  return w.Take();
}

}  // namespace tessera
