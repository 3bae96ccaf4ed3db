# GPU discovery for the node agent: the GpuBackend interface, the fake inventory and
# NVML loaded at run time. Included from src/agent/CMakeLists.txt; paths are relative
# to src/agent.
set(TESSERA_AGENT_GPU_SOURCES gpu_backend.cc fake_gpus.cc nvml_backend.cc nvml_topology.cc gpu_probe.cc
    gpu_sharing_config.cc)
set(TESSERA_AGENT_GPU_TEST_SOURCES gpu_backend_test.cc fake_gpus_test.cc nvml_backend_test.cc gpu_probe_test.cc
    gpu_sharing_config_test.cc)
list(APPEND AGENT_SOURCES ${TESSERA_AGENT_GPU_SOURCES})
list(APPEND AGENT_TEST_SOURCES ${TESSERA_AGENT_GPU_TEST_SOURCES})

tessera_library(tessera_agent_gpu
  SOURCES ${TESSERA_AGENT_GPU_SOURCES}
  DEPS tessera_model tessera_api ${CMAKE_DL_LIBS})

if(TESSERA_BUILD_TESTS)
  # Fake libnvidia-ml for the NVML backend's tests: the full one, and one without the
  # optional functions. Sanitizer flags come from the global compile/link options.
  foreach(_gpu_fake IN ITEMS fake_nvml fake_nvml_minimal)
    add_library(${_gpu_fake} SHARED testing/fake_nvml.cc)
    set_target_properties(${_gpu_fake} PROPERTIES
      CXX_VISIBILITY_PRESET hidden
      VISIBILITY_INLINES_HIDDEN ON)
    target_include_directories(${_gpu_fake} PRIVATE ${PROJECT_SOURCE_DIR}/src)
    target_compile_options(${_gpu_fake} PRIVATE ${TESSERA_WARNINGS})
  endforeach()
  set_target_properties(fake_nvml PROPERTIES OUTPUT_NAME nvidia-ml-fake)
  set_target_properties(fake_nvml_minimal PROPERTIES OUTPUT_NAME nvidia-ml-fake-minimal)
  target_compile_definitions(fake_nvml_minimal PRIVATE FAKE_NVML_MINIMAL)

  tessera_test(agent_gpu_test
    SOURCES ${TESSERA_AGENT_GPU_TEST_SOURCES}
    DEPS tessera_agent_gpu
    LABELS unit)
  add_dependencies(agent_gpu_test fake_nvml fake_nvml_minimal)
  # nvml_backend_test.cc and gpu_probe_test.cc find the fake libraries through these.
  # Target-wide rather than on those files: a file with definitions of its own would be
  # left out of the test's unity batch (TESSERA_UNITY_TESTS).
  target_compile_definitions(agent_gpu_test PRIVATE
    TESSERA_FAKE_NVML_PATH="$<TARGET_FILE:fake_nvml>"
    TESSERA_FAKE_NVML_MINIMAL_PATH="$<TARGET_FILE:fake_nvml_minimal>")
endif()
