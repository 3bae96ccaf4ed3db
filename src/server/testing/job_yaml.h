// Test-only: job files that the controller's tests submit. Header-only and part of no
// target: include it from *_test.cc files only.
#pragma once

namespace tessera::testing {

// One whole H100.
inline constexpr const char* kOneGpu =
    "name: one\nresources: {gpus: 1, gpu_model: H100-80GB}\ncommand: [x]\n";

}  // namespace tessera::testing
