# Controller authentication (bearer tokens kept as hashes) and per-token rate limiting.
tessera_library(tessera_server_auth
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/auth.cc ${CMAKE_CURRENT_LIST_DIR}/rate_limiter.cc
  DEPS tessera_base tessera_store OpenSSL::Crypto)

tessera_test(server_auth_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/auth_test.cc ${CMAKE_CURRENT_LIST_DIR}/rate_limiter_test.cc
  DEPS tessera_server_auth
  LABELS unit)
