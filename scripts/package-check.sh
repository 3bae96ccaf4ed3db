#!/usr/bin/env bash
# The Debian package end to end, on this machine: builds it from BUILD_DIR (cpack),
# installs it (dpkg -i), checks where its files are, what its postinst made (the
# tessera user, /var/lib/tessera) and its units (systemd-analyze verify), then runs the
# controller and an agent exactly as their installed systemd units say (ExecStart=,
# User=, Group=, EnvironmentFile=; no systemd needed), configured the way an
# administrator would (/etc/tessera/*.env: a free loopback port, fake GPUs; the join
# token copied to /etc/tessera/join.token), runs a job with the installed
# /usr/bin/tessera as a tenant, checks its output, stops both and purges the package
# (dpkg --purge), after which nothing of it may be left. Every wait is bounded; a trap
# stops the daemons and purges the package on any failure. Prints how long it took.
#
# Usage: scripts/package-check.sh BUILD_DIR      (as root, or with sudo; e.g. build/ci)
#
# It refuses to run where Tessera is installed or has left data (/etc/tessera,
# /var/lib/tessera, the tessera user): the purge would remove them.
set -euo pipefail

if [[ $# -ne 1 ]]; then
  echo "usage: $0 BUILD_DIR" >&2
  exit 2
fi
if [[ $(id -u) -ne 0 ]]; then
  if command -v sudo >/dev/null; then
    exec sudo "$0" "$@"
  fi
  echo "package-check: needs root (dpkg -i, a system user, the agent)" >&2
  exit 2
fi
build="$(realpath "$1")"
cd "$(dirname "$0")/.."
started=$SECONDS

for path in /etc/tessera /var/lib/tessera /var/lib/tessera-agent; do
  if [[ -e "$path" ]]; then
    echo "package-check: $path exists; refusing to run (the purge at the end would remove it)" >&2
    exit 2
  fi
done
if dpkg-query -W -f='${Status}' tessera 2>/dev/null | grep -q "installed"; then
  echo "package-check: the tessera package is installed; refusing to replace it" >&2
  exit 2
fi
if getent passwd tessera >/dev/null || getent group tessera >/dev/null; then
  echo "package-check: a tessera user or group exists; refusing to run" >&2
  exit 2
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/tessera-package-check.XXXXXX")"
installed=0
server_pid=""
agent_pid=""

# Stops a daemon started below: SIGTERM (as systemd would), then SIGKILL after 10 s.
stop_daemon() {  # pid
  local pid="$1"
  [[ -n "$pid" ]] || return 0
  kill -TERM "$pid" 2>/dev/null || return 0
  for _ in $(seq 1 100); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    echo "package-check: process $pid did not stop within 10 s; killing it" >&2
    kill -KILL "$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || true
}
cleanup() {
  local rc=$?
  stop_daemon "$agent_pid"
  stop_daemon "$server_pid"
  if ((installed)); then
    dpkg --purge tessera >/dev/null 2>&1 || echo "package-check: dpkg --purge tessera failed" >&2
  fi
  rm -rf "$work"
  echo "package-check: took $((SECONDS - started)) s"
  exit "$rc"
}
trap cleanup EXIT

fail() {
  echo "package-check: FAILED: $*" >&2
  for log in "$work"/server.log "$work"/agent.log; do
    if [[ -f "$log" ]]; then
      echo "--- $log:" >&2
      tail -n 40 "$log" >&2
    fi
  done
  exit 1
}
step() { echo "== $* ($((SECONDS - started)) s)"; }

step "build the package from $build"
version="$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$build/CMakeCache.txt")"
[[ -n "$version" ]] || fail "no project version in $build/CMakeCache.txt (not a configured build?)"
cmake --build "$build" --target tessera tesserad tessera-shim tessera_cuda_limiter tessera_man \
  >"$work/build.log" 2>&1 || { cat "$work/build.log" >&2; fail "building the installed targets"; }
(cd "$work" && cpack -G DEB --config "$build/CPackConfig.cmake" -B "$work/pkg") \
  >"$work/cpack.log" 2>&1 || { cat "$work/cpack.log" >&2; fail "cpack -G DEB"; }
deb="$(find "$work/pkg" -name "tessera_${version}_*.deb" | head -1)"
[[ -n "$deb" ]] || { cat "$work/cpack.log" >&2; fail "cpack made no tessera_${version}_*.deb"; }
echo "package-check: $(basename "$deb"), $(du -k "$deb" | cut -f1) KiB"

field() { dpkg-deb -f "$deb" "$1"; }
[[ "$(field Package)" == tessera ]] || fail "Package: $(field Package)"
[[ "$(field Version)" == "$version" ]] || fail "Version: $(field Version), not $version"
[[ "$(field Maintainer)" == "Tessera developers" ]] || fail "Maintainer: $(field Maintainer)"
depends="$(field Depends)"
echo "package-check: Depends: $depends"
[[ "$depends" == *adduser* && "$depends" == *libc6* ]] || fail "Depends lacks adduser or libc6"
dpkg-deb --ctrl-tarfile "$deb" | tar -x -C "$work" ./conffiles ./postinst ./prerm ./postrm \
  || fail "the control archive lacks conffiles or a maintainer script"
[[ "$(sort "$work/conffiles")" == "$(printf '%s\n' /etc/tessera/agent.env /etc/tessera/server.env)" ]] \
  || fail "conffiles: $(cat "$work/conffiles")"

step "install it (dpkg -i)"
installed=1
dpkg -i "$deb" >"$work/dpkg-install.log" 2>&1 || { cat "$work/dpkg-install.log" >&2; fail "dpkg -i"; }
for f in /usr/bin/tessera /usr/bin/tesserad /usr/bin/tessera-shim; do
  [[ -x "$f" ]] || fail "$f is not installed"
done
for f in /usr/lib/tessera/libtessera_cuda_limiter.so \
         /lib/systemd/system/tessera-server.service /lib/systemd/system/tessera-agent.service \
         /etc/tessera/server.env /etc/tessera/agent.env \
         /usr/share/man/man1/tessera.1.gz /usr/share/man/man1/tessera-submit.1.gz \
         /usr/share/man/man1/tessera-server.1.gz /usr/share/man/man1/tessera-sim-jobs.1.gz \
         /usr/share/doc/tessera/examples/train-gang.yaml \
         /usr/share/tessera/traces/README.md \
         /usr/share/tessera/traces/tiresias/60_job.csv; do
  [[ -f "$f" ]] || fail "$f is not installed"
done
[[ "$(/usr/bin/tessera --version)" == "tessera $version" ]] || fail "tessera --version: $(/usr/bin/tessera --version)"
[[ "$(/usr/bin/tesserad --version)" == "tessera $version" ]] || fail "tesserad --version"
dpkg-query -W -f='${Conffiles}\n' tessera | grep -q "/etc/tessera/server.env" \
  || fail "dpkg does not list /etc/tessera/server.env as a conffile"
if command -v systemd-analyze >/dev/null; then
  systemd-analyze verify /lib/systemd/system/tessera-server.service \
    /lib/systemd/system/tessera-agent.service || fail "systemd-analyze verify of the units"
fi
if command -v man >/dev/null; then
  [[ "$(man -w tessera-sim-jobs)" == /usr/share/man/man1/tessera-sim-jobs.1.gz ]] \
    || fail "man -w tessera-sim-jobs: $(man -w tessera-sim-jobs 2>&1)"
fi
IFS=: read -r _ _ uid gid _ home shell < <(getent passwd tessera) || fail "no tessera user"
((uid < 1000)) || fail "the tessera user is not a system user (uid $uid)"
[[ "$(getent group tessera | cut -d: -f3)" == "$gid" ]] || fail "the tessera user is not in group tessera"
[[ "$home" == /var/lib/tessera && "$shell" == /usr/sbin/nologin ]] || fail "tessera: home $home, shell $shell"
[[ "$(stat -c '%U:%G %a' /var/lib/tessera)" == "tessera:tessera 711" ]] \
  || fail "/var/lib/tessera is $(stat -c '%U:%G %a' /var/lib/tessera)"
[[ "$(stat -c '%U:%G %a' /var/lib/tessera-agent)" == "root:root 711" ]] \
  || fail "/var/lib/tessera-agent is $(stat -c '%U:%G %a' /var/lib/tessera-agent)"
[[ "$(stat -c '%U:%G %a' /etc/tessera)" == "root:tessera 750" ]] \
  || fail "/etc/tessera is $(stat -c '%U:%G %a' /etc/tessera)"

step "configure it as an administrator would"
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
grep -q '^TESSERA_SERVER_OPTS=' /etc/tessera/server.env || fail "server.env sets no TESSERA_SERVER_OPTS"
grep -q '^TESSERA_AGENT_OPTS=' /etc/tessera/agent.env || fail "agent.env sets no TESSERA_AGENT_OPTS"
sed -i "s|^TESSERA_SERVER_OPTS=.*|TESSERA_SERVER_OPTS=\"--listen 127.0.0.1:$port\"|" \
  /etc/tessera/server.env
sed -i "s|^TESSERA_AGENT_OPTS=.*|TESSERA_AGENT_OPTS=\"--server http://127.0.0.1:$port --token-file /etc/tessera/join.token --node package-check --fake-gpus 2xH100-80GB --cpu 2 --memory 4GiB\"|" \
  /etc/tessera/agent.env

# A unit's process as systemd would start it: User=, Group=, a clean environment with
# its EnvironmentFile= variables, ExecStart= with $VAR split at whitespace and ${VAR}
# substituted, in /, umask 022. Prints NUL-separated: user, group, then VAR=VALUE
# words up to an empty one, then the command's words.
unit_command() {  # unit-file
  python3 - "$1" <<'PY'
import re, shlex, sys

def env_file(path):
    values = {}
    for raw in open(path, encoding="utf-8").read().splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise SystemExit(f"{path}: not KEY=VALUE: {raw}")
        key, value = key.strip(), value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
            if raw.strip().partition("=")[2].strip().startswith('"'):
                value = re.sub(r'\\(.)', r'\1', value)
        values[key] = value
    return values

service = {}
section = ""
for raw in open(sys.argv[1], encoding="utf-8").read().splitlines():
    line = raw.strip()
    if not line or line[0] in "#;":
        continue
    if line.startswith("["):
        section = line.strip("[]")
        continue
    key, _, value = line.partition("=")
    if section == "Service":
        service.setdefault(key.strip(), []).append(value.strip())
env = {}
for path in service.get("EnvironmentFile", []):
    optional = path.startswith("-")
    try:
        env.update(env_file(path.lstrip("-")))
    except FileNotFoundError:
        if not optional:
            raise
exec_start = service["ExecStart"]
if len(exec_start) != 1 or exec_start[0][:1] in "-@:+!":
    raise SystemExit(f"ExecStart= not understood: {exec_start}")
words = []
for word in shlex.split(exec_start[0]):
    whole = re.fullmatch(r"\$([A-Za-z_][A-Za-z0-9_]*)", word)
    if whole:
        words += env.get(whole.group(1), "").split()
    else:
        words.append(re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", lambda m: env.get(m.group(1), ""), word))
user = service.get("User", ["root"])[-1]
group = service.get("Group", [""])[-1]
out = [user, group] + [f"{k}={v}" for k, v in env.items()] + [""] + words
sys.stdout.write("\0".join(out) + "\0")
PY
}

start_unit() {  # unit-name log-file; sets started_pid
  local unit="/lib/systemd/system/$1" fields user group home shell
  mapfile -d '' fields < <(unit_command "$unit") || fail "cannot read $unit"
  ((${#fields[@]} > 3)) || fail "$unit: no command"
  user="${fields[0]}"
  group="${fields[1]:-$(id -gn "$user")}"
  local i=2 envs=()
  while [[ -n "${fields[$i]}" ]]; do
    envs+=("${fields[$i]}")
    i=$((i + 1))
  done
  local cmd=("${fields[@]:$((i + 1))}")
  IFS=: read -r _ _ _ _ _ home shell < <(getent passwd "$user")
  echo "package-check: $1 as $user:$group: ${cmd[*]}"
  (
    cd /
    umask 022
    exec env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
      HOME="$home" USER="$user" LOGNAME="$user" SHELL="$shell" "${envs[@]}" \
      setpriv --reuid="$user" --regid="$group" --init-groups -- "${cmd[@]}"
  ) >"$2" 2>&1 &
  started_pid=$!
}

step "start the controller as tessera-server.service would"
grep -qx 'User=tessera' /lib/systemd/system/tessera-server.service || fail "the server's unit is not User=tessera"
grep -qx 'User=root' /lib/systemd/system/tessera-agent.service || fail "the agent's unit is not User=root"
start_unit tessera-server.service "$work/server.log"
server_pid=$started_pid
for _ in $(seq 1 200); do
  grep -q "listening on" "$work/server.log" && break
  kill -0 "$server_pid" 2>/dev/null || fail "the controller exited"
  sleep 0.1
done
grep -q "listening on http://127.0.0.1:$port" "$work/server.log" || fail "the controller did not listen on port $port within 20 s"
[[ "$(stat -c %U /proc/"$server_pid")" == tessera ]] || fail "the controller does not run as tessera"
[[ "$(stat -c '%U %a' /var/lib/tessera/admin.token)" == "tessera 600" ]] || fail "admin.token is not tessera's, 0600"
export TESSERA_SERVER="http://127.0.0.1:$port"
install -m 0600 /var/lib/tessera/join.token /etc/tessera/join.token

step "start the agent as tessera-agent.service would"
start_unit tessera-agent.service "$work/agent.log"
agent_pid=$started_pid
joined=0
for _ in $(seq 1 200); do
  if TESSERA_TOKEN_FILE=/var/lib/tessera/admin.token /usr/bin/tessera nodes 2>/dev/null | grep -Eq "^package-check +up\b"; then
    joined=1
    break
  fi
  kill -0 "$agent_pid" 2>/dev/null || fail "the agent exited"
  sleep 0.1
done
((joined)) || fail "the agent did not join within 20 s: $(TESSERA_TOKEN_FILE=/var/lib/tessera/admin.token /usr/bin/tessera nodes 2>&1)"
# The agent writes its credential (fsynced) just after the controller's answer, which is
# when the node shows up: on a loaded machine that can lag the listing by a moment.
for _ in $(seq 1 100); do
  [[ -f /var/lib/tessera-agent/node.credential ]] && break
  sleep 0.1
done
[[ -f /var/lib/tessera-agent/node.credential ]] || fail "the agent kept no node credential within 10 s of joining"

step "run a job as tenant team-a with /usr/bin/tessera"
TESSERA_TOKEN="$(TESSERA_TOKEN_FILE=/var/lib/tessera/admin.token /usr/bin/tessera token create --tenant team-a --user package-check)" \
  || fail "tessera token create"
export TESSERA_TOKEN
# shellcheck disable=SC2016  # expanded by the task's shell
job="$(cd / && /usr/bin/tessera submit --gpus 1 -- sh -c 'echo "uid=$(id -u) gpus=$CUDA_VISIBLE_DEVICES"; echo done')" \
  || fail "tessera submit"
/usr/bin/tessera wait --timeout 60s "$job" || fail "job $job did not succeed: $(/usr/bin/tessera show "$job" 2>&1)"
log="$(/usr/bin/tessera logs "$job")" || fail "tessera logs $job"
echo "package-check: job $job said: $(tr '\n' ' ' <<<"$log")"
grep -Eq '^uid=2[0-9]{5} gpus=GPU-[0-9a-fA-F-]+$' <<<"$log" \
  || fail "job $job did not run as a pooled tenant uid on one GPU: $log"
grep -qx "done" <<<"$log" || fail "job $job's output is incomplete: $log"

step "stop both (SIGTERM, as systemd would)"
for which in agent server; do
  pid_var="${which}_pid"
  pid="${!pid_var}"
  kill -TERM "$pid"
  rc=0
  for _ in $(seq 1 100); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -0 "$pid" 2>/dev/null && fail "the $which did not stop within 10 s"
  wait "$pid" || rc=$?
  printf -v "$pid_var" '%s' ""
  ((rc == 0)) || fail "the $which exited with $rc"
done
for exe in /proc/[0-9]*/exe; do
  case "$(readlink "$exe" 2>/dev/null)" in
    /usr/bin/tesserad* | /usr/bin/tessera-shim*) fail "a Tessera process is left: ${exe%/exe}" ;;
  esac
done

step "purge it (dpkg --purge)"
dpkg --purge tessera >"$work/dpkg-purge.log" 2>&1 || { cat "$work/dpkg-purge.log" >&2; fail "dpkg --purge"; }
installed=0
if grep -i "warning" "$work/dpkg-purge.log"; then
  echo "package-check: (dpkg's warnings on purging, above)"
fi
for path in /usr/bin/tessera /usr/bin/tesserad /usr/bin/tessera-shim /usr/lib/tessera \
            /etc/tessera /var/lib/tessera /var/lib/tessera-agent /usr/share/doc/tessera \
            /usr/share/tessera \
            /lib/systemd/system/tessera-server.service /lib/systemd/system/tessera-agent.service \
            /usr/share/man/man1/tessera.1.gz; do
  [[ ! -e "$path" ]] || fail "$path is left after the purge"
done
getent passwd tessera >/dev/null && fail "the tessera user is left after the purge"
getent group tessera >/dev/null && fail "the tessera group is left after the purge"
dpkg-query -W tessera >/dev/null 2>&1 && fail "dpkg still knows the tessera package"
echo "package-check: the package installs, runs a job through its units' command lines and purges cleanly"
