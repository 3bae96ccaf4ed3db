# Run by `cmake --install` (cmake/Packaging.cmake): the systemd units and their
# configuration, for the prefix the install is made to. With the prefix /usr (the
# Debian package, or an install into /usr) they go to /lib/systemd/system and
# /etc/tessera; with another prefix to PREFIX/lib/systemd/system and PREFIX/etc/tessera.
# An existing configuration file that differs from the new one is kept, and the new
# one written beside it as FILE.dist (dpkg handles its conffiles itself: the package
# is staged afresh).
#
# Set before this runs: TESSERA_PACKAGING_DIR (packaging/ of the sources),
# TESSERA_PACKAGING_WORK_DIR (a scratch directory), TESSERA_INSTALL_BINDIR.

if(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  set(_sysconf /etc/tessera)
  set(_unitdir /lib/systemd/system)
else()
  set(_sysconf ${CMAKE_INSTALL_PREFIX}/etc/tessera)
  set(_unitdir ${CMAKE_INSTALL_PREFIX}/lib/systemd/system)
endif()
if(IS_ABSOLUTE "${TESSERA_INSTALL_BINDIR}")
  set(TESSERA_BINDIR ${TESSERA_INSTALL_BINDIR})
else()
  set(TESSERA_BINDIR ${CMAKE_INSTALL_PREFIX}/${TESSERA_INSTALL_BINDIR})
endif()
set(TESSERA_SYSCONFDIR ${_sysconf})
set(TESSERA_LIBDIR ${CMAKE_INSTALL_PREFIX}/lib/tessera)

set(_work ${TESSERA_PACKAGING_WORK_DIR})
file(REMOVE_RECURSE ${_work})
foreach(_unit tessera-server.service tessera-agent.service)
  configure_file(${TESSERA_PACKAGING_DIR}/systemd/${_unit}.in ${_work}/${_unit} @ONLY)
endforeach()
file(INSTALL ${_work}/tessera-server.service ${_work}/tessera-agent.service
     DESTINATION ${_unitdir}
     PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)

foreach(_env server.env agent.env)
  configure_file(${TESSERA_PACKAGING_DIR}/etc/${_env}.in ${_work}/${_env} @ONLY)
  set(_name ${_env})
  set(_installed "$ENV{DESTDIR}${_sysconf}/${_env}")
  if(EXISTS "${_installed}")
    file(READ "${_installed}" _old)
    file(READ "${_work}/${_env}" _new)
    if(NOT _old STREQUAL _new)
      set(_name ${_env}.dist)
      message(STATUS "Keeping ${_installed} (changed); the new one is ${_name}")
    endif()
  endif()
  file(INSTALL ${_work}/${_env} DESTINATION ${_sysconf} RENAME ${_name}
       PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ)
endforeach()
