# Two precompiled headers, one per set of compile flags (GCC uses a PCH only when the
# flags that shape it match): tessera_pch_lib for libraries (the build type's
# optimisation) and tessera_pch_test for tests (TESSERA_TEST_COMPILE_OPTIONS, with
# GoogleTest). Every library and test reuses one of them (REUSE_FROM), so each is
# compiled once. Only third-party and standard headers go in: a project header here
# would rebuild everything whenever it changed. The exception: the tests that link the
# server (tessera_pch_server_test) also get the controller's and the HTTP server's
# headers, most of what each of their files parses (2.5 s of CPU per file), and the
# end-to-end tests (tessera_pch_e2e) cpp-httplib's. PCH is on
# only in the one-shot builds (ci, asan-ubsan presets), where nothing is rebuilt.
set(TESSERA_PCH_COMMON
  <algorithm> <atomic> <chrono> <cstdint> <functional> <map> <memory> <mutex> <optional>
  <set> <sstream> <string> <string_view> <thread> <unordered_map> <utility> <vector>
  <nlohmann/json.hpp>)

# tessera_use_pch(TARGET PCH_TARGET): TARGET's C++ files include PCH_TARGET's header.
function(tessera_use_pch target pch)
  if(TESSERA_PCH AND TARGET ${pch})
    target_precompile_headers(${target} REUSE_FROM ${pch})
  endif()
endfunction()

if(TESSERA_PCH)
  set(_pch_source "${CMAKE_CURRENT_BINARY_DIR}/tessera_pch_empty.cc")
  file(WRITE "${_pch_source}" "// The translation unit that builds a precompiled header.\n")
  add_library(tessera_pch_lib OBJECT "${_pch_source}")
  target_compile_options(tessera_pch_lib PRIVATE ${TESSERA_WARNINGS})
  target_link_libraries(tessera_pch_lib PUBLIC nlohmann_json::nlohmann_json)
  target_precompile_headers(tessera_pch_lib PRIVATE ${TESSERA_PCH_COMMON})
  if(TESSERA_BUILD_TESTS)
    add_library(tessera_pch_test OBJECT "${_pch_source}")
    target_compile_options(tessera_pch_test PRIVATE ${TESSERA_WARNINGS}
                                                    ${TESSERA_TEST_COMPILE_OPTIONS})
    target_link_libraries(tessera_pch_test PUBLIC nlohmann_json::nlohmann_json GTest::gtest)
    target_precompile_headers(tessera_pch_test PRIVATE ${TESSERA_PCH_COMMON}
                                                       <gtest/gtest.h>)
    add_library(tessera_pch_server_test OBJECT "${_pch_source}")
    target_compile_options(tessera_pch_server_test PRIVATE ${TESSERA_WARNINGS}
                                                           ${TESSERA_TEST_COMPILE_OPTIONS})
    target_link_libraries(tessera_pch_server_test PUBLIC tessera_server GTest::gtest)
    target_precompile_headers(tessera_pch_server_test PRIVATE ${TESSERA_PCH_COMMON}
                              <gtest/gtest.h> <server/controller.h> <server/http/server.h>)
    # The end-to-end tests (tests/e2e): one file each, and each parses cpp-httplib (with
    # its OpenSSL headers) and GoogleTest, 5 to 9 s of CPU a file before its own code.
    add_library(tessera_pch_e2e OBJECT "${_pch_source}")
    target_compile_options(tessera_pch_e2e PRIVATE ${TESSERA_WARNINGS}
                                                   ${TESSERA_TEST_COMPILE_OPTIONS})
    target_link_libraries(tessera_pch_e2e PUBLIC PkgConfig::HTTPLIB
                          nlohmann_json::nlohmann_json GTest::gtest)
    target_precompile_headers(tessera_pch_e2e PRIVATE ${TESSERA_PCH_COMMON} <gtest/gtest.h>
                              <httplib.h>)
  endif()
endif()
