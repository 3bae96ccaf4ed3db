#!/bin/sh
# Checks a Prometheus configuration with promtool before the scrape token exists:
# every credentials_file is pointed at an empty temporary file for the check, and its
# rule files (*-alerts.yml beside it) are checked with it.
# Usage: check_config.sh [prometheus.yml]  (default: the one beside this script)
# Exit status: promtool's; 2 when promtool or the file is missing.
set -eu
config=${1:-$(dirname "$0")/prometheus.yml}
promtool=$(command -v promtool || true)
if [ -z "$promtool" ]; then
  echo "check_config.sh: promtool not found (scripts/setup.sh installs it)" >&2
  exit 2
fi
if [ ! -r "$config" ]; then
  echo "check_config.sh: cannot read $config" >&2
  exit 2
fi
dir=$(mktemp -d "${TMPDIR:-/tmp}/tessera-promcheck.XXXXXX")
trap 'rm -rf "$dir"' EXIT
: > "$dir/token"
sed "s#credentials_file:.*#credentials_file: $dir/token#" "$config" > "$dir/prometheus.yml"
# The rule files it names are relative to it: copied beside the checked copy.
for rules in "$(dirname "$config")"/*-alerts.yml; do
  [ -r "$rules" ] && cp "$rules" "$dir/"
done
"$promtool" check config "$dir/prometheus.yml"
