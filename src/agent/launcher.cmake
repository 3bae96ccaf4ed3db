# The task launcher: processes, environment, CPU affinity, cgroup v2 limits, logs,
# signals, the per-task shim (adoption, identity, device fence) and the
# checkpoint-on-preemption protocol.
set(TESSERA_LAUNCH_SOURCES
  task_launcher.cc
  task_exit_watch.cc
  task_state_file.cc
  task_shim.cc
  shim_plan_codec.cc
  shim_start.cc
  pty_relay.cc
  cpu_topology.cc
  cgroups.cc
  checkpoint_protocol.cc)
set(TESSERA_LAUNCH_TEST_SOURCES
  task_launcher_test.cc
  task_shim_test.cc
  task_state_file_test.cc
  shim_plan_codec_test.cc
  pty_relay_test.cc
  cpu_topology_test.cc
  cgroups_test.cc
  checkpoint_protocol_test.cc)

list(APPEND AGENT_SOURCES ${TESSERA_LAUNCH_SOURCES})
list(APPEND AGENT_TEST_SOURCES ${TESSERA_LAUNCH_TEST_SOURCES})

# Standalone targets, so the launcher builds and tests on its own.
tessera_library(tessera_agent_launch
  SOURCES ${TESSERA_LAUNCH_SOURCES}
  DEPS tessera_base Threads::Threads)

# tessera-shim: the shim as its own program, which the agent posix_spawns per task
# (agent/shim_start.h). Static where the toolchain allows, so that its exec maps one
# file and relocates nothing; tesserad finds it beside itself.
add_executable(tessera-shim task_shim_main.cc)
target_compile_options(tessera-shim PRIVATE ${TESSERA_WARNINGS})
target_link_libraries(tessera-shim PRIVATE tessera_agent_launch)
if(NOT TESSERA_SANITIZE)
  target_link_options(tessera-shim PRIVATE -static)
endif()
set_target_properties(tessera-shim PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR})

# Real processes, each test bounded to a few seconds.
tessera_test(agent_launch_test
  SOURCES ${TESSERA_LAUNCH_TEST_SOURCES}
  DEPS tessera_agent_launch
  LABELS unit)
# The launcher's own cases again, with shims spawned from tessera-shim (the agent's way)
# rather than forked.
if(TESSERA_BUILD_TESTS)
  add_dependencies(agent_launch_test tessera-shim)
  gtest_discover_tests(agent_launch_test
    TEST_PREFIX "spawned_shim."
    TEST_FILTER "LauncherTest.*:ShimAsRootTest.*:PtyLauncherTest.*"
    PROPERTIES LABELS "unit"
               ENVIRONMENT "TESSERA_TEST_SHIM_PROGRAM=${CMAKE_BINARY_DIR}/tessera-shim"
    DISCOVERY_TIMEOUT 60)
endif()
