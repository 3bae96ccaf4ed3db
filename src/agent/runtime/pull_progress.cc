#include "agent/runtime/pull_progress.h"

#include <sys/utsname.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <utility>

namespace tessera {

StatusOr<ManifestSize> ReadManifestSize(std::string_view json, std::string_view os,
                                        std::string_view arch) {
  const nlohmann::json m = nlohmann::json::parse(json, nullptr, false);
  if (!m.is_object()) {
    return InvalidArgumentError("the registry's manifest is not a JSON object");
  }
  ManifestSize out;
  if (const auto list = m.find("manifests"); list != m.end() && list->is_array()) {
    for (const nlohmann::json& entry : *list) {
      const nlohmann::json platform = entry.value("platform", nlohmann::json::object());
      if (platform.is_object() && platform.value("os", "") == os &&
          platform.value("architecture", "") == arch && entry.value("digest", "") != "") {
        out.child_digest = entry.value("digest", "");
        return out;
      }
    }
    return out;  // no entry for this platform: Podman's pull fails and says so
  }
  const auto layers = m.find("layers");
  if (layers == m.end()) {
    if (m.contains("fsLayers")) {
      return out;  // schema 1: no sizes
    }
    return InvalidArgumentError("the registry's answer is neither a manifest nor a list");
  }
  int64_t bytes = 0;
  auto add = [&bytes](const nlohmann::json& blob) {
    if (blob.is_object() && blob.contains("size") && blob["size"].is_number_integer()) {
      bytes += std::max<int64_t>(0, blob["size"].get<int64_t>());
    }
  };
  if (layers->is_array()) {
    for (const nlohmann::json& layer : *layers) {
      add(layer);
    }
  }
  add(m.value("config", nlohmann::json()));
  out.bytes = bytes;
  return out;
}

std::string GoArch() {
  struct utsname u {};
  if (::uname(&u) != 0) {
    return "amd64";
  }
  const std::string machine = u.machine;
  if (machine == "x86_64") {
    return "amd64";
  }
  if (machine == "aarch64") {
    return "arm64";
  }
  if (machine == "i686" || machine == "i386") {
    return "386";
  }
  return machine;  // ppc64le, s390x and riscv64 are their own names
}

int64_t BytesUnder(const std::string& dir) {
  std::error_code ec;
  int64_t bytes = 0;
  for (auto it = std::filesystem::recursive_directory_iterator(
           dir, std::filesystem::directory_options::skip_permission_denied, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    std::error_code size_ec;
    if (it->is_regular_file(size_ec)) {
      const uintmax_t size = it->file_size(size_ec);
      if (!size_ec) {
        bytes += static_cast<int64_t>(size);
      }
    }
  }
  return bytes;
}

namespace {

// Decimal units as registries and Podman print them: "310 MB", "1.2 GB".
std::string Amount(int64_t bytes, bool gb) {
  char text[32];
  if (gb) {
    std::snprintf(text, sizeof text, "%.1f", static_cast<double>(bytes) / 1e9);
  } else {
    std::snprintf(text, sizeof text, "%lld", static_cast<long long>((bytes + 500'000) / 1'000'000));
  }
  return text;
}

}  // namespace

std::string PullProgressNote(const std::string& image, int64_t done, int64_t total,
                             bool unpacking) {
  const std::string head = "pulling image " + image + ": ";
  const bool gb = std::max(done, total) >= 1'000'000'000;
  const std::string unit = gb ? " GB" : " MB";
  if (unpacking) {
    return head + "unpacking" + (total > 0 ? " (" + Amount(total, gb) + unit + ")" : "");
  }
  if (total < 0) {
    return head + Amount(done, gb) + unit + " so far";
  }
  return head + Amount(std::min(done, total), gb) + " of " + Amount(total, gb) + unit;
}

PullWatch::PullWatch(std::string image, std::string tmpdir, std::function<int64_t()> total,
                     std::function<void(const std::string& note)> report,
                     std::chrono::milliseconds period)
    : image_(std::move(image)),
      tmpdir_(std::move(tmpdir)),
      report_(std::move(report)),
      period_(period),
      thread_([this, total = std::move(total)] { Run(total); }) {}

PullWatch::~PullWatch() {
  {
    MutexLock lock(mu_);
    stop_ = true;
  }
  wake_.NotifyAll();
  thread_.join();
}

void PullWatch::Run(const std::function<int64_t()>& total) {
  int64_t size = -1;
  bool asked = false;
  std::string last;
  int64_t peak = 0;
  for (;;) {
    {
      MutexLock lock(mu_);
      if (wake_.WaitFor(mu_, period_, [this]() REQUIRES(mu_) { return stop_; })) {
        return;
      }
    }
    if (!asked && total) {
      asked = true;  // only a pull still running after a period asks (most end sooner)
      size = total();
    }
    const int64_t now = BytesUnder(tmpdir_);
    // Downloaded blobs are removed once unpacked: fewer bytes than before mean that.
    const bool unpacking = (size > 0 && now >= size) || (peak > 0 && now < peak);
    peak = std::max(peak, now);
    std::string note = PullProgressNote(image_, peak, size, unpacking);
    if (note != last) {
      report_(note);
      last = std::move(note);
    }
  }
}

}  // namespace tessera
