# Library files compiled on their own in unity builds (TESSERA_UNITY_LIBS): each defines
# a file-local name (in an anonymous namespace) that another file of its library
# defines too, or would be read differently after one (an overload made ambiguous), or
# holds a type of the anonymous namespace in a class that is not in it (GCC's
# -Wsubobject-linkage, raised for any file that is included). Paths from the repository
# root. Renaming the clashing helpers takes a file off the list.
set(TESSERA_UNITY_ALONE
  src/cli/run_command.cc
  src/cli/slurm_script.cc
  src/cli/store_command.cc
  src/cli/top_command.cc
  src/server/agent_channel_server.cc
  src/server/known_nodes.cc
  src/server/scenarios/fgd_controller_replay.cc
  src/server/services/node_actions.cc
  src/store/etcd/etcd_store.cc
  src/store/sqlite_store.cc
)

# tessera_unity_alone(SOURCES...): marks those of SOURCES (relative to the calling
# folder) that are on the list above; source properties belong to the calling folder.
function(tessera_unity_alone)
  foreach(source ${ARGN})
    get_filename_component(path "${source}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    file(RELATIVE_PATH relative "${PROJECT_SOURCE_DIR}" "${path}")
    if(relative IN_LIST TESSERA_UNITY_ALONE)
      set_source_files_properties("${source}" PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
    endif()
  endforeach()
endfunction()
