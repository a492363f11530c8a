#!/usr/bin/env bash
# `make test`'s run, once the system packages are there: three lanes at once on the
# machine's cores, each a process that mostly waits (kernels, Chromium, pip) when alone (a
# single pytest used about 0.7 of a core). The 3.11 lane starts first, while this
# environment is built (`make setup`); then:
#   3.12     the suite without the browser: the notebooks first (each runs once, in Binder's
#            environment, and leaves its executed copy in $JAXLAB_EXECUTED_NOTEBOOKS), then
#            the unit tests' files in order; on the console;
#   browser  the browser tests (one JupyterLab, one Chromium; the tutorials' tests wait for
#            the executed copies), then the docs site (it reads them), the lint, then the
#            same unit tests' files from the end (test-output/{browser,docs,lint,back}.log);
#   3.11     Python 3.11's environment and its run (test-output/py311.log), from the start.
# The two runs of the unit tests share its files as they go (tests/claims.py): each claims
# a file before it runs it, so both end together, whichever lane was quicker. Binder's
# files stay with the 3.12 lane, which builds its environment.
# A lane's log is shown when it ends (its tail where it passed); any failure fails the run.
# Usage: tools/test_lanes.sh VENV   (MAKE and JAXLAB_EXECUTED_NOTEBOOKS from make's recipe)
set -u
venv=$1
make=${MAKE:-make}
out=test-output
rm -rf "$JAXLAB_EXECUTED_NOTEBOOKS"
mkdir -p "$out"
rm -f "$out/browser-lane.status"
claims=$out/claims
rm -rf "$claims"
units=(-m "not browser" -p no:cacheprovider)

"$make" --no-print-directory py311 > "$out/py311.log" 2>&1 &
py311=$!
# This environment meanwhile (pip installs on one core: the two builds overlap).
if ! "$make" --no-print-directory setup; then
  wait "$py311"
  echo "jaxlab: the environment $venv was not built" >&2
  exit 1
fi

(
  "$venv/bin/python" -m pytest tests/browser -m browser -p no:cacheprovider --durations=10 \
    > "$out/browser.log" 2>&1
  browser=$?
  "$make" --no-print-directory docs > "$out/docs.log" 2>&1
  docs=$?
  "$make" --no-print-directory lint > "$out/lint.log" 2>&1
  lint=$?
  # (it collects only the files not claimed yet; exit status 5: none was left)
  JAXLAB_TEST_CLAIMS=$claims JAXLAB_TEST_CLAIMS_SIDE=back \
    "$venv/bin/python" -m pytest "${units[@]}" --durations=10 > "$out/back.log" 2>&1
  back=$?
  [ "$back" -eq 5 ] && back=0
  echo "$browser $docs $lint $back" > "$out/browser-lane.status"
) &
lane=$!

JAXLAB_TEST_CLAIMS=$claims JAXLAB_TEST_CLAIMS_SIDE=front \
  "$venv/bin/python" -m pytest "${units[@]}" --durations=25
unit=$?

show() {  # show NAME LOG STATUS
  echo "== $1 ($2)"
  if [ "$3" -eq 0 ]; then tail -n 15 "$2"; else cat "$2"; fi
}
wait "$lane"
read -r browser docs lint back < "$out/browser-lane.status" || {
  browser=1 docs=1 lint=1 back=1
}
show "browser tests" "$out/browser.log" "$browser"
show "docs" "$out/docs.log" "$docs"
show "lint" "$out/lint.log" "$lint"
show "the unit tests' files from the end" "$out/back.log" "$back"
wait "$py311"
py311=$?
show "Python 3.11" "$out/py311.log" "$py311"
echo "jaxlab: exit status of the 3.12 suite $unit, browser $browser, docs $docs, lint $lint," \
  "the suite's files from the end $back, 3.11 $py311"
for status in "$unit" "$browser" "$docs" "$lint" "$back" "$py311"; do
  [ "$status" -eq 0 ] || exit 1
done
