#!/usr/bin/env bash
# Mutation testing: breaks the product one small change at a time (tests/mutation/
# mutations.toml) and runs the test suite after each; every change must make a test
# fail. The last line printed is "N/M mutations killed".
#
#   tests/mutation/run.sh                  every mutation (about an hour on 2 cores)
#   tests/mutation/run.sh ID...            only these (ids from mutations.toml)
#   tests/mutation/run.sh -j 4 --list      parallel jobs for build and ctest; list the ids
#
# It works on a copy of the source tree under build/mutation/ (the checkout is never
# modified), configured once and built incrementally; tests/mutation/mutate.py says more.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# The interpreter itself, not a wrapper that would run it as a child (pyenv's shims
# do): a SIGTERM or SIGHUP sent to this process must reach mutate.py, which ends the
# build or test it runs and restores the mutated file before it exits.
python="$(python3 -c 'import sys; print(sys.executable)')"
exec "$python" "$here/mutate.py" "$@"
