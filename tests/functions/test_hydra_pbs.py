"""Hydra's launcher for PBS (hydra_plugins/hpcdist_pbs_launcher/): `hydra/launcher=submitit_pbs`.

A unit row: Hydra finds the launcher and its config. A cluster row: docs/guide/functions.md's Hydra
app and command, run as written on the real OpenPBS 23.06 (tests/openpbs.py) from the head: the
2x2 `--multirun` is one PBS array whose four runs log their own parameters on the moms.
"""

from __future__ import annotations

import shlex
import subprocess
import sys

import pytest

import openpbs
import testcluster
from docblocks import blocks

pytest.importorskip("hydra_plugins.hydra_submitit_launcher")

PAGE = testcluster.ROOT / "docs" / "guide" / "functions.md"


def _blocks():
    found = [b for b in blocks(str(PAGE), PAGE.read_text()) if "test_hydra_pbs.py" in (b.arg or "")]
    (app,) = [b for b in found if b.lang == "python"]
    (command,) = [b for b in found if b.lang == "bash"]
    return app.text, command.text.strip()


def test_hydra_finds_the_pbs_launcher_and_its_config():
    """In a fresh process, as Hydra itself looks (the `hydra_plugins` namespace package)."""
    code = ("from hydra.core.plugins import Plugins\nfrom hydra.plugins.launcher import Launcher\n"
            "from hydra.core.config_store import ConfigStore\n"
            "names = [p.__name__ for p in Plugins.instance().discover(Launcher)]\n"
            "node = ConfigStore.instance().repo['hydra']['launcher']['submitit_pbs.yaml'].node\n"
            "print('PbsLauncher' in names, node._target_, node.queue, node.max_num_timeout)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/", timeout=120)
    assert out.stdout.split() == ["True", "hydra_plugins.hpcdist_pbs_launcher.pbs_launcher.PbsLauncher", "None",
                                  "0"], out.stderr


def test_the_guides_hydra_sweep_runs_as_one_pbs_array(openpbs_cluster, tmp_path):
    """The 2x2 sweep of the guide: one array job of four subjobs (hpcdist's PBS status of it), each
    run's own log naming its parameters and a mom's host. About 3 s here, the server's start aside."""
    app, command = _blocks()
    assert command.startswith("python my_app.py --multirun hydra/launcher=submitit_pbs ")
    openpbs_cluster.history(False)
    (tmp_path / "my_app.py").write_text(app)
    line = shlex.quote(sys.executable) + command[len("python"):]
    proc = openpbs_cluster.on(openpbs.HEAD, line, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, f"{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    (sweep,) = [p for p in (tmp_path / "multirun").glob("*/*") if p.is_dir()]
    logs = {}
    for k in range(4):
        text = (sweep / str(k) / "my_app.log").read_text()
        line = next(line for line in text.splitlines() if "[__main__]" in line)  # submitit logs there too
        words = dict(w.split("=", 1) for w in line.split() if "=" in w)
        logs[k] = (words["lr"], words["batch"], line.split()[-1])
    assert [v[:2] for v in logs.values()] == [("0.001", "16"), ("0.001", "32"),
                                              ("0.0003", "16"), ("0.0003", "32")], logs
    assert {v[2] for v in logs.values()} <= {"pbsn1", "pbsn2"}, logs
    # One PBS array job of four (submitit's ids 123_0 .. 123_3), its script hpcdist's (-J 0-3).
    ids = sorted(p.name for p in (sweep / ".submitit").iterdir() if p.name[:1].isdigit())
    assert len(ids) == 4 and ids == [f"{ids[0].split('_')[0]}_{k}" for k in range(4)], ids
    scripts = list((sweep / ".submitit").glob("*/*_submission.sh"))
    assert scripts and all("#PBS -J 0-3" in s.read_text() for s in scripts), scripts
    assert len({s.resolve() for s in scripts}) == 1, scripts
