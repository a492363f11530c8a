#!/usr/bin/env bash
# Print the command of a working Python interpreter, found by running candidates
# (a pyenv shim can be on PATH and still fail).
#   tools/find_python.sh        python3.12 if it runs, else python3 if it is >= 3.11
#   tools/find_python.sh 3.11   an interpreter of exactly that minor, or nothing (exit 1)
set -u
want=${1:-}

runs() {  # runs MINOR CMD...: the command runs and is that minor (or >= 3.11 if MINOR is empty)
  local minor=$1; shift
  local got
  got=$("$@" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null) || return 1
  if [ -n "$minor" ]; then [ "$got" = "$minor" ]; else
    "$@" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; fi
}

try_minor() {  # try_minor MINOR: print a working interpreter of that minor
  local minor=$1
  if runs "$minor" "python$minor"; then command -v "python$minor"; return 0; fi
  if command -v pyenv >/dev/null 2>&1; then
    local v
    for v in $(pyenv versions --bare 2>/dev/null | grep -E "^${minor//./\\.}\.[0-9]+$" | sort -rV); do
      local p
      p="$(pyenv root)/versions/$v/bin/python$minor"
      if runs "$minor" "$p"; then echo "$p"; return 0; fi
    done
  fi
  return 1
}

if [ -n "$want" ]; then
  try_minor "$want"
  exit $?
fi
try_minor 3.12 && exit 0
if runs "" python3; then
  python3 -c 'import sys; print(sys.executable)'
  exit 0
fi
echo "jaxlab needs Python >= 3.11 (python3.12 preferred); none was found on PATH." >&2
exit 1
