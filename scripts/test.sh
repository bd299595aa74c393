#!/usr/bin/env bash
# The whole test suite, on a fresh machine: installs what it needs, then runs pytest.
# Extra arguments go to pytest (e.g. scripts/test.sh -k hostlist).
# Three test processes (pytest-xdist, --dist loadgroup): the Slurm cluster's tests in one, one
# after the other, the OpenPBS cluster's in another, and the rest in the third from the start
# (with two, the rest waited for a cluster's group to end: the cluster tests wait on their jobs
# for a quarter of their time, which the third uses).
# What scripts/bootstrap.sh and the test cluster install during the run is recorded in a
# temporary file (HPCDIST_INSTALL_RECORD), which pytest's closing summary prints.
set -euo pipefail
cd "$(dirname "$0")/.."
HPCDIST_INSTALL_RECORD=$(mktemp "${TMPDIR:-/tmp}/hpcdist-installed.XXXXXX")
export HPCDIST_INSTALL_RECORD
trap 'rm -f "$HPCDIST_INSTALL_RECORD"' EXIT
bash scripts/bootstrap.sh tests
.venv/bin/python -m pytest -n 3 --dist loadgroup "$@"
