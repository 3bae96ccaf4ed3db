# The dashboard in headless Chromium against `tessera up` with fake GPUs. Included from
# tests/e2e/CMakeLists.txt. The screenshot goes to test-artifacts/dashboard.png in the
# build directory.
if(NOT TESSERA_BUILD_TESTS)
  return()
endif()
find_program(TESSERA_CHROMIUM_EXECUTABLE NAMES chromium chromium-browser)
if(NOT TESSERA_CHROMIUM_EXECUTABLE)
  message(WARNING "chromium not found: run scripts/setup.sh. The test dashboard_e2e_test will fail.")
endif()
add_executable(dashboard_e2e_test ${CMAKE_CURRENT_LIST_DIR}/dashboard_e2e_test.cc)
target_compile_options(dashboard_e2e_test PRIVATE ${TESSERA_WARNINGS} ${TESSERA_TEST_COMPILE_OPTIONS})
target_include_directories(dashboard_e2e_test PRIVATE ${PROJECT_SOURCE_DIR}/tests)
target_compile_definitions(dashboard_e2e_test PRIVATE
  TESSERA_BINARY="$<TARGET_FILE:tessera>"
  TESSERA_DASHBOARD_ARTIFACT="${CMAKE_BINARY_DIR}/test-artifacts/dashboard.png")
if(TESSERA_CHROMIUM_EXECUTABLE)
  target_compile_definitions(dashboard_e2e_test PRIVATE
    TESSERA_CHROMIUM="${TESSERA_CHROMIUM_EXECUTABLE}")
endif()
target_link_libraries(dashboard_e2e_test PRIVATE PkgConfig::HTTPLIB nlohmann_json::nlohmann_json
                      GTest::gtest GTest::gtest_main Threads::Threads)
add_dependencies(dashboard_e2e_test tessera)
gtest_discover_tests(dashboard_e2e_test PROPERTIES LABELS e2e TIMEOUT 400 RESOURCE_LOCK e2e DISCOVERY_TIMEOUT 60)
