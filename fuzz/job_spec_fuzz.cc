// libFuzzer target for the job-spec parsers.
//
// Feeds the input to ParseJobJson and ParseJobYaml. Neither may crash, leak, hit
// undefined behaviour or throw; and a spec either of them accepts must survive
// JobSubmissionToJson -> dump -> ParseJobJson unchanged. A broken round trip aborts,
// which libFuzzer reports as a crash with the input saved.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>

#include "api/job_codec.h"

namespace {

[[noreturn]] void Fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "job_spec_fuzz: %s\n%s\n", what, detail.c_str());
  std::abort();
}

void CheckRoundTrip(const tessera::JobSubmission& job) {
  const tessera::GpuCatalog& catalog = tessera::GpuCatalog::Default();
  std::string text;
  try {
    text = tessera::JobSubmissionToJson(job, catalog).dump();
  } catch (const std::exception& e) {
    Fail("JobSubmissionToJson(...).dump() threw", e.what());
  }
  tessera::StatusOr<tessera::JobSubmission> back = tessera::ParseJobJson(text, catalog);
  if (!back.ok()) {
    Fail("an accepted spec does not read back", back.status().ToString() + "\n" + text);
  }
  if (!(*back == job)) {
    Fail("an accepted spec reads back different", text);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const tessera::GpuCatalog& catalog = tessera::GpuCatalog::Default();
  try {
    tessera::StatusOr<tessera::JobSubmission> json = tessera::ParseJobJson(text, catalog);
    if (json.ok()) {
      CheckRoundTrip(*json);
    }
    tessera::StatusOr<tessera::JobSubmission> yaml = tessera::ParseJobYaml(text, catalog);
    if (yaml.ok()) {
      CheckRoundTrip(*yaml);
    }
  } catch (const std::exception& e) {
    Fail("a parser threw", e.what());
  }
  return 0;
}
