"""The Slurm site presets (hpcdist/sites/*.toml: Perlmutter, LUMI, Frontier, Jean Zay, a university
cluster), each against its site's documented example, point by point, as tests/sites/test_sites.py does
for the PBS sites.

``hpcdist render --profile SITE --nodes 2 ...`` runs in a folder with no profile file of the
user's. Each point of the site's documented example (``tests/site_examples/SITE.sh``: the guides' own
lines, with their pages) is found in the script: the request, the project, the environment, the
binding and the launch line. A point's documented text must be in the example file, so that a
point cannot drift from what the site wrote. Where the guide's own spelling differs from
hpcdist's (``-p batch`` and ``--partition=batch``, ``--gres=gpu:4`` and ``--gpus-per-node=4``)
the point names both. The script is compared with ``tests/golden/site-SITE.sh``
(``HPCDIST_UPDATE_GOLDEN=1`` rewrites it, to review).
"""

from __future__ import annotations

import os
import re

import pytest

from test_sites import EXAMPLES, GOLDEN, SITES as PBS_SITES, UPDATE, check_exports, check_points, render
from test_sites import example as sites_example


def _srun(*words: str) -> re.Pattern:
    """The launch line: ``srun`` with each of ``words`` somewhere before the rank's python."""
    ahead = "".join(f"(?=[^\\n]*{re.escape(w)}[^\\n]*python -m hpcdist\\.rank)" for w in words)
    return re.compile(rf"^srun {ahead}[^\n]*python -m hpcdist\.rank train\.py$", re.M)


LUMI_MASKS = ("0x00fe000000000000,0xfe00000000000000,0x0000000000fe0000,0x00000000fe000000,"
              "0x00000000000000fe,0x000000000000fe00,0x000000fe00000000,0x0000fe0000000000")
LUMI_SIF = ("/appl/local/laifs/containers/lumi-multitorch-u24r70f21m50t210-20260415_130625/"
            "lumi-multitorch-full-u24r70f21m50t210-20260415_130625.sif")

#: Per site: the flags a user adds to the preset, the example's placeholders as those flags fill
#: them, the points (what, the documented text or None where the guide is silent, the rendered
#: text: a substring or a compiled pattern), and the variables exported as the guide exports them.
SITES = {
    "perlmutter": dict(
        flags=["--account", "m0000", "--walltime", "30m"],
        placeholders={"--nodes= <num_nodes>": "--nodes=2"},
        points=[
            ("GPU nodes", "#SBATCH -C gpu", "#SBATCH --constraint=gpu\n"),
            ("two nodes", "#SBATCH --nodes=2", "#SBATCH --nodes=2\n"),
            ("a rank per GPU", "#SBATCH --ntasks-per-node=4", "#SBATCH --ntasks-per-node=4\n"),
            ("four GPUs per node", "#SBATCH --gpus-per-node=4", "#SBATCH --gpus-per-node=4\n"),
            ("32 CPUs per rank", "#SBATCH --cpus-per-task=32", "#SBATCH --cpus-per-task=32\n"),
            ("the NCCL plugin in the container", "#SBATCH --module=gpu,nccl-plugin",
             "#SBATCH --module=gpu,nccl-plugin\n"),
            ("NERSC's PyTorch image", "#SBATCH --image=nersc/pytorch:25.02.01",
             re.compile(r"^(#SBATCH --image=nersc/pytorch:25\.02\.01$|srun [^\n]*shifter [^\n]*"
                        r"--image=nersc/pytorch:25\.02\.01 )", re.M)),
            ("the ranks start in the image by shifter", "srun shifter", _srun("shifter")),
        ],
        env=[],
    ),
    "lumi": dict(
        flags=["--account", "project_465000001", "--walltime", "1h"],
        placeholders={"project_xxxxxxxxx": "project_465000001"},
        points=[
            ("project", "#SBATCH --account=project_465000001", "#SBATCH --account=project_465000001\n"),
            ("LUMI-G partition", "#SBATCH --partition=standard-g", "#SBATCH --partition=standard-g\n"),
            ("eight GCDs per node", "#SBATCH --gpus-per-node=8", "#SBATCH --gpus-per-node=8\n"),
            ("a rank per GCD", "#SBATCH --ntasks-per-node=8", "#SBATCH --ntasks-per-node=8\n"),
            ("seven cores per rank", "#SBATCH --cpus-per-task=7", "#SBATCH --cpus-per-task=7\n"),
            ("memory per GCD", "#SBATCH --mem-per-gpu=60G", "#SBATCH --mem-per-gpu=60G\n"),
            ("walltime", None, "#SBATCH --time=01:00:00\n"),
            ("a clean module environment", "module purge", "module purge\n"),
            ("the AI modules' path", "module use /appl/local/laifs/modules", "module use /appl/local/laifs/modules\n"),
            ("the container bindings", "module load lumi-aif-singularity-bindings",
             "module load lumi-aif-singularity-bindings\n"),
            ("MIOpen's cache in /tmp", 'export MIOPEN_CUSTOM_CACHE_DIR="/tmp/miopen-cache-${USER}"',
             'export MIOPEN_CUSTOM_CACHE_DIR="/tmp/miopen-cache-${USER}"\n'),
            ("MIOpen's database in /tmp", 'export MIOPEN_USER_DB_PATH="/tmp/miopen-config-${USER}"',
             'export MIOPEN_USER_DB_PATH="/tmp/miopen-config-${USER}"\n'),
            ("both made", 'mkdir -p "$MIOPEN_CUSTOM_CACHE_DIR" "$MIOPEN_USER_DB_PATH"',
             'mkdir -p "$MIOPEN_CUSTOM_CACHE_DIR" "$MIOPEN_USER_DB_PATH"\n'),
            ("the GCDs' masks", f'CPU_BIND_MASKS="{LUMI_MASKS}"', _srun(f"--cpu-bind=v,mask_cpu={LUMI_MASKS}")),
            ("the ranks bound to their GCD's cores", "srun --cpu-bind=v,mask_cpu=$CPU_BIND_MASKS",
             _srun("--cpu-bind=v,mask_cpu=")),
            # Set once at the top, as the guide does, and named where it is used.
            ("the LUMI AI container", f"SIF={LUMI_SIF}", f"\nexport HPCDIST_IMAGE={LUMI_SIF}\n"),
            ("the ranks start in it by singularity, with the GPUs", "singularity run $SIF",
             re.compile(r'^srun [^\n]*singularity (run|exec) [^\n]*--rocm "\$HPCDIST_IMAGE" '
                        r"[^\n]*python -m hpcdist\.rank train\.py$", re.M)),
        ],
        env=[],
    ),
    "frontier": dict(
        flags=["--account", "PROJECT_ID", "--walltime", "5m"],
        placeholders={},
        points=[
            ("project", "#SBATCH -A PROJECT_ID", "#SBATCH --account=PROJECT_ID\n"),
            ("partition", "#SBATCH -p batch", "#SBATCH --partition=batch\n"),
            ("two nodes", "#SBATCH -N 2", "#SBATCH --nodes=2\n"),
            ("walltime", "#SBATCH -t 00:05:00", "#SBATCH --time=00:05:00\n"),
            ("RCCL's rendezvous protocol", "#SBATCH --network=disable_rdzv_get",
             "#SBATCH --network=disable_rdzv_get\n"),
            ("programming environment", "module load PrgEnv-gnu/8.7.0", "module load PrgEnv-gnu/8.7.0\n"),
            ("Cray PE release", "module load cpe/26.03", "module load cpe/26.03\n"),
            ("conda", "module load miniforge3/23.11.0-0", "module load miniforge3/23.11.0-0\n"),
            ("ROCm", "module load rocm/7.1.1", "module load rocm/7.1.1\n"),
            ("RCCL's Slingshot plugin", "module load rccl-net-plugin", "module load rccl-net-plugin\n"),
            ("GPU target", "module load craype-accel-amd-gfx90a", "module load craype-accel-amd-gfx90a\n"),
            ("the non-default CPE's libraries", "export LD_LIBRARY_PATH=$CRAY_LD_LIBRARY_PATH:$LD_LIBRARY_PATH",
             'export LD_LIBRARY_PATH="$CRAY_LD_LIBRARY_PATH:$LD_LIBRARY_PATH"\n'),
            ("MIOpen's database in /tmp", 'export MIOPEN_USER_DB_PATH="/tmp/my-miopen-cache"',
             'export MIOPEN_USER_DB_PATH="/tmp/my-miopen-cache"\n'),
            ("MIOpen's cache there too", "export MIOPEN_CUSTOM_CACHE_DIR=${MIOPEN_USER_DB_PATH}",
             'export MIOPEN_CUSTOM_CACHE_DIR="${MIOPEN_USER_DB_PATH}"\n'),
            ("made", "mkdir -p ${MIOPEN_USER_DB_PATH}", "mkdir -p ${MIOPEN_USER_DB_PATH}\n"),
            ("16 ranks: 8 on each of 2 nodes", "srun -N2 -n16", _srun("--nodes=2", "--ntasks-per-node=8")),
            ("seven cores per rank", "-c7", _srun("--cpus-per-task=7")),
            ("one GPU per rank, the closest", "--gpus-per-task=1 --gpu-bind=closest",
             _srun("--gpus-per-task=1", "--gpu-bind=closest")),
        ],
        env=["NCCL_SOCKET_IFNAME"],
    ),
    "jeanzay": dict(
        flags=["--account", "xyz@v100", "--walltime", "1h"],
        placeholders={},
        points=[
            ("a rank per GPU", "#SBATCH --ntasks-per-node=4", "#SBATCH --ntasks-per-node=4\n"),
            ("four V100 per node", "#SBATCH --gres=gpu:4", "#SBATCH --gpus-per-node=4\n"),
            ("ten cores per rank", "#SBATCH --cpus-per-task=10", "#SBATCH --cpus-per-task=10\n"),
            ("no hyperthreading (the page's line is cut after --h)", "#SBATCH --h",
             re.compile(r"^(#SBATCH --hint=nomultithread$|srun [^\n]*--hint=nomultithread )", re.M)),
            ("the ranks started by srun", "execution via the SLURM command srun", _srun()),
            ("project", None, "#SBATCH --account=xyz@v100\n"),
            ("a clean module environment", None, "module purge\n"),
            ("IDRIS's PyTorch module (inferred)", None, "module load pytorch-gpu/py3\n"),
        ],
        env=[],
    ),
    "university": dict(
        flags=["--walltime", "5m"],
        placeholders={},
        points=[
            ("two nodes", "#SBATCH --nodes=2", "#SBATCH --nodes=2\n"),
            ("a rank per GPU", "#SBATCH --ntasks-per-node=2", "#SBATCH --ntasks-per-node=2\n"),
            ("eight cores per rank", "#SBATCH --cpus-per-task=8", "#SBATCH --cpus-per-task=8\n"),
            ("memory per node", "#SBATCH --mem=32G", "#SBATCH --mem=32G\n"),
            ("two GPUs per node", "#SBATCH --gres=gpu:2", "#SBATCH --gpus-per-node=2\n"),
            ("walltime", "#SBATCH --time=00:05:00", "#SBATCH --time=00:05:00\n"),
            ("a clean module environment", "module purge", "module purge\n"),
            ("anaconda", "module load anaconda3/2023.9", "module load anaconda3/2023.9\n"),
            ("the conda environment", "conda activate torch-env", "conda activate torch-env\n"),
            ("the ranks started by srun", "srun python mnist_classify_ddp.py", _srun("--cpus-per-task=8")),
        ],
        env=[],
    ),
}

#: What hpcdist writes differently from a site's example, on purpose.
DIFFERENCES = {
    "perlmutter": "the guide's MASTER_ADDR/MASTER_PORT=29500 and its bash -c exports of RANK, LOCAL_RANK and "
                  "WORLD_SIZE are hpcdist's (hpcdist.rank in each rank; a per-job port); hpcdist must be installed "
                  "in the image's user site",
    "lumi": "MASTER_PORT is hpcdist's per-job port, not 1${SLURM_JOB_ID:0-4}; RANK, LOCAL_RANK, WORLD_SIZE and "
            "LOCAL_WORLD_SIZE come from hpcdist.rank; TORCH_HOME under /scratch is left to the user (--env-expand); "
            "the User Guide's select_gpu wrapper (ROCR_VISIBLE_DEVICES) is not needed: each rank sees the node's "
            "8 GCDs and uses the one of its local rank, as the AI Guide's srun example does",
    "frontier": "MASTER_ADDR=$(hostname -i) and port 3442 are hpcdist's master and per-job port; the conda "
                "environment (/path/to/my_env) is the user's --conda; --gpus-per-node=8 is written (Frontier gives "
                "whole nodes anyway); the guide's rm -rf of the MIOpen cache is not written",
    "jeanzay": "the GPUs are asked as --gpus-per-node=4 (the guide: --gres=gpu:4); the module and the QoS are the "
               "user's choice (the page read here was cut before its environment and launch lines)",
    "university": "--gpus-per-node=2 for the guide's --gres=gpu:2; MASTER_PORT (get_free_port, a Princeton "
                  "command) and WORLD_SIZE are hpcdist's; the mail lines are the user's --mail",
}


def example(site: str) -> str:
    return sites_example(site, SITES)


def test_the_presets_are_the_pbs_and_the_slurm_sites():
    from hpcdist.submission.profiles import presets

    assert sorted(presets()) == sorted({*PBS_SITES, *SITES})


@pytest.mark.parametrize("site", sorted(SITES))
def test_each_documented_line_is_in_the_sites_example_and_the_preset_cites_its_pages(site):
    """The half of the points that needs no rendering: what a point quotes is in tests/site_examples/SITE.sh,
    and the preset's header cites every page that file's blocks are headed by."""
    documented = example(site)
    for what, said, _ in SITES[site]["points"]:
        assert said is None or said in documented, f"{site}: {what}: {said!r} is not in tests/site_examples/{site}.sh"
    pages = set(re.findall(r"^# === (https?://\S+)", documented, re.M))
    with open(os.path.join(os.path.dirname(EXAMPLES), "..", "hpcdist", "sites", f"{site}.toml")) as f:
        header = f.read().split("[profiles.", 1)[0]
    assert pages and all(page.rstrip("/") in header for page in pages), (site, pages)
    assert DIFFERENCES[site]


@pytest.mark.parametrize("site", sorted(SITES))
def test_a_slurm_preset_renders_what_its_site_documents(site, tmp_path):
    text = render(site, tmp_path, SITES)
    path = os.path.join(GOLDEN, f"site-{site}.sh")
    if UPDATE:
        with open(path, "w") as f:
            f.write(text)
    assert os.path.exists(path), f"{path} is missing; HPCDIST_UPDATE_GOLDEN=1 writes it, to review"
    with open(path) as f:
        assert text == f.read(), f"{path} differs; HPCDIST_UPDATE_GOLDEN=1 rewrites it after review"
    documented, want = example(site), SITES[site]
    check_points(site, text, documented, want["points"])
    check_exports(site, text, documented, want["env"])
