#include "agent/heartbeat_transport.h"

#include <nlohmann/json.hpp>

#include "agent/controller_links.h"
#include "api/http_errors.h"
#include "api/json_fields.h"

namespace tessera {

HeartbeatResult HttpHeartbeatTransport::Exchange(const HeartbeatRequest& request, Micros timeout) {
  constexpr const char* kPath = "/v1/agents/heartbeat";
  HeartbeatResult result;
  links_->SetAnswerTimeout(timeout);
  StatusOr<ControllerLinks::Answer> r = links_->Post(kPath, DumpJson(ToJson(request)));
  if (!r.ok()) {
    result.answer = r.status();
    return result;
  }
  if (r->status != 200) {
    result.store_failed = r->status == 503;  // a leader that could not take the reports
    result.answer = StatusFromHttp(r->status, r->body);
    return result;
  }
  const nlohmann::json j = nlohmann::json::parse(r->body, nullptr, false);
  if (j.is_discarded()) {
    result.answer =
        InternalError(std::string("the controller's answer to ") + kPath + " is not JSON");
    return result;
  }
  result.answer = HeartbeatResponseFromJson(j);
  return result;
}

}  // namespace tessera
