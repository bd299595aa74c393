#!/usr/bin/env bash
# Benchmarks for hpcdist (not tests): host lists against python-hostlist,
# ClusterShell and Slurm's scontrol, the start-up cost of hpcdist.env,
# `hpcdist submit --dry-run` against torchx and submitit, the light paths against
# their floors in instructions (valgrind) and wall time (bench_floor.py: render,
# status, get_rank() outside a launcher and under torchrun, --help, --version,
# python -m hpcdist.rank with progress recorded, node lists against
# python-hostlist), `hpcdist hostfile` over a PBS
# node file of 10,000 hosts x 8 lines in instructions (valgrind), and uneven per-rank
# batches (hpcdist.data) against torch's even DistributedSampler, starting a rank
# through python -m hpcdist.rank against plain python and python -m mpi4py, and (as root)
# the launch overhead of hpcdist's job script against a hand-written one on the
# 2-host test cluster.
# Writes bench/RESULTS.md.
#
#   bash bench/run.sh               # the full run
#   bash bench/run.sh --hyperfine   # start-up timed with hyperfine when installed
#
# Environment:
#   BENCH_REPS=N            repetitions of the host-list cases (default 9)
#   BENCH_IMPORT_REPS=N     repetitions of the start-up runs (default 30)
#   BENCH_SUBMIT_REPS=N     repetitions of the submit dry runs (default 30, at least 15)
#   BENCH_UNEVEN_REPS=N     repetitions of the uneven-batch epochs (default 7)
#   BENCH_LAUNCH_REPS=N     jobs per script in the launch-overhead benchmark (default 5)
#   BENCH_PROGRESS_REPS=N   runs each way of the progress-recording loop (default 7)
#   BENCH_SWEEP_REPS=N      submissions of a 10,000-set sweep, scheduler stubbed (bench_sweep.py; default 5)
#   BENCH_BASE=COMMIT       the commit this checkout's render and rank lookup are compared with (default HEAD~1)
#   BENCH_FLOOR_BASE=COMMIT the commit shown beside this checkout against the floors (bench_floor.py;
#                           default 404c70c, before "the CLI at its floor")
#   BENCH_HOSTFILE_BASE=COMMIT the commit beside this checkout's `hpcdist hostfile` (bench_hostfile.py;
#                           default 54bfaf3, before issue 27's node-file fix)
#   HPCDIST_BENCH_NO_APT=1  never apt-get install slurm-client for scontrol
#
# The comparison libraries go into bench/.venv, never into the project's own
# environment; hpcdist itself is used from this checkout (PYTHONPATH). The
# submit dry run and the uneven-batch benchmark use the project's venv (.venv:
# hpcdist's CLI and jinja2; torch).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$here")"
cd "$repo"

import_args=()
for arg in "$@"; do
    case "$arg" in
        --hyperfine) import_args+=(--hyperfine) ;;
        -h|--help) sed -n '2,31p' "$0"; exit 0 ;;
        *) echo "unknown option: $arg" >&2; exit 2 ;;
    esac
done

# 1. the venv with python-hostlist, ClusterShell, submitit and torchx
venv="$here/.venv"
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
py="$venv/bin/python"
if ! "$py" -m pip install --quiet --disable-pip-version-check -r "$here/requirements.txt"; then
    echo "warning: could not install bench/requirements.txt; missing tools show as 'not installed'" >&2
fi
export PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}"

# 2. scontrol (Debian/Ubuntu: slurm-client), when it can be had
if ! command -v scontrol >/dev/null 2>&1 \
    && [ "${HPCDIST_BENCH_NO_APT:-0}" != 1 ] \
    && [ "$(id -u)" = 0 ] \
    && command -v apt-get >/dev/null 2>&1; then
    echo "installing slurm-client (for scontrol) with apt-get" >&2
    if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-client; } >&2; then
        echo "warning: could not install slurm-client; scontrol shows as 'not installed'" >&2
    fi
fi

# scontrol is fatal without a readable slurm.conf, even for 'show hostnames'
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
if [ -z "${SLURM_CONF:-}" ] || [ ! -r "${SLURM_CONF}" ]; then
    cat > "$tmp/slurm.conf" <<'EOF'
ClusterName=bench
SlurmctldHost=localhost
NodeName=localhost CPUs=1
PartitionName=p Nodes=localhost
EOF
    export SLURM_CONF="$tmp/slurm.conf"
fi

# 3. run the benchmarks, then write RESULTS.md in one go
cpu="$(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ *//' || true)"
{
    echo "# hpcdist benchmark results"
    echo
    echo "Latest run of \`bash bench/run.sh\` (a benchmark, not a test; the test suite never runs it)."
    echo
    echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "- command: \`bash bench/run.sh${import_args[*]:+ ${import_args[*]}}\`"
    echo "- machine: $(nproc) CPUs (\`nproc\`), ${cpu:-unknown CPU}, $(uname -sr)"
    echo "- Python: $("$py" -c 'import sys; print(sys.version.split()[0])')"
    echo
    "$py" "$here/bench_hostlist.py" --reps "${BENCH_REPS:-9}"
    echo
    "$py" "$here/bench_import.py" --reps "${BENCH_IMPORT_REPS:-30}" "${import_args[@]}"
    echo
    "$py" "$here/bench_submit.py" --reps "${BENCH_SUBMIT_REPS:-30}" --python "$repo/.venv/bin/python"
    echo
    "$repo/.venv/bin/python" "$here/bench_revisions.py" --base "${BENCH_BASE:-HEAD~1}" --reps "${BENCH_IMPORT_REPS:-30}"
    echo
    "$repo/.venv/bin/python" "$here/bench_floor.py" --base "${BENCH_FLOOR_BASE:-404c70c}" --reps "${BENCH_IMPORT_REPS:-30}"
    echo
    "$repo/.venv/bin/python" "$here/bench_hostfile.py" --base "${BENCH_HOSTFILE_BASE:-54bfaf3}"
    echo
    "$repo/.venv/bin/python" "$here/bench_uneven.py" --reps "${BENCH_UNEVEN_REPS:-7}" --work sleep
    echo
    "$repo/.venv/bin/python" "$here/bench_uneven.py" --reps "${BENCH_UNEVEN_REPS:-7}" --work compute
    echo
    "$repo/.venv/bin/python" "$here/bench_launch.py" --reps "${BENCH_LAUNCH_REPS:-5}"
    echo
    "$repo/.venv/bin/python" "$here/bench_rank_start.py" --reps "${BENCH_IMPORT_REPS:-30}"
    echo
    "$repo/.venv/bin/python" "$here/bench_progress.py" --reps "${BENCH_PROGRESS_REPS:-7}"
    echo
    "$repo/.venv/bin/python" "$here/bench_sweep.py" --reps "${BENCH_SWEEP_REPS:-5}"
    echo
    "$repo/.venv/bin/python" "$here/bench_startup_model.py"
} > "$tmp/RESULTS.md"
cp "$tmp/RESULTS.md" "$here/RESULTS.md"
cat "$here/RESULTS.md"
