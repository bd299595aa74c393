#!/usr/bin/env bash
# Everything hpcdist's tests and demo need, on a fresh Debian machine:
# Open MPI and MPICH from apt (as root), and a virtual environment .venv with
# torch (CPU), mpi4py, DeepSpeed, accelerate, Lightning, scikit-learn (the examples' data),
# pytest, hypothesis and hpcdist itself (editable).
# Safe to run again: it installs only what is missing.
# HPCDIST_INSTALL_RECORD (set by scripts/test.sh): a file to which each install is added as one
# line, for the test command's closing summary.
set -euo pipefail
cd "$(dirname "$0")/.."
record() { if [ -n "${HPCDIST_INSTALL_RECORD:-}" ]; then echo "scripts/bootstrap.sh: $*" >>"$HPCDIST_INSTALL_RECORD"; fi; }

apt_packages=()
command -v mpirun.openmpi >/dev/null || apt_packages+=(openmpi-bin libopenmpi-dev)
command -v mpiexec.mpich >/dev/null || apt_packages+=(mpich libmpich-dev)
if ((${#apt_packages[@]})); then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "bootstrap: apt-get install ${apt_packages[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${apt_packages[@]}" >/dev/null
    record "apt-get install ${apt_packages[*]} (system-wide)"
  else
    echo "bootstrap: cannot install ${apt_packages[*]} (needs root and apt-get);" \
         "the tests that run MPI will say they are skipped and why" >&2
  fi
fi

# pip's own exit status, without the local index's noise about missing folders.
pip_install() { .venv/bin/pip install -q "$@" 2> >(grep -v "is ignored: it is neither" >&2); }

python=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$python" -m venv .venv
stamp=.venv/.hpcdist-installed
want=$(cat pyproject.toml scripts/bootstrap.sh | sha256sum | cut -c1-16)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  # torch==2.13.0 is the CPU wheel our machines carry; an unpinned torch
  # would pull the newest CUDA build (several GB).
  pip_install "torch==2.13.0"
  pip_install -e ".[test,docs,mpi,deepspeed,submitit,accelerate,lightning,examples]"
  echo "$want" > "$stamp"
  record "pip install torch==2.13.0 and hpcdist[test,docs,mpi,deepspeed,submitit,accelerate,lightning,examples] (into $PWD/.venv)"
fi
