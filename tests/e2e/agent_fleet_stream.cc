// AgentFleet: the agent channel's streams (gRPC's callback API), the heartbeats they
// carry, the timers and the latency histogram (see agent_fleet.h).
#include <algorithm>
#include <bit>
#include <chrono>
#include <random>

#include "agent/agent_channel_args.h"
#include "api/agent_channel_codec.h"
#include "e2e/agent_fleet_internal.h"

namespace tessera::fleet {

using channel::AgentMessage;
using channel::ControllerMessage;

namespace internal {

Micros NowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

Timers::Timers(int threads) {
  for (int i = 0; i < std::max(threads, 1); ++i) {
    threads_.emplace_back([this] { Run(); });
  }
}

Timers::~Timers() { Stop(); }

void Timers::At(Micros when, std::function<void()> f) {
  auto later = [](const Item& a, const Item& b) {
    return a.when != b.when ? a.when > b.when : a.seq > b.seq;
  };
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) {
      return;
    }
    heap_.push_back(Item{when, ++seq_, std::move(f)});
    std::push_heap(heap_.begin(), heap_.end(), later);
  }
  cv_.notify_one();
}

void Timers::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    heap_.clear();
  }
  cv_.notify_all();
  for (std::thread& t : threads_) {
    if (t.joinable()) {
      t.join();
    }
  }
  threads_.clear();
}

void Timers::Run() {
  auto later = [](const Item& a, const Item& b) {
    return a.when != b.when ? a.when > b.when : a.seq > b.seq;
  };
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    if (heap_.empty()) {
      cv_.wait(lock);
      continue;
    }
    const Micros now = NowUs();
    if (heap_.front().when > now) {
      cv_.wait_for(lock, std::chrono::microseconds(heap_.front().when - now));
      continue;
    }
    std::pop_heap(heap_.begin(), heap_.end(), later);
    std::function<void()> f = std::move(heap_.back().f);
    heap_.pop_back();
    lock.unlock();
    f();
    lock.lock();
  }
}

// One agent's stream. It deletes itself when gRPC is done with it.
class FleetStream final : public grpc::ClientBidiReactor<AgentMessage, ControllerMessage> {
 public:
  FleetStream(AgentFleet::Impl* fleet, SimAgent* agent, uint64_t epoch,
              std::shared_ptr<StreamLink> link, std::shared_ptr<grpc::Channel> channel,
              const std::string& credential, AgentMessage hello)
      : fleet_(fleet),
        agent_(agent),
        epoch_(epoch),
        link_(std::move(link)),
        channel_(std::move(channel)),
        stub_(channel::AgentChannel::NewStub(channel_)) {
    context_.AddMetadata("authorization", "Bearer " + credential);
    stub_->async()->Connect(&context_, this);
    AddHold();  // released once the stream has ended and the agent may no longer write
    {
      std::lock_guard<std::mutex> lock(link_->mu);
      link_->reactor = this;
      link_->writing = true;
      out_ = std::move(hello);
      StartWrite(&out_);
    }
    StartRead(&in_);
    StartCall();
  }

  // Requires link_->mu, with no write in flight.
  void Send(AgentMessage m) {
    out_ = std::move(m);
    StartWrite(&out_);
  }
  void Cancel() { context_.TryCancel(); }

  void OnReadDone(bool ok) override {
    if (!ok) {
      fleet_->OnStreamEnd(*agent_, epoch_);
      {
        std::lock_guard<std::mutex> lock(link_->mu);
        link_->reactor = nullptr;
        link_->queue.clear();
      }
      RemoveHold();
      return;
    }
    fleet_->OnMessage(*agent_, epoch_, in_);
    StartRead(&in_);
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard<std::mutex> lock(link_->mu);
    if (!ok || link_->reactor == nullptr || link_->queue.empty()) {
      link_->writing = false;
      if (!ok) {
        link_->queue.clear();
      }
      return;
    }
    AgentMessage next = std::move(link_->queue.front());
    link_->queue.pop_front();
    Send(std::move(next));
  }

  void OnDone(const grpc::Status&) override {
    AgentFleet::Impl* fleet = fleet_;
    delete this;
    fleet->StreamDone();
  }

 private:
  AgentFleet::Impl* fleet_;
  SimAgent* agent_;
  uint64_t epoch_;
  std::shared_ptr<StreamLink> link_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<channel::AgentChannel::Stub> stub_;
  grpc::ClientContext context_;
  ControllerMessage in_;
  AgentMessage out_;
};

bool StreamLink::Write(AgentMessage m) {
  std::lock_guard<std::mutex> lock(mu);
  if (reactor == nullptr) {
    return false;
  }
  if (writing) {
    queue.push_back(std::move(m));
    return true;
  }
  writing = true;
  reactor->Send(std::move(m));
  return true;
}

void StreamLink::Cancel() {
  std::lock_guard<std::mutex> lock(mu);
  if (reactor != nullptr) {
    reactor->Cancel();
  }
}

}  // namespace internal

using internal::NowUs;

// ---- the latency histogram ---------------------------------------------------

int LatencyHistogram::Bucket(Micros us) {
  const uint64_t v = us < 0 ? 0 : static_cast<uint64_t>(us);
  constexpr uint64_t kSub = uint64_t{1} << kSubBits;
  if (v < kSub) {
    return static_cast<int>(v);
  }
  const int k = std::bit_width(v) - 1;  // v in [2^k, 2^(k+1))
  const int shift = k - kSubBits;
  const int sub = static_cast<int>((v >> shift) - kSub);
  return std::min(kBuckets - 1, static_cast<int>(kSub) + shift * static_cast<int>(kSub) + sub);
}

double LatencyHistogram::Middle(int bucket) {
  constexpr int kSub = 1 << kSubBits;
  if (bucket < kSub) {
    return bucket;
  }
  const int shift = (bucket - kSub) / kSub;
  const int sub = (bucket - kSub) % kSub;
  const double low = static_cast<double>(static_cast<uint64_t>(kSub + sub) << shift);
  return low + static_cast<double>(uint64_t{1} << shift) / 2;
}

void LatencyHistogram::Add(Micros us) {
  counts_[static_cast<size_t>(Bucket(us))].fetch_add(1, std::memory_order_relaxed);
}

void LatencyHistogram::Reset() {
  for (auto& c : counts_) {
    c.store(0, std::memory_order_relaxed);
  }
}

uint64_t LatencyHistogram::count() const {
  uint64_t n = 0;
  for (const auto& c : counts_) {
    n += c.load(std::memory_order_relaxed);
  }
  return n;
}

double LatencyHistogram::PercentileMs(double p) const {
  std::array<uint64_t, kBuckets> snap{};
  uint64_t n = 0;
  for (size_t i = 0; i < snap.size(); ++i) {
    snap[i] = counts_[i].load(std::memory_order_relaxed);
    n += snap[i];
  }
  if (n == 0) {
    return 0;
  }
  const uint64_t rank = static_cast<uint64_t>(p * static_cast<double>(n - 1));
  uint64_t seen = 0;
  for (size_t i = 0; i < snap.size(); ++i) {
    seen += snap[i];
    if (seen > rank) {
      return Middle(static_cast<int>(i)) / 1000.0;
    }
  }
  return Middle(kBuckets - 1) / 1000.0;
}

// ---- streams -----------------------------------------------------------------

namespace {

std::minstd_rand& Rng() {
  thread_local std::minstd_rand rng(std::random_device{}());
  return rng;
}

// 75..125 % of `us`: agents that lost one controller do not all come back at once.
Micros Jitter(Micros us) {
  return us * 3 / 4 + static_cast<Micros>(Rng()() % static_cast<uint32_t>(us / 2 + 1));
}

// 0..100 % of `us`.
Micros Spread(Micros us) { return static_cast<Micros>(Rng()() % static_cast<uint32_t>(us + 1)); }

constexpr Micros kMinBackoff = 200'000;
constexpr Micros kMaxBackoff = 5'000'000;

}  // namespace

void AgentFleet::Impl::Connect(SimAgent& a) {
  if (stopping || a.registering) {
    return;
  }
  if (a.link != nullptr) {
    a.link->Cancel();
  }
  ++a.epoch;
  a.open = false;
  // As the agent: the next stream rides the connection the last one had, if it lives.
  std::shared_ptr<grpc::Channel> ch = a.channel;
  if (ch == nullptr || a.channel_at != a.channel_port) {
    grpc::ChannelArguments args = AgentChannelArguments();
    // A connection of its own, as an agent process has; gRPC would share one otherwise.
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    ch = grpc::CreateCustomChannel(host + ":" + std::to_string(a.channel_port),
                                   grpc::InsecureChannelCredentials(), args);
    a.channel_at = a.channel_port;
  }
  AgentMessage hello;
  a.next_seq = 1;
  hello.set_seq(a.next_seq++);
  hello.set_node(a.node);
  hello.set_agent_id(a.agent_id);
  a.hello_seq = hello.seq();
  a.outstanding = hello.seq();
  a.sent_at = NowUs();
  a.in_flight.clear();
  a.link = std::make_shared<internal::StreamLink>();
  {
    std::lock_guard<std::mutex> lock(live_mu);
    ++live_streams;
  }
  ++connects;
  new internal::FleetStream(this, &a, a.epoch, a.link, ch, a.credential, std::move(hello));
  a.channel = std::move(ch);  // after the new one holds the callback queue
}

void AgentFleet::Impl::RetryConnect(SimAgent& a, bool was_open) {
  if (stopping) {
    return;
  }
  Micros delay = 0;
  if (was_open) {
    // As the agent: a stream that was working comes back within a heartbeat interval,
    // which the controller sized to its fleet, so a fleet that lost its controller returns
    // at the paced rate rather than all at once.
    a.backoff = 0;
    delay = Spread(std::max(a.interval, kMinBackoff));
  } else {
    a.backoff = std::clamp<Micros>(a.backoff * 2, kMinBackoff, kMaxBackoff);
    delay = Jitter(a.backoff);
  }
  const uint64_t epoch = a.epoch;
  timers->At(NowUs() + delay, [this, &a, epoch] {
    std::lock_guard<std::mutex> lock(a.mu);
    if (a.epoch == epoch && !a.open && !a.registering) {
      Connect(a);
    }
  });
}

void AgentFleet::Impl::RetryRegistration(SimAgent& a) {
  a.backoff = std::clamp<Micros>(a.backoff * 2, kMinBackoff, kMaxBackoff);
  timers->At(NowUs() + Jitter(a.backoff), [this, &a] {
    std::lock_guard<std::mutex> lock(reg_mu);
    reg_queue.push_back(&a);
    reg_cv.notify_one();
  });
}

void AgentFleet::Impl::ReportSoon(SimAgent& a) {
  if (!a.open || a.outstanding != 0) {
    a.report_now = true;  // with the answer in flight, or the registration
    return;
  }
  ScheduleHeartbeat(a, 0);
}

void AgentFleet::Impl::ScheduleHeartbeat(SimAgent& a, Micros delay) {
  const uint64_t token = ++a.heartbeat_token;
  timers->At(NowUs() + delay, [this, &a, token] { SendHeartbeat(a, token); });
}

void AgentFleet::Impl::SendHeartbeat(SimAgent& a, uint64_t token) {
  std::lock_guard<std::mutex> lock(a.mu);
  if (token != a.heartbeat_token || !a.open || a.outstanding != 0 || stopping) {
    return;
  }
  HeartbeatRequest req;
  req.node = a.node;
  req.agent_id = a.agent_id;
  req.tasks = Reports(a);
  const Micros now = NowUs();
  if (options.telemetry_interval > 0 &&
      (a.telemetry_at == 0 || now - a.telemetry_at >= options.telemetry_interval)) {
    a.telemetry_at = now;
    StatusOr<std::vector<GpuTelemetry>> sample = a.backend->ReadTelemetry();
    if (sample.ok()) {
      req.gpus = std::move(sample).value();
    }
  }
  AgentMessage m;
  m.set_seq(a.next_seq++);
  ToProto(req, m.mutable_heartbeat());
  a.outstanding = m.seq();
  a.sent_at = now;
  a.in_flight = std::move(req.tasks);
  a.report_now = false;
  if (!a.link->Write(std::move(m))) {
    a.outstanding = 0;  // the stream has ended; its end reconnects
  }
}

void AgentFleet::Impl::OnMessage(SimAgent& a, uint64_t epoch, const ControllerMessage& m) {
  std::lock_guard<std::mutex> lock(a.mu);
  if (epoch != a.epoch || stopping) {
    return;
  }
  HeartbeatResponse commands;
  if (m.error().empty()) {
    StatusOr<HeartbeatResponse> parsed =
        m.has_commands() ? FromProto(m.commands())
                         : StatusOr<HeartbeatResponse>(InvalidArgumentError("no commands"));
    if (!parsed.ok()) {
      NoteError("a message from the controller: " + parsed.status().ToString());
      a.link->Cancel();
      return;
    }
    commands = std::move(parsed).value();
  }
  if (m.ack() == 0) {  // a push
    Apply(a, commands);
    if (!commands.launch.empty()) {
      ReportSoon(a);
    }
    return;
  }
  if (m.ack() != a.outstanding) {
    return;
  }
  const Micros now = NowUs();
  const bool hello = m.ack() == a.hello_seq;
  a.outstanding = 0;
  if (hello) {
    hello_rtt.Add(now - a.sent_at);  // the connection's set-up included
  }
  if (!m.error().empty()) {
    // The store failed: nothing was taken, but the controller is alive.
    ++store_errors;
    NoteError("the controller took no reports: " + m.error());
    a.last_contact = a.sent_at;
    if (hello) {
      a.link->Cancel();  // as the agent does: heartbeats wait for a working store
    } else {
      ScheduleHeartbeat(a, a.interval);
    }
    return;
  }
  if (commands.reregister) {
    QueueRegistration(a);
    return;
  }
  a.last_contact = a.sent_at;
  if (options.heartbeat_interval <= 0 && commands.heartbeat_interval_ms > 0) {
    a.interval = commands.heartbeat_interval_ms * 1000;  // as the agent: the fleet's pace
  }
  if (hello) {
    a.open = true;
    a.backoff = 0;
  } else {
    ++heartbeats;
    rtt.Add(now - a.sent_at);
    Acknowledge(a, a.in_flight);
    a.in_flight.clear();
  }
  Apply(a, commands);
  const bool soon = a.report_now || !commands.launch.empty();
  a.report_now = false;
  ScheduleHeartbeat(a, soon ? 0 : a.interval);
}

void AgentFleet::Impl::OnStreamEnd(SimAgent& a, uint64_t epoch) {
  ++stream_ends;
  std::lock_guard<std::mutex> lock(a.mu);
  if (epoch != a.epoch) {
    return;
  }
  const bool was_open = a.open;
  a.open = false;
  a.outstanding = 0;
  a.in_flight.clear();
  if (!a.registering) {
    RetryConnect(a, was_open);
  }
}

void AgentFleet::Impl::StreamDone() {
  std::lock_guard<std::mutex> lock(live_mu);
  --live_streams;
  live_cv.notify_all();
}

}  // namespace tessera::fleet
