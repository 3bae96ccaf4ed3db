#!/usr/bin/env bash
# Builds the small image the container tests and benchmarks run, with Debian's tools
# only, and pushes it to a registry: busybox-static (sh and the usual tools), bash-static
# as /bin/bash (Tessera's batch wrapper), and an /etc/os-release of its own, so that a
# task can tell it runs in the image. With PAD_MIB > 0 a second layer of that many MiB
# of random bytes makes it large (a pull benchmark).
#
# Usage: [CREDS=user:password] scripts/test-image.sh REF WORKDIR [PAD_MIB]
#   REF      where to push, e.g. 127.0.0.1:5000/test/tt:1 (plain HTTP)
#   WORKDIR  scratch space (its own Podman store, removed again)
set -euo pipefail
ref=$1
work=$2
pad_mib=${3:-0}

root="$work/rootfs"
mkdir -p "$root/bin" "$root/etc" "$root/tmp"
chmod 1777 "$root/tmp"
install -m 0755 "$(command -v busybox)" "$root/bin/busybox"
for applet in sh cat id ls sleep echo kill touch mkdir test printf wc grep env rm tr tee true \
    date head; do
  ln -sf busybox "$root/bin/$applet"
done
install -m 0755 "$(command -v bash-static)" "$root/bin/bash"
printf 'NAME="Tessera test image"\nID=tessera-test\n' > "$root/etc/os-release"
if ((pad_mib > 0)); then
  mkdir -p "$root/pad"
  head -c "$((pad_mib << 20))" /dev/urandom > "$root/pad/data"
fi

podman=(podman --root "$work/store" --runroot "/run/tessera-test-image-$$" --runtime runc
        --cgroup-manager cgroupfs --events-backend file)
tar -C "$root" -cf "$work/rootfs.tar" .
"${podman[@]}" import --quiet "$work/rootfs.tar" localhost/tessera-test:build > /dev/null
creds=()
if [[ -n "${CREDS:-}" ]]; then  # user:password for a registry that asks
  creds=(--creds "$CREDS")
fi
"${podman[@]}" push --quiet --tls-verify=false "${creds[@]}" localhost/tessera-test:build \
  "docker://$ref"
"${podman[@]}" system reset --force > /dev/null 2>&1 || true
rm -rf "$work/rootfs" "$work/rootfs.tar" "$work/store" "/run/tessera-test-image-$$"
