#!/usr/bin/env bash
# Make sure a system program exists; install its Debian package when we may.
#   tools/ensure_system.sh dot        Graphviz's dot (package graphviz)
#   tools/ensure_system.sh chromium   Debian's Chromium for the browser tests
#   tools/ensure_system.sh venv PY    venv and ensurepip for interpreter PY (Debian splits
#                                     them off into python3-venv)
#   tools/ensure_system.sh compiler PY  a C compiler and PY's headers, for the optional
#                                     compiled part of key tracking (jaxlab/keys/_hot.c)
set -u
what=$1
case "$what" in
  venv) py=$2; probe() { "$py" -c 'import ensurepip, venv' >/dev/null 2>&1; }
       minor=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
       pkg="python3-venv python${minor}-venv"
       hint="install the venv module for $py: 'sudo apt-get install python3-venv'" ;;
  compiler) py=$2  # a C compiler and PY's headers: key tracking's compiled hot path
       headers() { "$py" -c 'import os, sys, sysconfig
sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))'; }
       probe() { command -v cc >/dev/null 2>&1 && headers; }
       minor=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
       # only what is missing (a pyenv Python has its headers; Debian has no python3.12-dev)
       pkg="$(command -v cc >/dev/null 2>&1 || echo gcc libc6-dev) $(headers || echo "python${minor}-dev")"
       hint="key tracking then runs in Python, slower ('sudo apt-get install gcc python3-dev' builds its compiled path)" ;;
  dot) probe() { dot -V >/dev/null 2>&1; }; pkg=graphviz
       hint="install Graphviz: 'sudo apt-get install graphviz', 'brew install graphviz' or 'conda install -c conda-forge graphviz'" ;;
  chromium) probe() { [ -x /usr/lib/chromium/chromium ] || [ -x /usr/bin/chromium ]; }; pkg=chromium
       hint="install Chromium for the browser tests: 'sudo apt-get install chromium'" ;;
  *) echo "ensure_system.sh: unknown program '$what'" >&2; exit 2 ;;
esac
probe && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "jaxlab: installing Debian's $pkg ..."
  export DEBIAN_FRONTEND=noninteractive
  log=/tmp/jaxlab-apt-$what.log
  # $pkg may name several packages: split on purpose.
  # shellcheck disable=SC2086
  { apt-get update -qq && apt-get install -y -qq --no-install-recommends $pkg; } >"$log" 2>&1 \
    || { echo "jaxlab: apt-get install $pkg failed (log: $log)" >&2; exit 1; }
  probe && exit 0
fi
echo "jaxlab: '$what' is missing; $hint" >&2
exit 1
