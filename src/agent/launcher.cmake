# The task launcher: processes, environment, CPU affinity, cgroup v2 limits, logs,
# signals, the per-task shim (adoption, identity, device fence) and the
# checkpoint-on-preemption protocol.
set(TESSERA_LAUNCH_SOURCES
  task_launcher.cc
  task_exit_watch.cc
  task_shim.cc
  cpu_topology.cc
  cgroups.cc
  checkpoint_protocol.cc)
set(TESSERA_LAUNCH_TEST_SOURCES
  task_launcher_test.cc
  task_shim_test.cc
  cpu_topology_test.cc
  cgroups_test.cc
  checkpoint_protocol_test.cc)

list(APPEND AGENT_SOURCES ${TESSERA_LAUNCH_SOURCES})
list(APPEND AGENT_TEST_SOURCES ${TESSERA_LAUNCH_TEST_SOURCES})

# Standalone targets, so the launcher builds and tests on its own.
tessera_library(tessera_agent_launch
  SOURCES ${TESSERA_LAUNCH_SOURCES}
  DEPS tessera_base Threads::Threads)

# Real processes, each test bounded to a few seconds.
tessera_test(agent_launch_test
  SOURCES ${TESSERA_LAUNCH_TEST_SOURCES}
  DEPS tessera_agent_launch
  LABELS unit)
