#!/usr/bin/env bash
# The examples on a GPU (nccl), through hpcdist's local backend as a user submits them, and the
# health check's all-reduce over nccl: what CI cannot run (it has no GPU). Run from the
# repository's root on a machine with one or more NVIDIA GPUs and a python that has torch:
#   PY=python3 bash bench/gpu_examples.sh [OUT_DIR]
# Each job's log and a summary (figures in bench/RESULTS.md) go to OUT_DIR (default gpu-out).
# One GPU: one rank each (NCCL refuses two ranks on one GPU); with more, one rank per GPU.
set -uo pipefail
PY=${PY:-python3}
out=${1:-gpu-out}
mkdir -p "$out"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
# GPUS=N rehearses the script on a machine without one (the examples fall back to gloo).
gpus=${GPUS:-$("$PY" -c 'import torch; print(torch.cuda.device_count())')}
summary="$out/summary.txt"
{
  nvidia-smi -L 2>/dev/null
  "$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda,
            "nccl", torch.cuda.is_available() and torch.cuda.nccl.version())'
} | tee "$summary"
[ "$gpus" -ge 1 ] || { echo "no GPU seen by torch" | tee -a "$summary"; exit 1; }

work=$(mktemp -d)
run() {  # NAME LAUNCHER SCRIPT ARGS...: one job, its exit status and the log's figures
  local name=$1 launcher=$2
  shift 2
  local started=$SECONDS
  (cd "$work" && "$PY" -m hpcdist submit --scheduler local --nodes 1 --procs-per-node "$gpus" \
    --gpus-per-node "$gpus" --launcher "$launcher" --python "$PY" --job-name "$name" --wait \
    "$@") >"$out/$name.txt" 2>&1
  local status=$?
  cat "$work"/.hpcdist/jobs/"$name"-*/job.log >>"$out/$name.txt" 2>/dev/null
  echo "== $name: exit $status, $((SECONDS - started)) s" | tee -a "$summary"
  # What the example says of its backend and device, its last loss, the rate, the start-up's row.
  grep -E ' on [0-9]+ ranks? \(|loss .* on [0-9]+ rank|eval loss|steps/s|start-up:|^hpcdist:   [^ n]' \
    "$out/$name.txt" | awk '!seen[$0]++' | tee -a "$summary"
}
examples=$PWD/examples
run quickstart torchrun "$examples/quickstart.py"
run ddp torchrun "$examples/ddp/train.py" --steps 200 --amp bf16 --checkpoint-dir "$work/ckpt-ddp"
run fsdp2 torchrun "$examples/fsdp2/train.py" --steps 100 --checkpoint-dir "$work/ckpt-fsdp2"
run uneven torchrun "$examples/uneven/train.py"
if command -v mpirun >/dev/null && "$PY" -c 'import mpi4py' 2>/dev/null; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1  # where it runs as root
  run quickstart-mpirun mpirun "$examples/quickstart.py"
  run mpi mpirun "$examples/mpi/train.py" --steps 100 --checkpoint-dir "$work/ckpt-mpi"
fi

# The health check's all-reduce (--preflight) over nccl, one process per GPU on this host.
echo "== all-reduce (hpcdist.injob.allreduce, nccl)" | tee -a "$summary"
for rank in $(seq 0 $((gpus - 1))); do
  NCCL_DEBUG=VERSION CUDA_VISIBLE_DEVICES=$rank "$PY" -m hpcdist.injob.allreduce 127.0.0.1:29577 "$rank" "$gpus" 60 &
done 2>&1 | tee -a "$summary"
wait
rm -rf "$work"
