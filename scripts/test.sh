#!/usr/bin/env bash
# The whole test suite, on a fresh machine: installs what it needs, then runs pytest.
# Extra arguments go to pytest (e.g. scripts/test.sh -k hostlist).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
exec .venv/bin/python -m pytest "$@"
