// Agent: heartbeats, over the agent channel when the controller offers one, else over
// HTTP (both HeartbeatTransports, agent/heartbeat_transport.h), and the telemetry they
// carry (declared in agent.h).
#include <algorithm>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <utility>

#include "agent/agent.h"
#include "agent/agent_channel_client.h"
#include "agent/controller_links.h"

namespace tessera {
namespace {

constexpr Micros kChannelConnectTimeout = 2'000'000;
constexpr Micros kChannelRetry = 1'000'000;
constexpr Micros kChannelMaxRetry = 30'000'000;

// "https://ctl.example:7450/" -> "ctl.example"; "http://[::1]:7450" -> "::1".
std::string UrlHost(const std::string& url) {
  std::string rest = url.substr(url.find("://") == std::string::npos ? 0 : url.find("://") + 3);
  if (!rest.empty() && rest[0] == '[') {
    return rest.substr(1, rest.find(']') - 1);
  }
  return rest.substr(0, rest.find_first_of(":/"));
}

}  // namespace

Status Agent::InitTransports() {
  ControllerLinksOptions links;
  links.ca_cert = options_.ca_cert;
  links.insecure = options_.insecure;
  links.answer_timeout = AnswerBound();
  TESSERA_ASSIGN_OR_RETURN(links_, ControllerLinks::Create(options_.server_url, links));
  http_ = std::make_unique<HttpHeartbeatTransport>(links_.get());
  // The node proves itself with the credential its first registration got (kept in
  // <data_dir>/node.credential); the join token only until it has one.
  {
    std::ifstream in(options_.data_dir + "/node.credential");
    std::string credential;
    std::getline(in, credential);
    bearer_ = credential.empty() ? options_.token : credential;
    links_->SetBearer(bearer_);
  }
  channel_ = std::make_unique<AgentChannelClient>(
      [this](const HeartbeatResponse& commands) { OnPush(commands); },
      [this] {
        {
          MutexLock lock(loop_mu_);
          stream_ended_ = true;
        }
        loop_cv_.NotifyAll();
      });
  return Status::Ok();
}

Status Agent::Heartbeat() {
  HeartbeatRequest req;
  req.node = options_.node_name;
  req.agent_id = agent_id_;
  std::vector<std::pair<std::string, int64_t>> shipped;
  req.tasks = Reports(&shipped);
  req.gpus = TakeTelemetry();
  const Micros sent = SystemClock().NowMicros();
  HeartbeatResult result = Exchange(req);
  if (result.lost) {
    // Its controller went away or stopped answering (a failover, or a restart): register
    // again, from the next address, with every report kept.
    std::cerr << "tessera agent: " << result.answer.status().ToString() << "; registering again"
              << (links_->listed() > 1 ? " from the next controller" : "") << "\n";
    unsent_telemetry_ = std::move(req.gpus);
    registered_ = false;
    links_->Advance();
    return Register();
  }
  if (!result.answer.ok()) {
    if (result.store_failed) {
      // A controller whose store failed takes no reports but is alive and hands out
      // nothing: the node is not lost, so its tasks need not fence themselves.
      Renew(sent);
    }
    unsent_telemetry_ = std::move(req.gpus);  // goes with the next heartbeat
    return result.answer.status();
  }
  HeartbeatResponse resp = std::move(result.answer).value();
  if (resp.reregister) {
    // This controller did not take the reports (it restarted, or lost this agent):
    // keep every one of them for the registration.
    registered_ = false;
    return Register();
  }
  Renew(sent);
  if (options_.heartbeat_interval <= 0 && resp.heartbeat_interval_ms > 0) {
    interval_ = resp.heartbeat_interval_ms * 1000;  // the controller paces its fleet
  }
  {
    MutexLock lock(mu_);
    Delivered(shipped, req.tasks);
  }
  Apply(resp);
  return Status::Ok();
}

Micros Agent::AnswerBound() const {
  // The controller answers once the reports are durable, which takes a commit.
  return std::clamp<Micros>(3 * interval_, 3'000'000, 10'000'000);
}

std::string Agent::controller() const { return links_->current(); }

HeartbeatResult Agent::Exchange(const HeartbeatRequest& request) {
  HeartbeatTransport& transport =
      UseChannel() ? static_cast<HeartbeatTransport&>(*channel_) : *http_;
  return transport.Exchange(request, AnswerBound());
}

bool Agent::UseChannel() {
  if (channel_port_ <= 0) {
    return false;
  }
  if (channel_->open()) {
    return true;
  }
  const Micros now = clock_->NowMicros();
  if (now < channel_retry_at_) {
    return false;
  }
  // Retried sooner after a stream that broke than after one that could not be opened.
  channel_backoff_ = std::clamp<Micros>(channel_backoff_ * 2, kChannelRetry, kChannelMaxRetry);
  channel_retry_at_ = now + channel_backoff_;
  // The channel of the controller that took the registration.
  const std::string& controller = links_->current();
  AgentChannelTarget target;
  target.host = UrlHost(controller);
  target.port = static_cast<int>(channel_port_);
  target.credential = bearer_;
  target.tls = controller.rfind("https://", 0) == 0;
  if (target.tls && options_.insecure) {
    if (channel_error_.empty()) {
      channel_error_ = "unverified";
      std::cerr << "tessera agent: the agent channel verifies the controller's certificate, "
                   "which --insecure does not: heartbeats go over HTTP\n";
    }
    return false;
  }
  if (target.tls && !options_.ca_cert.empty()) {
    std::ifstream in(options_.ca_cert);
    target.ca_cert_pem.assign(std::istreambuf_iterator<char>(in), {});
  }
  target.node = options_.node_name;
  target.agent_id = agent_id_;
  StatusOr<HeartbeatResponse> hello = channel_->Open(target, kChannelConnectTimeout);
  if (!hello.ok()) {
    if (channel_error_ != hello.status().ToString()) {
      channel_error_ = hello.status().ToString();
      std::cerr << "tessera agent: " << channel_error_ << "; heartbeats go over HTTP\n";
    }
    return false;
  }
  channel_error_.clear();
  channel_backoff_ = 0;
  if (hello->reregister) {
    (void)channel_->Close();
    return false;  // the HTTP heartbeat hears it too, and the agent registers again
  }
  OnPush(hello.value());
  return true;
}

void Agent::Apply(const HeartbeatResponse& commands) {
  for (const TaskLaunch& l : commands.launch) {
    Launch(l);
  }
  for (const TaskStop& s : commands.stop) {
    StopTask(s);
  }
}

void Agent::OnPush(const HeartbeatResponse& commands) {
  Apply(commands);
  if (!commands.launch.empty()) {
    ReportSoon();  // that it runs, or why it could not start
  }
}

void Agent::ReportSoon() {
  {
    MutexLock lock(loop_mu_);
    report_now_ = true;
  }
  loop_cv_.NotifyAll();
}

void Agent::WatchExits() {
  while (true) {
    {
      MutexLock lock(loop_mu_);
      if (stopping_) {
        return;
      }
    }
    if (launcher_->WaitForExit(1000)) {
      ReportSoon();
    }
  }
}

std::vector<GpuTelemetry> Agent::TakeTelemetry() {
  if (options_.telemetry_interval <= 0) {
    return {};
  }
  const Micros now = clock_->NowMicros();
  if (telemetry_read_ && now - telemetry_at_ < options_.telemetry_interval) {
    return std::exchange(unsent_telemetry_, {});
  }
  telemetry_read_ = true;
  telemetry_at_ = now;
  StatusOr<std::vector<GpuTelemetry>> sample = [&] {
    MutexLock lock(mu_);  // the backend has one caller at a time
    return backend_->ReadTelemetry();
  }();
  if (!sample.ok()) {
    if (telemetry_errors_.insert(sample.status().ToString()).second) {
      std::cerr << "tessera agent: reading GPU telemetry: " << sample.status().ToString() << "\n";
    }
    return std::exchange(unsent_telemetry_, {});
  }
  unsent_telemetry_.clear();
  return std::move(sample).value();
}

}  // namespace tessera
