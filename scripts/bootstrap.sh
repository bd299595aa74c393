#!/usr/bin/env bash
# Everything hpcdist's tests and demo need, on a fresh Debian machine:
# Open MPI and MPICH from apt (as root), and a virtual environment .venv with
# torch (CPU), mpi4py, DeepSpeed, accelerate, Lightning, scikit-learn (the examples' data),
# matplotlib (hpcdist report's figures),
# pytest, hypothesis and hpcdist itself (editable).
# Safe to run again: it installs only what is missing.
# HPCDIST_INSTALL_RECORD (set by scripts/test.sh): a file to which each install is added as one
# line, for the test command's closing summary.
#
# torch: pip's default for `torch==2.13.0` on Linux x86_64 is the CUDA build (about 3.6 GB with its
# nvidia-* packages), so torch comes first, the CPU build, in this order:
#   1. a torch 2.13.0 wheel that pip finds without an index (its find-links: our machines carry
#      one, so the test command downloads nothing large);
#   2. torch's CPU index, https://download.pytorch.org/whl/cpu, or HPCDIST_TORCH_INDEX (a mirror
#      of it: a devpi or Artifactory proxy, a folder served over http);
#   3. where that index cannot be reached, pip's own index, after a line saying so and the size.
# HPCDIST_TORCH=pypi skips 1 and 2: pip's own choice (the CUDA build on Linux x86_64).
# The size and the time are said before each download. `bash scripts/bootstrap.sh torch` installs
# torch alone (into .venv, made if missing), nothing else. `bash scripts/bootstrap.sh tests` (run by
# scripts/test.sh) adds the test suite's own Debian packages (tests/cluster/packages.txt: its
# clusters' Slurm, sshd, pdsh, podman...) before pytest collects anything, so that no test is
# skipped for want of what could be installed.
set -euo pipefail
cd "$(dirname "$0")/.."
record() { if [ -n "${HPCDIST_INSTALL_RECORD:-}" ]; then echo "scripts/bootstrap.sh: $*" >>"$HPCDIST_INSTALL_RECORD"; fi; }
only=${1:-}
if [ -n "$only" ] && [ "$only" != torch ] && [ "$only" != tests ]; then
  echo "bootstrap: error: argument '$only': give 'torch' (install torch alone) or 'tests' (everything," \
       "and the test suite's Debian packages); run it with no argument for everything else" >&2
  exit 2
fi
torch_version=2.13.0
torch_choice=${HPCDIST_TORCH:-cpu}
if [ "$torch_choice" != cpu ] && [ "$torch_choice" != pypi ]; then
  echo "bootstrap: error: HPCDIST_TORCH='$torch_choice': give cpu (the CPU build, the default) or pypi (pip's own choice: the CUDA build on Linux x86_64)" >&2
  exit 2
fi

apt_packages=()
command -v mpirun.openmpi >/dev/null || apt_packages+=(openmpi-bin libopenmpi-dev)
command -v mpiexec.mpich >/dev/null || apt_packages+=(mpich libmpich-dev)
# --stage-env's image (mksquashfs at submit, squashfuse on the nodes; without them: the tar).
{ command -v mksquashfs && command -v squashfuse; } >/dev/null || apt_packages+=(squashfs-tools squashfuse)
if [ "$only" = tests ]; then
  for p in $(sed 's/#.*//' tests/cluster/packages.txt); do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || apt_packages+=("$p")
  done
fi
if [ "$only" != torch ] && ((${#apt_packages[@]})); then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "bootstrap: apt-get install ${apt_packages[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${apt_packages[@]}" >/dev/null
    record "apt-get install ${apt_packages[*]} (system-wide)"
  else
    echo "bootstrap: cannot install ${apt_packages[*]} (needs root and apt-get);" \
         "the tests that need them will say they are skipped and why" >&2
  fi
fi

# pip's own exit status, without the local index's noise about missing folders.
pip_install() { .venv/bin/pip install -q "$@" 2> >(grep -v "is ignored: it is neither" >&2); }

# A torch wheel pip finds without an index (its find-links), as a file:// address; empty if none.
local_torch_wheel() {
  .venv/bin/pip install -q --dry-run --no-index --no-deps --report - "torch==$torch_version" 2>/dev/null |
    .venv/bin/python -c 'import json, sys; print(json.load(sys.stdin)["install"][0]["download_info"]["url"])' \
      2>/dev/null || true
}

# Nothing if INDEX answers for torch; else why not, in a few words.
unreachable() {
  .venv/bin/python - "$1/torch/" <<'PY'
import sys, urllib.request
try:
    urllib.request.urlopen(sys.argv[1], timeout=15).close()
except Exception as e:
    print(getattr(e, "reason", None) or e)
PY
}

install_torch() {
  local have wheel index why
  have=$(.venv/bin/python -c 'import importlib.metadata as m; print(m.version("torch"))' 2>/dev/null || true)
  if [ "${have%%+*}" = "$torch_version" ]; then return; fi
  if [ "$torch_choice" = pypi ]; then
    echo "bootstrap: torch $torch_version from pip's own index (HPCDIST_TORCH=pypi): on Linux x86_64 the CUDA build," \
         "about 3.6 GB to download (torch 0.9 GB, nvidia-* packages 2.7 GB): 15 minutes or more at 30 Mbit/s"
    echo "bootstrap: pip install torch==$torch_version"
    pip_install "torch==$torch_version"
    return
  fi
  if [ "$(uname -s)" != Linux ]; then  # PyPI's torch for macOS is the CPU build (the CPU index's has no +cpu)
    echo "bootstrap: torch $torch_version from pip's own index (on $(uname -s), the CPU build):" \
         "about 80 MB to download, a minute or less"
    pip_install "torch==$torch_version"
    return
  fi
  wheel=$(local_torch_wheel)
  if [[ $wheel == file://* ]]; then
    echo "bootstrap: torch $torch_version from a wheel on this machine, nothing to download: $wheel"
    pip_install "torch @ $wheel"
    return
  fi
  index=${HPCDIST_TORCH_INDEX:-https://download.pytorch.org/whl/cpu}
  index=${index%/}
  why=$(unreachable "$index")
  if [ -z "$why" ]; then
    echo "bootstrap: torch $torch_version, CPU build, from $index: about 190 MB to download" \
         "(750 MB installed), a minute at 30 Mbit/s"
    echo "bootstrap: pip install --extra-index-url $index torch==$torch_version+cpu"
    pip_install --extra-index-url "$index" "torch==$torch_version+cpu"
  else
    echo "bootstrap: torch's CPU index $index cannot be reached ($why); falling back to pip's own index," \
         "whose torch $torch_version on Linux x86_64 is the CUDA build: about 3.6 GB to download" \
         "(torch 0.9 GB, nvidia-* packages 2.7 GB), 15 minutes or more at 30 Mbit/s. For the CPU build," \
         "stop now (Ctrl-C) and set HPCDIST_TORCH_INDEX to a mirror of that index."
    if [ -t 0 ]; then sleep 10; fi  # a person at a terminal has the time to read it
    echo "bootstrap: pip install torch==$torch_version"
    pip_install "torch==$torch_version"
  fi
}

python=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$python" -m venv .venv
if [ "$only" = torch ]; then
  install_torch
  exit 0
fi
stamp=.venv/.hpcdist-installed
want=$(cat pyproject.toml scripts/bootstrap.sh | sha256sum | cut -c1-16)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  # torch first: an unpinned torch asked for by the extras would be pip's default (several GB).
  install_torch
  echo "bootstrap: hpcdist and its extras (DeepSpeed, Lightning, accelerate, mpi4py, Hydra, scikit-learn, matplotlib, MkDocs," \
       "pytest) into .venv: about 200 MB to download where pip has none of them yet, a few minutes"
  pip_install -e ".[test,docs,mpi,deepspeed,submitit,hydra,accelerate,lightning,examples,report]"
  echo "$want" > "$stamp"
  record "pip install torch==$(.venv/bin/python -c 'import importlib.metadata as m; print(m.version("torch"))')" \
         "and hpcdist[test,docs,mpi,deepspeed,submitit,hydra,accelerate,lightning,examples,report] (into $PWD/.venv)"
fi
