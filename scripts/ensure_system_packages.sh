#!/bin/sh
# The system packages grading needs beside the venv, listed in scripts/system-packages.txt (the
# grader image, deploy/Dockerfile, installs the same list): bubblewrap (the grader contains
# kernels with it, as root or not; tests/test_bwrap.py grades as uid 65534).
# Installed with apt when run as root and missing; quiet when present; skipped otherwise (the
# tests that need a package say so when it is missing). Other systems: see README.
list="$(dirname "$0")/system-packages.txt"
missing=""
# shellcheck disable=SC2034
while read -r package command rest; do
    case "$package" in ''|'#'*) continue ;; esac
    command -v "$command" >/dev/null 2>&1 || [ -x "/usr/bin/$command" ] || missing="$missing $package"
done < "$list"
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "note: not installed:$missing (install it as root: apt-get install$missing)" >&2
    exit 0
fi
echo "installing$missing with apt-get" >&2
export DEBIAN_FRONTEND=noninteractive
# shellcheck disable=SC2086
apt-get install -y -q $missing >/dev/null || { apt-get update -q >/dev/null && apt-get install -y -q $missing >/dev/null; }
