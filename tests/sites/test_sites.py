"""The site presets (hpcdist/sites/*.toml), each against its site's documented example, point by point.

``hpcdist render --profile SITE --nodes 2 ...`` runs in a folder with no profile file of the
user's. Its script is a golden file (``tests/golden/site-SITE.sh``), and each point of the
site's documented example (``tests/site_examples/SITE.sh``: the guides' own lines, with their pages)
is found in it: the request, the project, the queue, the environment and the launch line. A
point's documented text must be in the example file, so that a point cannot drift from what
the site wrote. Where hpcdist writes something else on purpose, ``DIFFERENCES`` says what and
why (docs/guide/sites.md says the same).

The Gadi-shaped job at the end goes through ``qsub`` on the test cluster, whose PBS is Slurm's
emulation: see its docstring for what that stand-in cannot show.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = os.path.join(HERE, "golden")
EXAMPLES = os.path.join(HERE, "site_examples")
UPDATE = os.environ.get("HPCDIST_UPDATE_GOLDEN") == "1"

#: Per site: the flags a user adds to the preset (their project, the example's walltime), the
#: example's placeholders as those flags fill them, and the points: (what, the documented text,
#: the rendered text: a substring, or a compiled pattern).
SITES = {
    "polaris": dict(
        flags=["--account", "Catalyst", "--walltime", "30m"],
        placeholders={},
        points=[
            ("whole nodes of Polaris", "#PBS -l select=2:system=polaris", "#PBS -l select=2:system=polaris\n"),
            ("each chunk its own node", "#PBS -l place=scatter", "#PBS -l place=scatter\n"),
            ("file systems (mandatory)", "#PBS -l filesystems=home:eagle", "#PBS -l filesystems=home:eagle\n"),
            ("queue for 1-2 nodes", "#PBS -q debug", "#PBS -q debug\n"),
            ("project (mandatory)", "#PBS -A Catalyst", "#PBS -A Catalyst\n"),
            ("walltime", "#PBS -l walltime=0:30:00", "#PBS -l walltime=00:30:00\n"),
            ("module path", "module use /soft/modulefiles", "module use /soft/modulefiles\n"),
            ("conda module", "module load conda", "module load conda\n"),
            ("conda's base environment", "conda activate\n", "conda activate base\n"),
        ],
        # NTOTRANKS = 2 nodes x 4 GPUs (nvidia-smi -L), NDEPTH=8.
        launch=("mpiexec -n ${NTOTRANKS} --ppn ${NRANKS_PER_NODE} --depth=${NDEPTH} --cpu-bind depth",
                {"NTOTRANKS": "8", "NRANKS_PER_NODE": "4", "NDEPTH": "8"}),
        env=["http_proxy", "https_proxy", "ftp_proxy", "NCCL_NET_GDR_LEVEL", "NCCL_CROSS_NIC", "NCCL_COLLNET_ENABLE",
             "NCCL_NET", "FI_CXI_DISABLE_HOST_REGISTER", "FI_MR_CACHE_MONITOR", "FI_CXI_DEFAULT_CQ_SIZE"],
    ),
    "aurora": dict(
        flags=["--account", "MYPROJECT", "--walltime", "30m"],
        placeholders={"<your_project_name>": "MYPROJECT"},
        points=[
            ("whole nodes", "-l select=2,", "#PBS -l select=2\n"),
            ("each chunk its own node", "#PBS -l place=scatter", "#PBS -l place=scatter\n"),
            ("file systems", "-l filesystems=home:flare", "#PBS -l filesystems=home:flare\n"),
            ("queue", "qsub -q debug", "#PBS -q debug\n"),
            ("project", "-A MYPROJECT", "#PBS -A MYPROJECT\n"),
            ("walltime", "walltime=30:00", "#PBS -l walltime=00:30:00\n"),
            ("frameworks module", "module load frameworks", "module load frameworks\n"),
        ],
        launch=("mpiexec -n 24 -ppn 12", {}),
        env=["CCL_PROCESS_LAUNCHER", "CCL_ATL_TRANSPORT", "CCL_KVS_MODE", "CCL_CONFIGURATION_PATH", "CCL_CONFIGURATION",
             "CCL_KVS_CONNECTION_TIMEOUT", "CCL_ZE_CACHE_OPEN_IPC_HANDLES_THRESHOLD", "CCL_KVS_USE_MPI_RANKS"],
    ),
    "derecho": dict(
        flags=["--account", "NCAR0001", "--walltime", "1h"],
        placeholders={"<project_code>": "NCAR0001"},
        points=[
            ("four GPUs and 64 cores of each of two nodes", "#PBS -l select=2:ncpus=64:mpiprocs=4:ngpus=4",
             "#PBS -l select=2:ncpus=64:mpiprocs=4:ngpus=4\n"),
            ("queue", "#PBS -q main", "#PBS -q main\n"),
            ("project", "#PBS -A NCAR0001", "#PBS -A NCAR0001\n"),
            ("walltime", "#PBS -l walltime=01:00:00", "#PBS -l walltime=01:00:00\n"),
            ("a clean module environment", "module purge", "module purge\n"),
            ("the compilers' modules, cuda among them", "module load nvhpc cuda cray-mpich",
             "module load nvhpc cuda cray-mpich\n"),
        ],
        launch=("mpiexec -n 8 -ppn 4", {}),
        env=[],
    ),
    "gadi": dict(
        flags=["--project", "vp91", "--walltime", "20m", "--mem", "5G"],
        placeholders={},
        points=[
            ("project (-P)", "#PBS -P vp91", "#PBS -P vp91\n"),
            ("GPU queue", "#PBS -q gpuvolta", "#PBS -q gpuvolta\n"),
            ("CPUs of the whole job: 12 per GPU", "#PBS -l ncpus=96", "#PBS -l ncpus=96\n"),
            ("GPUs of the whole job", "#PBS -l ngpus=8", "#PBS -l ngpus=8\n"),
            ("memory of the whole job", "#PBS -l mem=10GB", "#PBS -l mem=10gb\n"),
            ("walltime", "#PBS -l walltime=00:20:00", "#PBS -l walltime=00:20:00\n"),
            # The job's set-up exports MASTER_ADDR: the first host of the node file (hpcdist.injob.job_setup).
            ("the master is the node file's first host", "MASTER_ADDR=$(cat $PBS_NODEFILE | head -n 1)",
             "python -m hpcdist job-setup --scheduler pbs --nodes 2"),
            ("one torchrun per node, started by pbsdsh -n", "pbsdsh -n $inode", "hpcdist agents --pbsdsh"),
            ("c10d rendezvous at the master", "--rdzv_backend=c10d --rdzv_endpoint=${3}:29400",
             re.compile(r"torchrun --nnodes=2 --nproc-per-node=4 --rdzv-backend=c10d "
                        r"--rdzv-endpoint=\"\$MASTER_ADDR:\$MASTER_PORT\"")),
        ],
        launch=None,
        env=[],
    ),
    "torque": dict(
        flags=["--queue", "gpuq", "--account", "Physics", "--walltime", "15m", "--gpus-per-node", "4"],
        placeholders={},
        points=[
            ("nodes, processes per node, GPUs", "[:ppn=<ppn>][:gpus=<gpu>]", "#PBS -l nodes=2:ppn=4:gpus=4\n"),
            ("queue", "#PBS -q gpuq", "#PBS -q gpuq\n"),
            ("account", "#PBS -A Physics", "#PBS -A Physics\n"),
            ("walltime", "#PBS -l walltime=00:15:00", "#PBS -l walltime=00:15:00\n"),
            ("one log", "#PBS -j oe", "#PBS -j oe\n"),
            ("the submit folder (Torque starts jobs in $HOME)", "cd $PBS_O_WORKDIR", 'cd "$PBS_O_WORKDIR"'),
            ("one torchrun per node, started by pbsdsh", None, "hpcdist agents --pbsdsh"),
        ],
        launch=None,
        env=[],
    ),
}

#: What hpcdist writes differently from a site's example, on purpose.
DIFFERENCES = {
    "polaris": "the example's LD_LIBRARY_PATH additions (the conda module sets them since October 2024), "
               "MPICH_GPU_SUPPORT_ENABLED (GPU-aware MPI; nccl does not use it) and its OpenMP --env settings are "
               "not written; the ranks start as python -m hpcdist.rank, with --envall and hpcdist's host file",
    "aurora": "-k doe is not written (ALCF adds it to every job); devices (xpu) and the ccl backend stay the "
              "training's own (the preset says so)",
    "derecho": "place=scatter is written (Derecho's main queue gives whole nodes anyway); each rank is bound to 16 "
               "cores (--depth 16 --cpu-bind depth: the cores of the guide's list:0:16:32:48 binding and the 15 after "
               "each, for data-loader threads); TMPDIR and get_local_rank (CUDA_VISIBLE_DEVICES) are not set",
    "gadi": "the course's module versions are not written (add yours with --module); its port 29400 is "
            "hpcdist's per-job port; the agents are started by index of their host's first node-file line",
    "torque": "a node property (feature=gpu) is the user's --directive",
}


def render(site: str, tmp_path, sites: dict = SITES) -> str:
    """``hpcdist render --profile SITE --nodes 2 ... train.py`` from a folder with no profile of the
    user's (``sites``: the table that gives the site's flags; tests/sites/test_sites_slurm.py has its own)."""
    (tmp_path / "train.py").write_text("")
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-m", "hpcdist", "render", "--profile", site, "--nodes", "2",
                           *sites[site]["flags"], "train.py"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def example(site: str, sites: dict = SITES) -> str:
    with open(os.path.join(EXAMPLES, f"{site}.sh"), encoding="utf-8") as f:
        text = f.read()
    for placeholder, value in sites[site]["placeholders"].items():
        text = text.replace(placeholder, value)
    return text


def joined(text: str) -> str:
    """The script with each command on one line: its `` \\`` continuations joined, and a word broken
    over lines (a backslash right after it, the rest at the next line's start) made whole."""
    return re.sub(r"\\\n", "", re.sub(r" \\\n\s*", " ", text))


def check_points(site: str, text: str, documented: str, points: list) -> None:
    """Each point: its documented text is in the site's example, its rendered text in the script
    (a command's continuation lines joined)."""
    text = joined(text)
    for what, said, wrote in points:
        assert said is None or said in documented, f"{site}: {what}: {said!r} is not in tests/site_examples/{site}.sh"
        found = wrote.search(text) if isinstance(wrote, re.Pattern) else wrote in text
        assert found, f"{site}: {what}: the guide says {said!r}; the script lacks {wrote!r}\n{text}"


def check_exports(site: str, text: str, documented: str, names: list) -> None:
    """The variables the guide exports, exported with the guide's values."""
    guide, ours = exports(documented), exports(text)
    for name in names:
        assert ours.get(name) == guide[name], (f"{site}: {name}: the guide sets {guide[name]!r}, "
                                               f"hpcdist {ours.get(name)!r}")


def mpiexec_options(line: str) -> set[tuple[str, str]]:
    """(flag, value) pairs of a PALS ``mpiexec`` line, spelled one way (``-ppn``/``--ppn``,
    ``--depth=8``/``--depth 8``/``-d 8``, ``--np``/``-n``)."""
    words = shlex.split(line.split(" python", 1)[0])[1:]
    same = {"-ppn": "--ppn", "-d": "--depth", "--np": "-n", "-np": "-n"}
    pairs, i = set(), 0
    while i < len(words):
        flag, value = (words[i].split("=", 1) + [None])[:2] if "=" in words[i] else (words[i], None)
        if value is None and i + 1 < len(words) and not words[i + 1].startswith("-"):
            value, i = words[i + 1], i + 1
        pairs.add((same.get(flag, flag), value))
        i += 1
    return pairs


def exports(text: str) -> dict[str, str]:
    """``export NAME=VALUE`` lines, as bash would set them (no expansion needed for these)."""
    found = {}
    for line in joined(text).splitlines():
        if line.startswith("export ") and "=" in line:
            name, value = shlex.split(line[len("export "):])[0].split("=", 1)
            found[name] = value
    return found


@pytest.mark.parametrize("site", sorted(SITES))
def test_a_preset_renders_what_its_site_documents(site, tmp_path):
    from hpcdist.submission.profiles import presets

    assert set(SITES) <= set(presets())  # the Slurm sites: tests/sites/test_sites_slurm.py
    text = render(site, tmp_path)
    path = os.path.join(GOLDEN, f"site-{site}.sh")
    if UPDATE or not os.path.exists(path):
        with open(path, "w") as f:
            f.write(text)
    with open(path) as f:
        assert text == f.read(), f"{path} differs; HPCDIST_UPDATE_GOLDEN=1 rewrites it after review"
    documented, want = example(site), SITES[site]
    check_points(site, text, documented, want["points"])
    if want["launch"]:
        line, values = want["launch"]
        assert line in documented
        for name, value in values.items():
            line = line.replace("${" + name + "}", value)
        (launch,) = [x for x in joined(text).splitlines() if x.startswith("mpiexec ")]
        missing = mpiexec_options(line) - mpiexec_options(launch)
        assert not missing, f"{site}: the guide's mpiexec has {sorted(missing)}; hpcdist's is:\n{launch}"
    check_exports(site, text, documented, want["env"])
    assert DIFFERENCES[site]


def test_hpcdist_profiles_lists_the_presets_and_shows_one_with_its_sources(tmp_path):
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    (tmp_path / "hpcdist.toml").write_text('[profiles.polaris]\nqueue = "prod"\n[profiles.mine]\nnodes = 4\n')
    hpcdist = [sys.executable, "-m", "hpcdist", "profiles"]
    listed = subprocess.run(hpcdist, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0, listed.stderr
    for site in SITES:
        assert re.search(rf"^{site} +site preset \(.*hpcdist/sites/{site}\.toml\)$", listed.stdout, re.M), listed.stdout
    assert re.search(r"^mine +hpcdist\.toml$", listed.stdout, re.M), listed.stdout
    shown = subprocess.run(hpcdist + ["polaris"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert "https://docs.alcf.anl.gov/running-jobs/example-job-scripts/" in shown.stdout
    assert shown.stdout.rstrip().endswith('# Your settings over the preset, from hpcdist.toml:\nqueue = "prod"')
    # The user's key wins; the preset's others stay.
    (tmp_path / "train.py").write_text("")
    text = subprocess.run([sys.executable, "-m", "hpcdist", "render", "--profile", "polaris", "--nodes", "10",
                           "train.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60).stdout
    assert "#PBS -q prod\n" in text and "#PBS -l select=10:system=polaris\n" in text
    unknown = subprocess.run(hpcdist + ["nosuch"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert unknown.returncode == 1
    assert ("site presets: aurora, derecho, frontier, gadi, jeanzay, lumi, perlmutter, polaris, "
            "torque, university") in unknown.stderr


def test_a_gadi_shaped_job_wide_request_runs_through_qsub(cluster, tmp_path):
    """A job-wide request (``-l ncpus=``, ``-l storage=``, ``-l jobfs=``, no select) with
    torchrun started by pbsdsh, submitted with ``qsub`` and trained to its end.

    The test cluster's PBS is Slurm's emulation (Slurm's qsub wrapper; sbatch reads the ``#PBS``
    lines; tests/cluster/pbsdsh stands in for pbsdsh): it turns a job-wide ``ncpus`` into a
    per-node minimum, so the job is one node of 2 processes, not Gadi's many, and it refuses
    ``-P`` ("sbatch: invalid option -- 'P'"), which a real PBS Pro reads as the project, so the
    project is left out here (the render test above checks the ``#PBS -P`` line)."""
    import testcluster

    env = testcluster.client_env(cluster)
    shutil.copy(os.path.join(testcluster.ROOT, "examples", "quickstart.py"), tmp_path)
    proc = subprocess.run(
        [sys.executable, "-m", "hpcdist", "submit", "--scheduler", "pbs", "--request", "job-wide",
         "--pbs-spread", "pbsdsh", "--nodes", "1", "--procs-per-node", "2", "--resource", "storage=gdata/a00",
         "--resource", "jobfs=1GB", "--json", "--wait", "quickstart.py", "--steps", "5"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"{testcluster.log_excerpt(proc.stdout)}\n{proc.stderr}"
    script = open(json.loads(proc.stdout.splitlines()[0])["script"]).read()
    assert [x for x in script.splitlines() if x.startswith("#PBS -l")] == [
        "#PBS -l ncpus=2", "#PBS -l storage=gdata/a00", "#PBS -l jobfs=1GB"]
    assert sorted(re.findall(r"rank (\d)/2", proc.stdout)) == ["0", "1"], testcluster.log_excerpt(proc.stdout)
    assert "identical on all ranks: True" in proc.stdout


# The budget: a site's script says what its guide's example says in at most 1.3 times its lines
# (docs/decisions.md, 2026-11-29, "The site scripts' fair count"). Like is counted with like: a
# line is a command as the shell reads it (`` \`` continuations joined; a `#PBS` or `#SBATCH`
# directive counts, a comment or a blank line does not), in the example and in the script alike.
# hpcdist's own lines, which no site's example has and every script holds the same, are left out
# of the script's count and bounded apart (OWN_LINES). An example's lines that are no job
# script's are not counted (NOT_SCRIPT); where a site's page was cut after its directives
# (Jean Zay), the directives alone are compared.
BUDGET = 1.3

#: hpcdist's own lines in a site's script: (the line, why it earns its place). At most one each.
OWN_LINES = (
    (r"#PBS -j oe|#SBATCH --output=%x-%j\.out",
     "one log of the job's output and errors, where `hpcdist logs` reads it"),
    (r"#PBS -k oed|#SBATCH --open-mode=append",
     "the log written where it lies while the job runs (PBS), kept whole across a requeue (Slurm)"),
    (r"set -euo pipefail", "a line that fails ends the job: no training starts half set up"),
    (r'cd "\$(PBS_O_WORKDIR|SLURM_SUBMIT_DIR)".*',
     "the job runs where it was submitted (PBS starts it in $HOME)"),
    (r'run_dir=\$\(mktemp -d .*\)',
     "the job's own files (node list, hostfile, job.env) where every node sees them"),
    (r"trap 'rm -rf \"\$run_dir\"' EXIT", "and removed at the job's end"),
    (r"set \+u", "module and conda scripts read unset variables..."),
    (r"set -u", "...and the rest of the script is held to -u again"),
    (r"command -v module .*",
     "a batch shell is not a login shell: `module` may not be defined yet"),
    (r".* 2>/dev/null && exit \"\$status\"",
     "where the set-up failed: whether the job's python can import hpcdist at all (run only then)"),
    (r'echo >&2 "hpcdist: .* cannot (import|find) .*hpcdist.*"',
     "where it cannot, the line that names that python and the fix (`status` quotes it)..."),
    (r"exit 127; }", "...and the status of a command not found, which `status` reads so"),
)

#: Lines of a site's example file that are no job script's lines: not counted.
NOT_SCRIPT = {
    # The TORQUE guide's grammar of the nodes resource, quoted for the request's form.
    "torque": ("nodes {<node_count> |", "<hostname>} [:ppn=<ppn>][:gpus=<gpu>]",
               "[:<property>[:<property>]...] [+ ...]"),
}


def script_lines(text: str) -> list[str]:
    """The commands and directives of a script, each on one line, as the budget counts them."""
    return [line.strip() for line in joined(text).splitlines()
            if line.strip() and (not line.lstrip().startswith("#") or is_directive(line))]


def is_directive(line: str) -> bool:
    return line.lstrip().startswith(("#PBS ", "#SBATCH "))


def fair_count(site: str, script: str, documented: str) -> tuple[int, int, list[str]]:
    """(the script's count, the example's count, hpcdist's own lines left out of the first)."""
    theirs = [line for line in script_lines(documented) if line not in NOT_SCRIPT.get(site, ())]
    ours, own = [], []
    for line in script_lines(script):
        (own if any(re.fullmatch(pattern, line) for pattern, _ in OWN_LINES) else ours).append(line)
    if all(is_directive(line) for line in theirs):  # the page was cut after its directives
        ours = [line for line in ours if is_directive(line)]
    return len(ours), len(theirs), own


def all_sites() -> dict:
    from test_sites_slurm import SITES as SLURM_SITES  # it imports this module: read where used

    return {**SITES, **SLURM_SITES}


@pytest.mark.parametrize("site", sorted(n[:-3] for n in os.listdir(EXAMPLES) if n.endswith(".sh")))
def test_a_sites_script_is_at_most_budget_times_its_guides_example(site, tmp_path):
    sites = all_sites()
    ours, theirs, own = fair_count(site, render(site, tmp_path, sites), example(site, sites))
    assert ours <= BUDGET * theirs, (
        f"{site}: hpcdist's script has {ours} lines where the guide's example has {theirs} "
        f"({ours / theirs:.2f}x, over {BUDGET}x; hpcdist's own {len(own)} lines apart)")
    assert len(own) <= len(OWN_LINES), own
    for pattern, _ in OWN_LINES:  # each at most once: the overhead is bounded
        assert sum(bool(re.fullmatch(pattern, line)) for line in own) <= 1, (site, pattern, own)
