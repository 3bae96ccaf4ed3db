#!/usr/bin/env bash
# Installs everything Tessera needs to build and test, from Debian's archive.
# Safe to run again: it installs only what is missing.
set -euo pipefail

packages=(
  build-essential g++ cmake ninja-build pkg-config ccache
  lld  # the ci and asan-ubsan presets link with it: a fifth of GNU ld's time per test binary
  libgtest-dev libgmock-dev libbenchmark-dev
  nlohmann-json3-dev libcli11-dev libyaml-cpp-dev
  libsqlite3-dev libcpp-httplib-dev libssl-dev zlib1g-dev libbrotli-dev
  libgrpc++-dev libabsl-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
  clang libclang-rt-14-dev
  prometheus chromium nodejs python3
  etcd-server etcd-client openssl
  # the Debian package and its manual pages (cmake/Packaging.cmake, scripts/package-check.sh)
  dpkg-dev file groff-base man-db adduser
  # the documentation site (scripts/docs-check.sh)
  mkdocs
  # jobs in container images: Podman with runc and catatonit as PID 1 (agent/runtime/), skopeo
  # for the size of a pull (its progress), and
  # what their tests use: a loopback registry and busybox for a test image
  podman runc catatonit skopeo docker-registry busybox-static bash-static
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

sudo=""
if [[ $(id -u) -ne 0 ]]; then
  sudo="sudo"
fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
