# The web dashboard (web/dashboard/): its files embedded into the binary, the routes
# that serve them, and its tests. Included from src/server/CMakeLists.txt.
set(TESSERA_DASHBOARD_DIR ${PROJECT_SOURCE_DIR}/web/dashboard)
# What the controller serves ("index.html" at /, the others under /dashboard/).
set(TESSERA_DASHBOARD_FILES index.html app.css app.js model.js favicon.svg)

set(_dashboard_inputs "")
foreach(_f IN LISTS TESSERA_DASHBOARD_FILES)
  list(APPEND _dashboard_inputs ${TESSERA_DASHBOARD_DIR}/${_f})
endforeach()
string(REPLACE ";" "," _dashboard_files_arg "${TESSERA_DASHBOARD_FILES}")
set(_dashboard_generated ${CMAKE_CURRENT_BINARY_DIR}/dashboard_assets.cc)
add_custom_command(
  OUTPUT ${_dashboard_generated}
  COMMAND ${CMAKE_COMMAND} -DBASE_DIR=${TESSERA_DASHBOARD_DIR} -DFILES=${_dashboard_files_arg}
          -DOUTPUT=${_dashboard_generated} -P ${CMAKE_CURRENT_LIST_DIR}/embed_assets.cmake
  DEPENDS ${_dashboard_inputs} ${CMAKE_CURRENT_LIST_DIR}/embed_assets.cmake
  COMMENT "Embedding the dashboard's web files"
  VERBATIM)

tessera_library(tessera_server_dashboard
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/dashboard.cc ${_dashboard_generated}
  DEPS PkgConfig::HTTPLIB)

# The routes on loopback: every file served as it is in web/dashboard/, with its headers.
tessera_test(dashboard_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/dashboard_test.cc
  DEPS tessera_server_dashboard Threads::Threads
  LABELS unit)
if(TARGET dashboard_test)
  target_compile_definitions(dashboard_test PRIVATE
    TESSERA_DASHBOARD_SOURCE_DIR="${TESSERA_DASHBOARD_DIR}")
endif()

# The page's pure functions (web/dashboard/model.js) under Node's built-in test runner.
if(TESSERA_BUILD_TESTS)
  find_program(TESSERA_NODE_EXECUTABLE NAMES node nodejs)
  if(TESSERA_NODE_EXECUTABLE)
    add_test(NAME dashboard_model_js
             COMMAND ${TESSERA_NODE_EXECUTABLE} --test ${TESSERA_DASHBOARD_DIR}/model.test.js)
  else()
    message(WARNING "node not found: run scripts/setup.sh. The test dashboard_model_js will fail.")
    add_test(NAME dashboard_model_js
             COMMAND sh -c "echo 'node not found: run scripts/setup.sh' >&2; exit 1")
  endif()
  set_tests_properties(dashboard_model_js PROPERTIES LABELS unit TIMEOUT 120)
endif()
