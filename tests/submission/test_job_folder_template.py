"""The job folder's lines of the submitted script live in hpcdist/schedulers/job_folder.sh.j2 (issue
38), not in Python strings: a user's template gets them as before, cannot replace them by a file of
the same name, may call them itself; the ``command`` filter quotes what it is not told is raw."""

from __future__ import annotations

import glob
import os

from test_render import spec_for
from test_shared_records import _status, _submit, _wait_for

from hpcdist.submission.render import render

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(os.path.dirname(HERE), "hpcdist")
JOB_DIR = "/home/alice/project/.hpcdist/jobs/train-1"


def _render(**values) -> str:
    spec = spec_for("slurm", None, "torchrun", {}, requeue=1, array="0-3", **values)
    return render(spec, command_line="hpcdist submit ...", workdir="/home/alice/project", job_dir=JOB_DIR)


def test_the_job_folder_words_are_built_once_and_no_template_parses_the_record():
    """A file of this run under `$job_dir` (a subjob's own: `:+.$`) is named in one place,
    job_files.py, which hands the template words; whether a run is the job recorded is job-setup's
    check in Python (issue 48): no template reads record.json (once by sed, which worked only
    because the record is written with indent=2)."""
    found = []
    for path in glob.glob(os.path.join(PACKAGE, "jobs", "*.py")) + [os.path.join(PACKAGE, "submission", "render.py")]:
        if not path.endswith("job_files.py"):
            text = open(path, encoding="utf-8").read()
            found += [f"{path}: {word}" for word in ('"$job_dir/', ":+.$", ">> \"$job_dir") if word in text]
    for path in glob.glob(os.path.join(PACKAGE, "schedulers", "*.j2")):
        text = open(path, encoding="utf-8").read()
        found += [f"{path}: {word}" for word in ("record.json", "names.record", "sed ", ":+.$") if word in text]
    assert found == []
    with open(os.path.join(PACKAGE, "jobs", "job_files.py"), encoding="utf-8") as f:
        assert ":+.$" in f.read()


def test_a_template_folder_cannot_replace_the_job_folder_lines(tmp_path):
    """job.sh.j2 imports them as hpcdist/job_folder.sh.j2: a user's folder (or their template's own)
    holding a job_folder.sh.j2 changes nothing of ours."""
    ours = _render()
    assert '--run-id "${SLURM_ARRAY_JOB_ID:-${SLURM_JOB_ID:-}}"' in ours
    assert '"$job_dir/exit_code"${SLURM_ARRAY_TASK_ID:+.$SLURM_ARRAY_TASK_ID}' in ours
    (tmp_path / "job_folder.sh.j2").write_text("{% macro exit_code_file() %}replaced{% endmacro %}\n")
    (tmp_path / "slurm.sh.j2").write_text('{% extends "hpcdist/slurm.sh.j2" %}\n')
    assert _render(template_dir=str(tmp_path)) == ours
    (tmp_path / "mine.sh.j2").write_text('{% extends "hpcdist/slurm.sh.j2" %}\n')
    assert _render(template=str(tmp_path / "mine.sh.j2")) == ours


def test_a_template_that_overrides_the_blocks_keeps_ours_and_may_call_the_macros(tmp_path):
    (tmp_path / "slurm.sh.j2").write_text(
        '{% extends "hpcdist/slurm.sh.j2" %}\n'
        '{% block run_dir %}{{ super() | raw }}echo "records in {{ job_files.names.runs | raw }}"\n{% endblock %}\n'
        '{% block monitor %}{{ super() | raw }}ls {{ folder.progress_dir() | raw }}\n{% endblock %}\n')
    ours = _render().split("\n")
    mine = _render(template_dir=str(tmp_path)).split("\n")
    added = [line for line in mine if line not in ours]
    assert added == ['echo "records in runs"', 'ls "$job_dir/progress"${SLURM_ARRAY_TASK_ID:+.$SLURM_ARRAY_TASK_ID}']
    assert [line for line in mine if line not in added] == ours


def test_the_command_filter_quotes_what_is_not_raw(tmp_path):
    (tmp_path / "local.sh.j2").write_text(
        '{{ ["echo", "a b; touch PWNED", "$(id)", "$HOME" | raw] | command }}\n'
        '{{ (["echo"] + ["x" * 40] * 3) | command }}\n')
    spec = spec_for("local", None, "none", {}, template_dir=str(tmp_path))
    assert render(spec, workdir=str(tmp_path)) == ("echo 'a b; touch PWNED' '$(id)' $HOME\n"
                                                   f"echo {'x' * 40} {'x' * 40} \\\n  {'x' * 40}\n")


def test_a_job_through_a_users_template_records_its_end_and_refuses_a_run_by_hand(tmp_path):
    """A real local job through a --template-dir template that extends ours: its exit code is
    recorded in its folder, and a run of its script by hand is refused there, as with ours."""
    import subprocess

    from launch import clean_env

    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "local.sh.j2").write_text(
        '{% extends "hpcdist/local.sh.j2" %}\n{% block launch %}echo "site launch"\n'
        '{{ super() | raw }}{% endblock %}\n')
    job_id = _submit(tmp_path, "import sys\nprint('ran')\nsys.exit(3)\n", "--template-dir", "site")
    _wait_for(lambda: _status(tmp_path, job_id)["state"] not in ("PENDING", "RUNNING"), "the job's end")
    row = _status(tmp_path, job_id)
    assert (row["state"], row["exit_code"]) == ("FAILED", 3)
    folder = glob.glob(str(tmp_path / ".hpcdist" / "jobs" / "*"))[0]
    assert "site launch" in open(os.path.join(folder, "job.log")).read()
    by_hand = subprocess.run(["bash", os.path.join(folder, "job.sh")], cwd=tmp_path, env=clean_env(),
                             capture_output=True, text=True, timeout=120)
    assert by_hand.returncode == 3 and "its end is not recorded there" in by_hand.stderr
    assert open(os.path.join(folder, "exit_code")).read() == "3\n"
