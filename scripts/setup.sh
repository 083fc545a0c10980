#!/usr/bin/env bash
# Set up Daggers on a fresh Debian 12 machine: system services from Debian, Python packages in .venv
# (gcc builds the shared host's 0.3 MB fork client, job/shared/forkclient.c).
# Safe to run again: it installs only what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(influxdb victoria-metrics postgresql librsvg2-bin tmux default-jre-headless chromium gcc libc6-dev openssl)
missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
if ((${#missing[@]})); then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "setup: installing ${missing[*]} from Debian"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# Debian starts packaged services on install where it can; Daggers starts its own, on its own ports.
for svc in influxdb victoria-metrics postgresql; do
  command -v systemctl >/dev/null 2>&1 && systemctl stop "$svc" >/dev/null 2>&1 || true
done

PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
# What pip installed is stamped with the pyproject.toml and the interpreter it came from: a run on a checkout
# set up already (scripts/test.sh sets up before every run) skips pip (~12 core-s and ~30 s of resolving
# against the index) unless pyproject.toml changed. DAGGERS_SETUP_FORCE=1 installs again whatever the stamp.
stamp=".venv/.daggers-installed"
want="$(sha256sum pyproject.toml | cut -d' ' -f1) $(.venv/bin/python -c 'import sys; print(sys.version)')"
installed=""
if [ "${DAGGERS_SETUP_FORCE:-0}" != 1 ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  installed=yes
fi
if [ -z "$installed" ]; then
  rm -f "$stamp"
  .venv/bin/python -m pip install -q --upgrade pip
  # Installed without compiling, then compiled on every core: 25 + 16 s on a clean clone against 57 s for
  # pip's own one-file-at-a-time compile. Compiled it must be: without the .pyc files the tests ran 1,082 s
  # instead of 957 (every process compiled what it imported first, many at once). compileall's exit code is
  # not checked: some packages ship files for other Python versions that do not compile, as pip skips them.
  .venv/bin/python -m pip install -q --no-compile -e ".[dev]"
fi
.venv/bin/daggers protos build >/dev/null
# The class archive every dagger's JVM starts from (a dagger's first point ~4 s sooner, ~6 core-s less): written
# once, ~40 s of a JVM mostly on one core, so in the background while the compiling below takes the others.
archive=""
if ! .venv/bin/daggers jvm-archive --check >/dev/null; then
  .venv/bin/daggers jvm-archive >/dev/null & archive=$!
fi
# The packages' own test suites (folders test/ and tests/: pandas', numba's, numpy's, …, 2,100 files that nothing
# here imports) are left out: 26 core-s instead of 34, the suite's collection and a command's start unchanged.
if [ -z "$installed" ]; then
  .venv/bin/python -m compileall -q -j 0 -x '/tests?/' .venv/lib >/dev/null 2>&1 || true
fi
# Daggers' own modules too: a shell with PYTHONDONTWRITEBYTECODE set (as CI's) never caches them, and every
# process (each `daggers` command, dagger, Spark Python worker) compiled what it imported (~0.1 s a command).
.venv/bin/python -m compileall -q -j 0 job alerting tui web_atlas >/dev/null
if [ -n "$archive" ]; then
  wait "$archive" || { echo "setup: writing the JVM class archive failed (daggers jvm-archive)" >&2; exit 1; }
fi
echo "$want" >"$stamp"
echo "setup: done (.venv/bin/daggers is ready)"
