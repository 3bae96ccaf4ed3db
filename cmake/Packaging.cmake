# Installing Tessera (`cmake --install BUILD [--prefix DIR]`) and its Debian package
# (`cpack -G DEB` in the build directory, or the `package` target). docs/install.md
# says what goes where and why; scripts/package-check.sh installs the package, runs a
# job through its units' command lines and purges it.
#
#   bin/tessera, bin/tesserad, bin/tessera-shim   side by side: tessera runs tesserad
#                                                 beside it, the agent tessera-shim
#   lib/tessera/libtessera_cuda_limiter.so        where the agent looks (../lib/tessera/
#                                                 from its own directory)
#   share/man/man1/tessera*.1.gz                  every command's page (`tessera man`)
#   share/doc/tessera/examples/*.yaml             the example jobs (the `tessera up` banner
#                                                 names them)
#   lib/systemd/system/tessera-{server,agent}.service, etc/tessera/{server,agent}.env
#                                                 /lib/systemd/system and /etc/tessera
#                                                 when the prefix is /usr (the package)
#
# Nothing the daemons read at run time lies elsewhere: the dashboard's files are
# compiled into tesserad (src/server/dashboard.cmake).
include(GNUInstallDirs)

option(TESSERA_INSTALL_SYSTEM_FILES "Install the systemd units and /etc/tessera" ON)

install(TARGETS tessera tesserad tessera-shim RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# Not under a multiarch directory: the agent finds it at ../lib/tessera from bin/.
if(TARGET tessera_cuda_limiter)
  install(TARGETS tessera_cuda_limiter LIBRARY DESTINATION lib/tessera)
endif()
file(GLOB TESSERA_EXAMPLE_JOBS ${PROJECT_SOURCE_DIR}/examples/*.yaml)
install(FILES ${TESSERA_EXAMPLE_JOBS} DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples)
# The public traces `tessera sim jobs` replays by name (it looks in ../share/tessera/traces
# beside its own directory), with their sources and licences (data/traces/README.md).
install(DIRECTORY ${PROJECT_SOURCE_DIR}/data/traces/
        DESTINATION ${CMAKE_INSTALL_DATADIR}/tessera/traces)

# The manual pages, from the commands' own help (`tessera man`, which asks tesserad for
# the daemons' pages), into BUILD/man, then compressed as Debian wants them.
set(TESSERA_MAN_DIR ${CMAKE_BINARY_DIR}/man)
add_custom_command(
  OUTPUT ${TESSERA_MAN_DIR}/pages.stamp
  COMMAND ${CMAKE_COMMAND} -E rm -rf ${TESSERA_MAN_DIR}
  COMMAND $<TARGET_FILE:tessera> man --out ${TESSERA_MAN_DIR}
  COMMAND sh -c "gzip -9nkf '${TESSERA_MAN_DIR}'/*.1"
  COMMAND ${CMAKE_COMMAND} -E touch ${TESSERA_MAN_DIR}/pages.stamp
  DEPENDS tessera tesserad
  COMMENT "Writing the manual pages (tessera man)"
  VERBATIM)
add_custom_target(tessera_man ALL DEPENDS ${TESSERA_MAN_DIR}/pages.stamp)
install(DIRECTORY ${TESSERA_MAN_DIR}/ DESTINATION ${CMAKE_INSTALL_MANDIR}/man1
        FILES_MATCHING PATTERN "*.1.gz")

if(TESSERA_BUILD_TESTS)
  # Every command of `tessera --help` (and of its subcommands', recursively) has a
  # page with the options its help lists, and every page renders.
  find_package(Python3 COMPONENTS Interpreter REQUIRED)
  add_test(NAME man_pages_test
           COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/packaging/man_pages_test.py
                   $<TARGET_FILE:tessera> ${TESSERA_MAN_DIR})
  set_tests_properties(man_pages_test PROPERTIES LABELS unit TIMEOUT 120
                       ENVIRONMENT PYTHONDONTWRITEBYTECODE=1)
endif()

# The units and their configuration, placed at install time: under /etc and /lib when
# the prefix is /usr (the package), else under the prefix (PREFIX/etc/tessera,
# PREFIX/lib/systemd/system, which systemd also reads for /usr/local). The units name
# the installed binaries and configuration, so they are written for the prefix in use.
if(TESSERA_INSTALL_SYSTEM_FILES)
  install(CODE "
    set(TESSERA_PACKAGING_DIR \"${PROJECT_SOURCE_DIR}/packaging\")
    set(TESSERA_PACKAGING_WORK_DIR \"${CMAKE_BINARY_DIR}/packaging\")
    set(TESSERA_INSTALL_BINDIR \"${CMAKE_INSTALL_BINDIR}\")")
  install(SCRIPT ${PROJECT_SOURCE_DIR}/packaging/install_system_files.cmake)
endif()

# The Debian package.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME tessera)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "Tessera developers")
set(CPACK_PACKAGE_CONTACT "Tessera developers")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "multi-tenant GPU cluster scheduler")
# The package's long description, below the summary (dpkg indents it).
set(CPACK_PACKAGE_DESCRIPTION
    "Tessera shares GPUs among teams fairly and safely: whole cards, MIG instances or
software shares, quotas with borrowing and lending, gangs placed on the GPU topology.
This package holds the tessera command, the controller and node agent daemons
(systemd units tessera-server and tessera-agent, configured in /etc/tessera) and the
CUDA limiter preloaded into tasks on shared GPUs.")
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "Tessera developers")
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
# gzip: fast to make and to unpack (the test pass builds and installs it).
set(CPACK_DEBIAN_COMPRESSION_TYPE gzip)
# The shared libraries' packages from dpkg-shlibdeps (dpkg-dev) where it is installed;
# else Debian 12's, named here. adduser for the maintainer scripts.
find_program(TESSERA_DPKG_SHLIBDEPS dpkg-shlibdeps)
if(TESSERA_DPKG_SHLIBDEPS)
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
  set(CPACK_DEBIAN_PACKAGE_DEPENDS "adduser")
else()
  set(CPACK_DEBIAN_PACKAGE_DEPENDS
      "adduser, libc6, libstdc++6, libgcc-s1, libgrpc++1.51, libgrpc29, libprotobuf32, libabsl20220623, libsqlite3-0, libssl3, libyaml-cpp0.7, libcpp-httplib0.11, zlib1g, libbrotli1")
endif()
# etcd for a controller store that outlives one machine; Podman, runc, catatonit and
# skopeo for jobs in container images (docs/containers.md).
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "etcd-server, podman, runc, catatonit, skopeo")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${PROJECT_SOURCE_DIR}/packaging/debian/postinst
    ${PROJECT_SOURCE_DIR}/packaging/debian/prerm
    ${PROJECT_SOURCE_DIR}/packaging/debian/postrm
    ${PROJECT_SOURCE_DIR}/packaging/debian/conffiles)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
# Installed with DESTDIR and the prefix /usr, so that the units and /etc/tessera land
# at their absolute places inside the package.
set(CPACK_SET_DESTDIR ON)
set(CPACK_INSTALL_PREFIX /usr)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
include(CPack)
