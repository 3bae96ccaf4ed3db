// The etcd store's keys and values: see etcd_store_codec.h.
#include "store/etcd/etcd_store_codec.h"

#include <cstdio>

#include "store/etcd/proto/rows.pb.h"

namespace tessera::etcd_store {

std::string Padded(uint64_t n) {
  char buffer[24];
  std::snprintf(buffer, sizeof(buffer), "%020llu", static_cast<unsigned long long>(n));
  return buffer;
}

std::string EncodeJob(const JobRow& row) {
  etcdstore::JobValue v;
  v.set_id(row.id);
  v.set_tenant(row.tenant);
  v.set_queue(row.queue);
  v.set_name(row.name);
  v.set_idempotency_key(row.idempotency_key);
  v.set_spec_json(row.spec_json.str());
  v.set_state(row.state);
  v.set_submit_us(row.submit_us);
  v.set_start_us(row.start_us);
  v.set_end_us(row.end_us);
  v.set_attempts(row.attempts);
  v.set_preemptions(row.preemptions);
  v.set_exit_code(row.exit_code);
  v.set_reason(row.reason);
  v.set_placement_json(row.placement_json);
  v.set_progress_us(row.progress_us);
  return v.SerializeAsString();
}

std::optional<JobRow> DecodeJob(std::string_view bytes) {
  etcdstore::JobValue v;
  if (!v.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return std::nullopt;
  }
  JobRow row;
  row.id = v.id();
  row.tenant = v.tenant();
  row.queue = v.queue();
  row.name = v.name();
  row.idempotency_key = v.idempotency_key();
  row.spec_json = v.spec_json();
  row.state = v.state();
  row.submit_us = v.submit_us();
  row.start_us = v.start_us();
  row.end_us = v.end_us();
  row.attempts = v.attempts();
  row.preemptions = v.preemptions();
  row.exit_code = v.exit_code();
  row.reason = v.reason();
  row.placement_json = v.placement_json();
  row.progress_us = v.progress_us();
  return row;
}

std::string EncodeUsage(const UsageRow& row) {
  etcdstore::UsageValue v;
  v.set_job(row.job);
  v.set_tenant(row.tenant);
  v.set_queue(row.queue);
  v.set_start_us(row.start_us);
  v.set_end_us(row.end_us);
  v.set_gpu_milli(row.gpu_milli);
  v.set_used_gpu_milli(row.used_gpu_milli);
  return v.SerializeAsString();
}

std::optional<UsageRow> DecodeUsage(std::string_view bytes) {
  etcdstore::UsageValue v;
  if (!v.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return std::nullopt;
  }
  return UsageRow{v.job(),    v.tenant(),    v.queue(),         v.start_us(),
                  v.end_us(), v.gpu_milli(), v.used_gpu_milli()};
}

std::string EncodeToken(const TokenRow& row) {
  etcdstore::TokenValue v;
  v.set_hash(row.hash);
  v.set_role(row.role);
  v.set_tenant(row.tenant);
  v.set_name(row.name);
  v.set_created_us(row.created_us);
  v.set_user(row.user);
  return v.SerializeAsString();
}

std::optional<TokenRow> DecodeToken(std::string_view bytes) {
  etcdstore::TokenValue v;
  if (!v.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return std::nullopt;
  }
  return TokenRow{v.hash(), v.role(), v.tenant(), v.name(), v.created_us(), v.user()};
}

std::string EncodeMarker(const Marker& marker) {
  etcdstore::CommitMarker v;
  v.set_nonce(marker.nonce);
  v.set_next_usage_seq(marker.next_usage_seq);
  return v.SerializeAsString();
}

std::optional<Marker> DecodeMarker(std::string_view bytes) {
  etcdstore::CommitMarker v;
  if (!v.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return std::nullopt;
  }
  return Marker{v.nonce(), v.next_usage_seq() == 0 ? 1 : v.next_usage_seq()};
}

uint64_t UsageSeq(std::string_view key) {
  const size_t slash = key.rfind('/');
  if (slash == std::string_view::npos || slash + 1 >= key.size()) {
    return 0;
  }
  uint64_t seq = 0;
  for (char c : key.substr(slash + 1)) {
    if (c < '0' || c > '9') {
      return 0;
    }
    seq = seq * 10 + static_cast<uint64_t>(c - '0');
  }
  return seq;
}

}  // namespace tessera::etcd_store
