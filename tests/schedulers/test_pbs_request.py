"""Every PBS request shape a site uses, as the job script writes it, and the checks of a user's own.

The shapes and their sources: PBS Pro chunks (the reference notes' PBS dialects), whole-node
chunks with site resources (ALCF Polaris: ``select=N:system=polaris``, ``filesystems=``), a
job-wide request with a project (NCI Gadi: ``-P``, ``-l ncpus=``, ``-l storage=``), Torque's
``nodes=``. Whether a real PBS accepts them is the cluster tests' question (``qsub`` there is
Slurm's Torque wrapper); here, what hpcdist writes and refuses.
"""

from __future__ import annotations

import re

import pytest

from hpcdist.submission.profiles import ProfileError, build, load_profile
from hpcdist.submission.render import render
from hpcdist.submission.spec import build_spec
from hpcdist.validate import ValidationError


def pbs(**values):
    return build_spec({"script": "t.py", "scheduler": "pbs", **values}, check_files=False)


def resources(spec) -> list[str]:
    """The ``#PBS`` lines of the rendered script, but the name, the log and where it is kept."""
    return [line for line in render(spec, workdir="/w").splitlines()
            if line.startswith("#PBS ") and not re.match(r"#PBS -[Njko] ", line)]


def test_the_default_is_one_select_chunk_per_node_scattered():
    assert resources(pbs(nodes=2, gpus_per_node=4, mem="64G")) == [
        "#PBS -l select=2:ncpus=4:mpiprocs=4:ngpus=4:mem=64gb", "#PBS -l place=scatter"]


def test_a_users_select_replaces_hpcdists_and_gives_the_numbers_it_says():
    spec = pbs(select="2:ncpus=64:mpiprocs=4:ngpus=4")
    assert (spec.nodes, spec.procs_per_node, spec.gpus_per_node) == (2, 4, 4)
    assert resources(spec) == ["#PBS -l select=2:ncpus=64:mpiprocs=4:ngpus=4", "#PBS -l place=scatter"]
    assert "--nproc-per-node=4" in render(spec, workdir="/w") and "-np 2 " in render(spec, workdir="/w")


@pytest.mark.parametrize("select,flags,names", [
    ("2:ncpus=8:mpiprocs=4", {"nodes": 3}, ["2 chunks", "--nodes is 3", "--nodes 2"]),
    ("1:ncpus=8:mpiprocs=4+1:ncpus=8:mpiprocs=4", {"nodes": 1}, ["2 chunks", "--nodes is 1"]),
    ("2:ncpus=8:mpiprocs=4", {"procs_per_node": 2}, ["mpiprocs=4", "--procs-per-node is 2", "--procs-per-node 4"]),
    ("2:ngpus=4", {"gpus_per_node": 2}, ["ngpus=4", "--gpus-per-node is 2"]),
])
def test_a_select_that_disagrees_with_the_flags_is_refused_naming_both(select, flags, names):
    with pytest.raises(ValidationError) as info:
        pbs(select=select, **flags)
    assert info.value.field == "--select" and info.value.value == select
    for name in names:
        assert name in str(info.value), str(info.value)


def test_a_select_or_place_directive_replaces_hpcdists_line_written_once():
    spec = pbs(nodes=2, directives=["-l select=2:ncpus=8:mpiprocs=2:system=polaris", "-lplace=scatter:exclhost"])
    lines = resources(spec)
    assert lines == ["#PBS -l select=2:ncpus=8:mpiprocs=2:system=polaris", "#PBS -l place=scatter:exclhost"]
    assert spec.procs_per_node == 2 and spec.directives == ()
    with pytest.raises(ValidationError, match=r"--directive .*sets select, and so does --select"):
        pbs(select="2", directives=["-l select=2"])
    with pytest.raises(ValidationError, match="in a directive of its own"):
        pbs(directives=["-l select=2,walltime=1:00:00"])


def test_whole_node_chunks_with_site_resources_are_polaris_shaped():
    spec = pbs(nodes=2, gpus_per_node=4, bare_select=True, chunk_resources=["system=polaris"],
               job_resources=["filesystems=home:eagle"], account="myproj")
    assert resources(spec) == ["#PBS -l select=2:system=polaris", "#PBS -l place=scatter",
                               "#PBS -l filesystems=home:eagle", "#PBS -A myproj"]
    with pytest.raises(ValidationError, match="--chunk-resource 'ngpus=4'.*--gpus-per-node"):
        pbs(chunk_resources=["ngpus=4"])
    assert resources(pbs(chunk_resources=["gpu_type=a100"], gpus_per_node=4))[0] == \
        "#PBS -l select=1:ncpus=4:mpiprocs=4:ngpus=4:gpu_type=a100"


def test_a_job_wide_request_with_a_project_is_gadi_shaped():
    spec = pbs(nodes=2, gpus_per_node=4, cpus_per_proc=12, mem="380G", request="job-wide", project="a00",
               queue="gpuvolta", job_resources=["storage=gdata/a00+scratch/a00", "jobfs=200GB"])
    assert resources(spec) == ["#PBS -l ncpus=96", "#PBS -l ngpus=8", "#PBS -l mem=760gb",
                               "#PBS -l storage=gdata/a00+scratch/a00", "#PBS -l jobfs=200GB",
                               "#PBS -q gpuvolta", "#PBS -P a00"]
    with pytest.raises(ValidationError, match="--select .*job-wide"):
        pbs(request="job-wide", select="2:ncpus=4")


@pytest.mark.parametrize("values,field,words", [
    ({"place": "scatter:pack"}, "--place", "two arrangements"),
    ({"place": "everywhere"}, "--place", "not a PBS placement"),
    ({"place": "shared", "exclusive": True}, "--place", "--exclusive"),
    ({"select": "2:ncpus=4;touch x"}, "--select", "not a PBS select"),
    ({"job_resources": ["walltime=1:00:00"]}, "--resource", "--walltime"),
    ({"job_resources": ["filesystems=home eagle"]}, "--resource", "NAME=VALUE"),
    ({"chunk_resources": ["system=a:b"]}, "--chunk-resource", "NAME=VALUE"),
    ({"dialect": "torque", "select": "2:ncpus=4"}, "--select", "Torque"),
    ({"dialect": "torque", "request": "job-wide"}, "--request", "Torque"),
])
def test_bad_request_settings_are_refused_naming_the_field_and_the_fix(values, field, words):
    with pytest.raises(ValidationError) as info:
        pbs(**values)
    assert info.value.field == field and words in str(info.value) and info.value.fix, str(info.value)


@pytest.mark.parametrize("values,field", [({"project": "a00"}, "--project"), ({"select": "2"}, "--select"),
                                          ({"job_resources": ["jobfs=1GB"]}, "--resource")])
def test_pbs_settings_are_refused_under_slurm(values, field):
    with pytest.raises(ValidationError) as info:
        build_spec({"script": "t.py", "scheduler": "slurm", **values}, check_files=False)
    assert info.value.field == field and "is a PBS setting" in str(info.value) and "--scheduler pbs" in str(info.value)


def test_a_profile_holds_the_request_and_names_itself_when_wrong(tmp_path):
    path = tmp_path / "hpcdist.toml"
    path.write_text('[profiles.mine]\nscheduler = "pbs"\nrequest = "job-wide"\nproject = "a00"\n'
                    'job_resources = ["storage=gdata/a00", "jobfs=100GB"]\n'
                    '[profiles.bad]\nscheduler = "pbs"\nselect = "2:ncpus=4"\n')
    spec = build(load_profile("mine", [str(path)]), {"script": "t.py", "nodes": 1}, check_files=False)
    assert resources(spec) == ["#PBS -l ncpus=1", "#PBS -l storage=gdata/a00", "#PBS -l jobfs=100GB", "#PBS -P a00"]
    with pytest.raises(ProfileError, match=r"profiles\.bad\.select = '2:ncpus=4': asks for 2 chunks.*--nodes is 3"):
        build(load_profile("bad", [str(path)]), {"script": "t.py", "nodes": 3}, check_files=False)

