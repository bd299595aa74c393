"""Tests for hpcdist.schedulers' parsers: job ids and states from scheduler output.

The tables hold the outputs documented in /work/shared/reference/schedulers.md
(sections 6, 7, 9.1, 9.5) and the issues cited beside each row.  The last part
runs the fake scheduler commands in tests/fakes/ in every mode and feeds their
output to the parsers, so that the fakes and the parsers agree.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hpcdist.schedulers.base import (
    CANCELLED,
    COMPLETED,
    FAILED,
    FINISHED_STATES,
    MAX_QUOTED,
    NODE_FAIL,
    OUT_OF_MEMORY,
    PENDING,
    PREEMPTED,
    REQUEUED,
    RUNNING,
    STATES,
    TIMEOUT,
    UNKNOWN,
    JobId,
    JobStatus,
    SchedulerOutputError,
)
from hpcdist.schedulers.pbs.submit import parse_qsub
from hpcdist.schedulers.pbs.qstat import parse_qstat_full_text, parse_qstat_pro_json, parse_qstat_unknown
from hpcdist.schedulers.slurm.submit import (
    parse_sacct,
    parse_sacct_disabled,
    parse_sbatch,
    parse_squeue,
    parse_squeue_unknown,
)

FAKES = Path(__file__).resolve().parents[1] / "fakes"
FAKE_TOOLS = ["sbatch", "qsub", "squeue", "sacct", "qstat", "qdel", "scancel"]

# --------------------------------------------------------------------------
# sbatch
# --------------------------------------------------------------------------

SITE_BANNER = (
    "==============================================================\n"
    " Maintenance 2026-03-14 08:00-20:00: jobs over 36 hours will not start.\n"
    " Project proj42 has used 48750 of 50000 GPU-hours (97%).\n"
    "==============================================================\n"
)

SBATCH_OK = [
    # (stdout, id, cluster)
    ("123\n", "123", None),  # sbatch --parsable (sbatch.c L349-351)
    ("123;foo\n", "123", "foo"),  # --parsable, multi-cluster
    ("123;\n", "123", None),
    ("Submitted batch job 123\n", "123", None),  # sbatch.c L343-346
    ("Submitted batch job 123 on cluster foo\n", "123", "foo"),  # never "foo" as the id
    # snakemake-executor-plugin-slurm#121: last-word parsing gave "nautilus"
    ("Submitted batch job 3969755 on cluster nautilus\n", "3969755", "nautilus"),
    ("15786755\n", "15786755", None),  # NIH Perl wrapper, dask-jobqueue#209
    (SITE_BANNER + "4242\n", "4242", None),  # banner with numbers before the id
    (SITE_BANNER + "Submitted batch job 4242\n", "4242", None),
    # a wrapper running sbatch 2>&1 (simple_slurm's break: warnings on stdout)
    ("sbatch: warning: can't honor --ntasks-per-node set to 4 which doesn't match "
     "the requested tasks 2 with the number of requested nodes 1.\n123\n", "123", None),
    ("sbatch: info: Job submit plugin adjusted the partition\n123;foo\n", "123", "foo"),
    ("123\r\n", "123", None),  # CRLF through ssh or a Windows wrapper
    ("   123   \n\n\n", "123", None),
    ("123_4\n", "123_4", None),  # the id shape the parser accepts
    # wrapper chatter after the Slurm line: the fallback finds it anywhere
    ("Checking quota: 7 jobs in queue\nSubmitted batch job 123\nGood luck!\n", "123", None),
    ("Submitted batch job 1\nSubmitted batch job 2 on cluster b\n", "2", "b"),
]


@pytest.mark.parametrize("stdout, job, cluster", SBATCH_OK)
def test_parse_sbatch(stdout, job, cluster):
    jid = parse_sbatch(stdout, "", 0)
    assert (jid.id, jid.cluster) == (job, cluster)
    assert jid.scheduler == "slurm"
    assert jid.number == job.split("_")[0]
    assert jid.is_array == ("_" in job)


def test_parse_sbatch_bytes_and_warnings_on_stderr():
    jid = parse_sbatch(b"123;foo\n", b"sbatch: warning: something\n")
    assert (jid.id, jid.cluster) == ("123", "foo")


SBATCH_ERRORS = [
    # (stdout, stderr, returncode, what the message must quote)
    ("123\n", "sbatch: error: Batch job submission failed: Invalid account or "
     "account/partition combination specified\n", 1, ["123", "Invalid account"]),
    ("", "sbatch: error: invalid partition specified: gpu\n"
     "sbatch: error: Batch job submission failed: Invalid partition name specified\n",
     1, ["invalid partition specified: gpu", "exit status: 1"]),
    ("Submitted batch job 123\n", "", 2, ["Submitted batch job 123", "exit status: 2"]),
    ("", "", 0, ["(empty)", "expected"]),
    ("\n \n\t\n", "", 0, ["expected"]),
    ("hello world\n", "some words\n", 0, ["hello world", "some words"]),
    ("foo\n", "", 0, ["foo"]),  # a cluster name alone is not an id
    ("123;foo;bar\n", "", 0, ["123;foo;bar"]),
    ("123 foo\n", "", 0, ["123 foo"]),
    ("Submitted batch job\n", "", 0, ["Submitted batch job"]),
    ("Submitted batch job abc\n", "", 0, ["abc"]),
    ("\u0661\u0662\u0663\n", "", 0, ["\u0661\u0662\u0663"]),  # Arabic-Indic digits
    ("-123\n", "", 0, ["-123"]),
    ("123.5\n", "", 0, ["123.5"]),
    (SITE_BANNER, "", 0, ["GPU-hours"]),
]


@pytest.mark.parametrize("stdout, stderr, rc, quoted", SBATCH_ERRORS)
def test_parse_sbatch_errors(stdout, stderr, rc, quoted):
    with pytest.raises(SchedulerOutputError) as info:
        parse_sbatch(stdout, stderr, rc)
    message = str(info.value)
    for text in quoted:
        assert text in message
    assert info.value.stdout == stdout and info.value.stderr == stderr
    assert info.value.returncode == rc
    assert "sbatch" in message


def test_parse_sbatch_unknown_returncode_is_not_an_error():
    assert parse_sbatch("123\n", "", None).id == "123"


# --------------------------------------------------------------------------
# qsub
# --------------------------------------------------------------------------

# dask-jobqueue#699: a site wrapper prints text with numbers before the id.
QSUB_BANNER = (
    "*** NOTICE 2026-01-29: /scratch purge runs every 30 days.\n"
    "*** Your group balance: 120000 node-hours; this job may use up to 64.\n"
    "4096\n"
    "Job submitted to queue workq at 10:42:17 with priority 50.\n"
)

QSUB_OK = [
    # (stdout, id, number, is_array)
    ("5487654.polaris-pbs-01.hsn.cm.polaris.alcf.anl.gov\n",  # Parsl#3906
     "5487654.polaris-pbs-01.hsn.cm.polaris.alcf.anl.gov", "5487654", False),
    ("38438.master.gw4.metoffice.gov.uk\n",  # cylc-flow#4051
     "38438.master.gw4.metoffice.gov.uk", "38438", False),
    ("11202854.server.address.domain\n", "11202854.server.address.domain", "11202854", False),
    ("123.server\n", "123.server", "123", False),
    ("123[].server\n", "123[].server", "123", True),  # OpenPBS arrays (qsub.1B)
    ("1098[].hostname\n", "1098[].hostname", "1098", True),  # Torque -t 0-4
    ("3965544[].pbs-1\n", "3965544[].pbs-1", "3965544", True),  # clustermq#186
    ("0:123.server\n", "123.server", "123", False),  # "weird PBS", dask-jobqueue#134
    (QSUB_BANNER + "123.server\n", "123.server", "123", False),
    (QSUB_BANNER + "123[].server\n", "123[].server", "123", True),
    ("Request 123456.asdfqwer submitted to queue: standard.\n",  # NQSII, PR #131
     "123456.asdfqwer", "123456", False),
    ("123\n", "123", "123", False),  # a server-less id
    ("123.server\r\n", "123.server", "123", False),
    ("  123.server  \n\n", "123.server", "123", False),
    ("12.old\n13.new\n", "13.new", "13", False),  # the last id line wins
]


@pytest.mark.parametrize("stdout, job, number, is_array", QSUB_OK)
def test_parse_qsub(stdout, job, number, is_array):
    jid = parse_qsub(stdout, "", 0)
    assert (jid.id, jid.number, jid.is_array) == (job, number, is_array)
    assert jid.cluster is None
    assert jid.scheduler == "pbs"


QSUB_ERRORS = [
    ("123.server\n", "qsub: Error (15033 - Job Rejected) from hook\n", 1,
     ["123.server", "Job Rejected", "exit status: 1"]),
    ("", "qsub: Unknown queue\n", 1, ["qsub: Unknown queue"]),
    ("", "qsub: Unknown queue\n", 170, ["exit status: 170"]),
    ("", "", 0, ["(empty)", "-z"]),  # qsub -z prints no id
    ("qsub: Unknown queue\n", "", 0, ["qsub: Unknown queue"]),
    ('Your job 123 ("name") has been submitted\n', "", 0, ["Your job 123"]),  # SGE
    ("Job <123> is submitted to queue <normal>.\n", "", 0, ["Job <123>"]),  # LSF
    ("OAR_JOB_ID=123\n", "", 0, ["OAR_JOB_ID=123"]),  # OAR
    ("12:30\n", "", 0, ["12:30"]),  # a time is not "N:" + id
    ("Job submitted at 12:30 with priority 50\n", "", 0, ["priority 50"]),
    ("123 .server\n", "", 0, ["123 .server"]),
    ("123.server extra\n", "", 0, ["extra"]),
    ("\u0661\u0662\u0663.server\n", "", 0, ["server"]),
    # the banner alone: its last line is no id, and the bare "4096" line
    # above it must not be taken for one (dask-jobqueue#699)
    (QSUB_BANNER, "", 0, ["node-hours"]),
]


@pytest.mark.parametrize("stdout, stderr, rc, quoted", QSUB_ERRORS)
def test_parse_qsub_errors(stdout, stderr, rc, quoted):
    with pytest.raises(SchedulerOutputError) as info:
        parse_qsub(stdout, stderr, rc)
    message = str(info.value)
    for text in quoted:
        assert text in message
    assert "qsub" in message


# --------------------------------------------------------------------------
# JobId
# --------------------------------------------------------------------------

MATCHES = [
    # (job id, other text, matches)
    ("38438.master.gw4.metoffice.gov.uk", "38438.master", True),  # cylc-flow#4051
    ("5487654.polaris-pbs-01.hsn.cm.polaris.alcf.anl.gov", "5487654.polaris-pb*", True),
    ("123.polaris-pbs-01.hsn.cm.polaris.alcf.anl.gov", "123.polaris.al*", True),  # Parsl #2408
    ("11202854.server.address.domain", "11202854", True),  # dask-jobqueue#242
    ("11202854", "11202854.server.address.domain", True),
    ("11202854.server.address.domain", "0:11202854.server.address.domain", True),  # #134
    ("11202854.server.address.domain", "  11202854.server\n", True),
    ("11202854.server.address.domain", "11202855.server.address.domain", False),
    ("123.server", "1234.server", False),
    ("123.server", "12.server", False),
    ("123.server", "0123.server", False),
    ("123[].server", "123[].server.long.domain", True),
    ("123[].server", "123[].serv*", True),
    ("123[].server", "123.server", False),
    ("123[].server", "123[4].server", False),  # a subjob is not its array
    ("123[4].server", "123[4].server", True),
    ("123.server", "123[].server", False),
    ("123.server", "server", False),
    ("123.server", "", False),
    ("123.server", "Job Id: 123.server", False),
]


@pytest.mark.parametrize("job, other, expected", MATCHES)
def test_pbs_matches(job, other, expected):
    assert JobId(job, scheduler="pbs").matches(other) is expected


SLURM_MATCHES = [
    ("123", "123", True),
    ("123", " 123\n", True),
    ("123", "123_4", False),
    ("123", "1234", False),
    ("123", "123;foo", False),
    ("123", "123.server", False),
    ("123_4", "123_4", True),
    ("123_4", "123", False),
]


@pytest.mark.parametrize("job, other, expected", SLURM_MATCHES)
def test_slurm_matches(job, other, expected):
    assert JobId(job).matches(other) is expected


def test_matches_takes_jobids_and_rejects_other_types():
    assert JobId("123.a").matches(JobId("123.b"))
    assert not JobId("123.a").matches(JobId("124.a"))
    assert JobId("7").matches(JobId("7", cluster="foo"))
    assert not JobId("7").matches(None)
    assert not JobId("7").matches(7)


def test_jobid_derives_fields():
    assert JobId("123") == JobId("123", None, "123", False, "slurm")
    assert JobId("123_4").is_array and JobId("123_4").number == "123"
    pbs = JobId("123[].server")
    assert (pbs.scheduler, pbs.number, pbs.is_array, pbs.array_index) == ("pbs", "123", True, "")
    assert JobId("123[7].server").array_index == "7"
    assert JobId("123.server").array_index is None
    assert JobId("123_4").array_index == "4"
    assert JobId("123", scheduler="pbs").scheduler == "pbs"
    assert str(JobId("123.server")) == "123.server"
    # number and is_array follow the id, whatever a caller passes
    rebuilt = JobId(id="12345.pbs01", cluster=None, number="12345.pbs01", is_array=True)
    assert (rebuilt.number, rebuilt.is_array) == ("12345", False)
    assert rebuilt.matches("12345.pbs01.cluster.local") and rebuilt == JobId("12345.pbs01")
    with pytest.raises(AttributeError):
        JobId("123").id = "124"  # frozen


@pytest.mark.parametrize(
    "kwargs",
    [
        {"id": ""},
        {"id": " 123"},
        {"id": "abc"},
        {"id": "123.server", "scheduler": "slurm"},
        {"id": "123", "scheduler": "sge"},
        {"id": "1 2"},
        {"id": "0:123.server"},  # qsub's "N:" prefix is dropped by parse_qsub
        {"id": "123.polaris-pb*"},  # a truncated id names no job
    ],
)
def test_jobid_rejects_bad_ids(kwargs):
    with pytest.raises(ValueError):
        JobId(**kwargs)


# --------------------------------------------------------------------------
# SchedulerOutputError
# --------------------------------------------------------------------------


def test_error_message_trims_long_output_but_keeps_both_ends():
    stdout = "A" * 5000 + "THE-END"
    stderr = "sbatch: error: " + "x" * 10000 + " FINAL WORDS"
    with pytest.raises(SchedulerOutputError) as info:
        parse_sbatch(stdout, stderr, 1)
    message = str(info.value)
    assert "THE-END" in message and "FINAL WORDS" in message
    assert "sbatch: error: " in message
    assert "characters cut" in message
    assert len(message) < 2 * MAX_QUOTED + 1000
    assert info.value.stdout == stdout  # the attribute keeps everything


def test_error_pickles_and_is_a_value_error():
    with pytest.raises(ValueError) as info:
        parse_qsub("junk", "more junk", 3)
    err = info.value
    clone = pickle.loads(pickle.dumps(err))
    assert type(clone) is SchedulerOutputError
    assert str(clone) == str(err)
    assert (clone.stdout, clone.stderr, clone.returncode) == ("junk", "more junk", 3)


# --------------------------------------------------------------------------
# squeue
# --------------------------------------------------------------------------

SQUEUE = [
    # (stdout of squeue -h -j ID -o '%T|%r', state, raw, reason)
    ("RUNNING|None\n", RUNNING, "RUNNING", None),
    ("PENDING|Priority\n", PENDING, "PENDING", "Priority"),
    ("PENDING|Resources\n", PENDING, "PENDING", "Resources"),
    ("PENDING|Dependency\n", PENDING, "PENDING", "Dependency"),
    ("PENDING|JobHeldUser\n", PENDING, "PENDING", "JobHeldUser"),
    ("PENDING|BeginTime\n", PENDING, "PENDING", "BeginTime"),
    ("PENDING|QOSMaxGRESPerUser\n", PENDING, "PENDING", "QOSMaxGRESPerUser"),
    ("PENDING|ReqNodeNotAvail, UnavailableNodes:gpu[01-02]\n", PENDING, "PENDING",
     "ReqNodeNotAvail, UnavailableNodes:gpu[01-02]"),
    ("PENDING|(null)\n", PENDING, "PENDING", None),
    ("CONFIGURING|None\n", RUNNING, "CONFIGURING", None),
    ("COMPLETING|None\n", RUNNING, "COMPLETING", None),
    ("SUSPENDED|None\n", PENDING, "SUSPENDED", None),
    ("STOPPED|None\n", PENDING, "STOPPED", None),
    ("COMPLETED|None\n", COMPLETED, "COMPLETED", None),
    ("FAILED|NonZeroExitCode\n", FAILED, "FAILED", "NonZeroExitCode"),
    ("TIMEOUT|TimeLimit\n", TIMEOUT, "TIMEOUT", "TimeLimit"),
    ("CANCELLED|None\n", CANCELLED, "CANCELLED", None),
    ("PREEMPTED|None\n", PREEMPTED, "PREEMPTED", None),
    ("NODE_FAIL|None\n", NODE_FAIL, "NODE_FAIL", None),
    ("BOOT_FAIL|None\n", NODE_FAIL, "BOOT_FAIL", None),
    ("DEADLINE|None\n", TIMEOUT, "DEADLINE", None),
    ("OUT_OF_MEMORY|OutOfMemory\n", OUT_OF_MEMORY, "OUT_OF_MEMORY", "OutOfMemory"),
    ("REQUEUED|None\n", REQUEUED, "REQUEUED", None),
    ("REQUEUE_HOLD|JobHeldAdmin\n", PENDING, "REQUEUE_HOLD", "JobHeldAdmin"),
    ("SPECIAL_EXIT|None\n", FAILED, "SPECIAL_EXIT", None),
    ("SOME_FUTURE_STATE|None\n", UNKNOWN, "SOME_FUTURE_STATE", None),
    ("RUNNING\n", RUNNING, "RUNNING", None),  # -o %T alone
    ("CLUSTER: foo\nRUNNING|None\n", RUNNING, "RUNNING", None),  # squeue -M foo
    ("STATE|REASON\nPENDING|Priority\n", PENDING, "PENDING", "Priority"),  # without -h
    # an array: pending and running tasks
    ("PENDING|Priority\nRUNNING|None\nRUNNING|None\n", RUNNING, "RUNNING", None),
    ("PENDING|Priority\nCOMPLETED|None\n", PENDING, "PENDING", "Priority"),
    ("COMPLETED|None\nFAILED|NonZeroExitCode\n", FAILED, "FAILED", "NonZeroExitCode"),
    ("RUNNING|None\r\n", RUNNING, "RUNNING", None),
    # reasons no other job's end can cure: --wait stops on them (NEVER_RUNS)
    ("PENDING|DependencyNeverSatisfied\n", PENDING, "PENDING, can never run", "DependencyNeverSatisfied"),
    ("PENDING|QOSMaxNodePerJobLimit\n", PENDING, "PENDING, can never run", "QOSMaxNodePerJobLimit"),
    ("PENDING|AssocMaxWallDurationPerJobLimit\n", PENDING, "PENDING, can never run",
     "AssocMaxWallDurationPerJobLimit"),
    ("PENDING|PartitionNodeLimit\n", PENDING, "PENDING", "PartitionNodeLimit"),  # or nodes down a while
    ("PENDING|ReqNodeNotAvail, UnavailableNodes:n[1-2]\n", PENDING, "PENDING",
     "ReqNodeNotAvail, UnavailableNodes:n[1-2]"),
    ("PENDING|QOSMaxJobsPerUserLimit\n", PENDING, "PENDING", "QOSMaxJobsPerUserLimit"),  # others end
]


@pytest.mark.parametrize("stdout, state, raw, reason", SQUEUE)
def test_parse_squeue(stdout, state, raw, reason):
    assert parse_squeue(stdout) == JobStatus(state, None, raw, reason)


@pytest.mark.parametrize("stdout", ["", "\n", "  \n\n", "CLUSTER: foo\n", "STATE|REASON\n"])
def test_parse_squeue_empty_means_gone(stdout):
    assert parse_squeue(stdout) is None


@pytest.mark.parametrize(
    "stdout",
    [
        "running|None\n",
        "slurm_load_jobs error: Invalid job id specified\n",
        "123 RUNNING\n",
        "R|None|extra junk that is fine?\n".replace("R|", "r|"),
        "|None\n",
    ],
)
def test_parse_squeue_rejects_junk(stdout):
    with pytest.raises(SchedulerOutputError) as info:
        parse_squeue(stdout, stderr="squeue said this")
    assert stdout.strip() in str(info.value) and "squeue said this" in str(info.value)


def test_squeue_unknown_job_on_stderr():
    assert parse_squeue_unknown("slurm_load_jobs error: Invalid job id specified\n")
    assert parse_squeue_unknown(
        "scancel: error: Kill job error on job id 123: Invalid job id specified\n")
    assert not parse_squeue_unknown(
        "slurm_load_jobs error: Unable to contact slurm controller (connect failure)\n")
    assert not parse_squeue_unknown("")
    assert not parse_squeue_unknown(None)


# --------------------------------------------------------------------------
# sacct
# --------------------------------------------------------------------------

SACCT = [
    # (stdout of sacct -X -n -P -j ID -o State,ExitCode, state, exit code, raw, reason)
    ("COMPLETED|0:0\n", COMPLETED, 0, "COMPLETED", None),
    ("FAILED|1:0\n", FAILED, 1, "FAILED", None),
    ("FAILED|2:0\n", FAILED, 2, "FAILED", None),
    ("FAILED|0:9\n", FAILED, 137, "FAILED", None),
    ("CANCELLED by 0|0:15\n", CANCELLED, 143, "CANCELLED by 0", "cancelled by uid 0"),
    ("CANCELLED by 1000|0:0\n", CANCELLED, 0, "CANCELLED by 1000", "cancelled by uid 1000"),
    ("CANCELLED+|0:15\n", CANCELLED, 143, "CANCELLED+", None),  # truncated (no -P)
    ("TIMEOUT|0:0\n", TIMEOUT, 0, "TIMEOUT", None),
    ("TIMEOUT|0:15\n", TIMEOUT, 143, "TIMEOUT", None),
    ("OUT_OF_MEMORY|0:125\n", OUT_OF_MEMORY, 253, "OUT_OF_MEMORY", None),
    ("NODE_FAIL|1:0\n", NODE_FAIL, 1, "NODE_FAIL", None),
    ("BOOT_FAIL|0:0\n", NODE_FAIL, 0, "BOOT_FAIL", None),
    ("PREEMPTED|0:0\n", PREEMPTED, 0, "PREEMPTED", None),
    ("DEADLINE|0:0\n", TIMEOUT, 0, "DEADLINE", None),
    ("RUNNING|0:0\n", RUNNING, None, "RUNNING", None),
    ("PENDING|0:0\n", PENDING, None, "PENDING", None),
    ("SUSPENDED|0:0\n", PENDING, None, "SUSPENDED", None),
    ("REQUEUED|0:0\n", REQUEUED, None, "REQUEUED", None),
    ("RESIZING|0:0\n", RUNNING, None, "RESIZING", None),
    # several attempts of a requeued job: the last line is the current one
    ("REQUEUED|0:0\nCOMPLETED|0:0\n", COMPLETED, 0, "COMPLETED", None),
    ("NODE_FAIL|0:0\nPREEMPTED|0:0\nRUNNING|0:0\n", RUNNING, None, "RUNNING", None),
    ("COMPLETED|0:0|\n", COMPLETED, 0, "COMPLETED", None),  # sacct -p
    ("State|ExitCode\nFAILED|3:0\n", FAILED, 3, "FAILED", None),  # without -n
    ("FAILED|\n", FAILED, None, "FAILED", None),
    ("FAILED|1:0\r\n", FAILED, 1, "FAILED", None),
]


@pytest.mark.parametrize("stdout, state, code, raw, reason", SACCT)
def test_parse_sacct(stdout, state, code, raw, reason):
    assert parse_sacct(stdout) == JobStatus(state, code, raw, reason)


@pytest.mark.parametrize("stdout", ["", "\n\n", "State|ExitCode\n"])
def test_parse_sacct_empty(stdout):
    assert parse_sacct(stdout) is None


@pytest.mark.parametrize(
    "stdout",
    [
        "COMPLETED\n",
        "COMPLETED|abc\n",
        "COMPLETED|0\n",
        "COMPLETED|0:0|extra\n",
        "completed|0:0\n",
        "COMPLETED|0:0\njunk\n",
        "CANCELLED by root|0:15\n",
        "COMPLETED|-1:0\n",
    ],
)
def test_parse_sacct_rejects_junk(stdout):
    with pytest.raises(SchedulerOutputError) as info:
        parse_sacct(stdout, stderr="sacct: warning")
    assert "sacct" in str(info.value)


def test_sacct_disabled_on_stderr():
    assert parse_sacct_disabled("sacct: error: Slurm accounting storage is disabled\n")
    assert not parse_sacct_disabled("sacct: error: Problem talking to the database\n")
    assert not parse_sacct_disabled(b"")


# --------------------------------------------------------------------------
# qstat -f -F json (PBS Pro / OpenPBS)
# --------------------------------------------------------------------------


def pro_json(jobs: dict, server: str = "pbs01") -> str:
    """qstat -f -F json as PBS 2022 prints it: tabs, '"key":<tab>value'."""
    doc = {"timestamp": 1767607200, "pbs_version": "2022.1.3", "pbs_server": server}
    if jobs is not None:
        doc["Jobs"] = jobs
    return json.dumps(doc, indent="\t", separators=(",", ":\t")) + "\n"


def pro_job(state, exit_status=None, *, substate=None, comment=None, used=None, limit="01:00:00"):
    job = {
        "Job_Name": "hpcdist-train",
        "Job_Owner": "alice@login01",
        "job_state": state,
        "queue": "workq",
        "server": "pbs01",
        "Resource_List": {"ncpus": 64, "ngpus": 8, "nodect": 2, "place": "scatter:excl",
                          "select": "2:ncpus=32:ngpus=4", "walltime": limit},
        "Variable_List": {"PBS_O_HOME": "/home/alice", "PBS_O_WORKDIR": "/home/alice/runs"},
    }
    if used is not None:
        job["resources_used"] = {"cput": "10:00:00", "ncpus": 64, "walltime": used}
    if substate is not None:
        job["substate"] = substate
    if comment is not None:
        job["comment"] = comment
    if exit_status is not None:
        job["Exit_status"] = exit_status
    return job


PRO_STATES = [
    # (job attributes, state, exit code, reason check)
    (pro_job("Q", substate=10, comment="Not Running: Insufficient amount of resource: ngpus"),
     PENDING, None, "Insufficient amount of resource"),
    (pro_job("H", substate=22), PENDING, None, None),
    (pro_job("W", substate=30), PENDING, None, None),
    (pro_job("T", substate=0), PENDING, None, None),
    (pro_job("S", substate=43), PENDING, None, None),
    (pro_job("U", substate=45), PENDING, None, None),
    (pro_job("R", substate=42, comment="Job run at Mon Jan 05 at 10:00 on (gpu01:ncpus=32)"),
     RUNNING, None, "Job run at"),
    (pro_job("E", 0, substate=50), RUNNING, None, None),  # exiting: no result yet
    (pro_job("B", substate=70), RUNNING, None, None),  # array begun
    (pro_job("M", substate=94), UNKNOWN, None, "moved"),
    (pro_job("F", 0, substate=92, comment="Job run at ... and finished"), COMPLETED, 0, "finished"),
    (pro_job("X", 0, substate=92), COMPLETED, 0, None),  # expired subjob
    (pro_job("F", "0", substate=92), COMPLETED, 0, None),  # a string
    (pro_job("F", 1, substate=92), FAILED, 1, None),
    (pro_job("F", 2, substate=92), FAILED, 2, None),  # array: a subjob failed
    (pro_job("F", 254), FAILED, 254, None),  # execve() failed
    (pro_job("F", 137, used="00:10:00"), FAILED, 137, None),  # shell: child SIGKILLed (OOM killer)
    (pro_job("F", 143, used="01:00:03"), TIMEOUT, 143, "walltime"),
    (pro_job("F", 271, used="00:10:00"), CANCELLED, 143, "signal 15"),  # qdel (256+15)
    (pro_job("F", 265, used="00:10:00"), CANCELLED, 137, "signal 9"),  # 256+9; PSI/J: CANCELED
    (pro_job("F", 271, used="01:00:03"), TIMEOUT, 143, "walltime"),  # killed at the limit
    (pro_job("F", 265, used="72:00:10", limit="72:00:00"), TIMEOUT, 137, "walltime"),
    (pro_job("F", 271), CANCELLED, 143, None),  # no resources_used
    (pro_job("F", 262, used="00:01:00"), FAILED, 134, "signal 6"),  # SIGABRT
    (pro_job("F", -29, used="01:00:07"), TIMEOUT, -29, "WALLTIME"),  # JOB_EXEC_KILL_WALLTIME
    (pro_job("F", -27), OUT_OF_MEMORY, -27, "KILL_MEM"),
    (pro_job("F", -26), OUT_OF_MEMORY, -26, "VMEM"),
    (pro_job("F", -28), TIMEOUT, -28, "CPUT"),
    (pro_job("F", -25), FAILED, -25, "NCPUS_SUM"),
    (pro_job("F", -1), FAILED, -1, "JOB_EXEC_FAIL1"),
    (pro_job("F", -3, comment="job held, too many failed attempts to run"), FAILED, -3, "too many"),
    (pro_job("F", -11), FAILED, -11, "RERUN"),  # PBS Pro: -11 is not walltime
    (pro_job("F", -99), FAILED, -99, "-99"),
    (pro_job("F", substate=91, comment="Job deleted by alice@login01"), CANCELLED, None, "deleted"),
    (pro_job("F", substate=91), CANCELLED, None, "deleted"),
    # OpenPBS 23.06, a running job qdel ended (its script trapped SIGTERM): Exit_status 0, substate 91.
    (pro_job("F", 0, substate=91, comment="Job run at Thu Nov 26 at 04:25 on (pbsn1:ncpus=1) and terminated by "
             "root@pbshead"), CANCELLED, None, "terminated by"),
    (pro_job("F", substate=92), FAILED, None, "without an exit status"),
    (pro_job("F"), FAILED, None, None),
]


@pytest.mark.parametrize("job, state, code, reason", PRO_STATES)
def test_parse_qstat_pro_json_states(job, state, code, reason):
    jid = JobId("12345.pbs01")
    status = parse_qstat_pro_json(pro_json({"12345.pbs01": job}), jid)
    assert (status.state, status.exit_code, status.raw) == (state, code, job["job_state"])
    if reason is not None:
        assert reason in status.reason
    assert status.finished == (state in FINISHED_STATES)


def test_pro_json_finds_the_job_by_number():
    out = pro_json({
        "38437.master": pro_job("F", 1),
        "38438.master": pro_job("R"),  # qstat's shorter server name
        "38438[].master": pro_job("B"),
    }, server="master")
    assert parse_qstat_pro_json(out, JobId("38438.master.gw4.metoffice.gov.uk")).state == RUNNING
    assert parse_qstat_pro_json(out, JobId("38437.master.gw4.metoffice.gov.uk")).state == FAILED
    assert parse_qstat_pro_json(out, JobId("38438[].master.gw4.metoffice.gov.uk")).raw == "B"
    assert parse_qstat_pro_json(out, JobId("38439.master")) is None


def test_pro_json_prefers_the_exact_key():
    out = pro_json({"7.a": pro_job("F", 1), "7.b": pro_job("F", 0)})
    assert parse_qstat_pro_json(out, JobId("7.b")).state == COMPLETED
    assert parse_qstat_pro_json(out, JobId("7.a")).state == FAILED


@pytest.mark.parametrize("out", ["", "\n", pro_json(None), pro_json({})])
def test_pro_json_without_the_job(out):
    assert parse_qstat_pro_json(out, JobId("1.pbs01")) is None


@pytest.mark.parametrize(
    "out",
    [
        "[]",
        "null",
        '"text"',
        '{"Jobs": []}',
        '{"Jobs": {"1.pbs01": "R"}}',
        '{"Jobs": {"1.pbs01": {"queue": "workq"}}}',
        '{"Jobs": {"1.pbs01": {"job_state": "Running"}}}',
        '{"Jobs": {"1.pbs01": {"job_state": 4}}}',
        '{"Jobs": {"1.pbs01": {"job_state": "F", "Exit_status": "zero"}}}',
        '{"Jobs": {"1.pbs01": {"job_state": "F", "Exit_status": 1.5}}}',
        '{"Jobs": {"1.pbs01": {"job_state": "F", "Exit_status": true}}}',
        "qstat: Unknown Job Id 1.pbs01",
        "not json at all",
        "[" * 100000,
    ],
)
def test_pro_json_rejects_junk(out):
    with pytest.raises(SchedulerOutputError) as info:
        parse_qstat_pro_json(out, JobId("1.pbs01"), stderr="the stderr")
    assert "the stderr" in str(info.value)


# JSON that PBS itself got wrong, laid out as PBS prints it.
BROKEN_JSON_HEAD = (
    '{\n\t"timestamp":\t1767607200,\n\t"pbs_version":\t"19.1.1",\n\t"pbs_server":\t"pbs01",\n'
    '\t"Jobs":\t{\n\t\t"12345.pbs01":\t{\n\t\t\t"Job_Name":\t"STDIN",\n'
    '\t\t\t"resources_used":\t{\n\t\t\t\t"cput":\t"00:00:00",\n\t\t\t\t"walltime":\t"00:00:10"\n\t\t\t},\n'
    '\t\t\t"job_state":\t"F",\n'
    '\t\t\t"Resource_List":\t{\n\t\t\t\t"ncpus":\t1,\n\t\t\t\t"walltime":\t"00:00:05"\n\t\t\t},\n'
    '\t\t\t"substate":\t92,\n'
    '\t\t\t"Variable_List":\t{\n'
)
BROKEN_JSON_TAIL = (
    '\t\t\t\t"PBS_O_HOME":\t"/home/alice"\n\t\t\t},\n'
    '\t\t\t"comment":\t"Job run at Mon Jan 05 at 10:00 on (node01:ncpus=1) and finished",\n'
    '\t\t\t"Exit_status":\t271\n\t\t}\n\t}\n}\n'
)
BROKEN_JSON = [
    # openpbs#1255: all-digit environment values printed as bare numbers
    '\t\t\t\t"foo":\t005,\n',
    # openpbs PR #2049: invalid escapes \' and \, in environment values
    '\t\t\t\t"MYVAR":\t"\\\'\\"asads\\"\\\'",\n\t\t\t\t"MYVAR2":\t"ab\\,c",\n',
    # openpbs#2541 (qsub -V): BASH_FUNC_ bodies not escaped
    '\t\t\t\t"BASH_FUNC_module%%":\t"() {  eval "$(/usr/bin/modulecmd bash $*)"\n}",\n',
    # openpbs PR #830: unescaped double quotes
    '\t\t\t\t"NOTE":\t"say "hi"",\n',
    # all of them
    '\t\t\t\t"foo":\t005,\n\t\t\t\t"MYVAR2":\t"ab\\,c",\n'
    '\t\t\t\t"BASH_FUNC_ml%%":\t"() {  eval $($LMOD_DIR/ml_cmd "$@")\n}",\n',
]


@pytest.mark.parametrize("middle", BROKEN_JSON)
def test_pro_json_survives_what_pbs_printed(middle):
    out = BROKEN_JSON_HEAD + middle + BROKEN_JSON_TAIL
    with pytest.raises(ValueError):
        json.loads(out)  # really broken
    status = parse_qstat_pro_json(out, JobId("12345.pbs01"))
    # 271 = 256 + SIGTERM, after more than the requested walltime
    assert (status.state, status.exit_code, status.raw) == (TIMEOUT, 143, "F")
    assert status.reason == (
        "killed by signal 15 after using its whole walltime (00:00:10 of 00:00:05); "
        "Job run at Mon Jan 05 at 10:00 on (node01:ncpus=1) and finished"
    )


def test_pro_json_with_a_table_before_it():
    # openpbs PR #2675: with -u/-a/-n, the plain table is printed before the JSON.
    table = (
        "pbs01:\n"
        "                                                            Req'd  Req'd   Elap\n"
        "Job ID          Username Queue    Jobname    SessID NDS TSK Memory Time  S Time\n"
        "--------------- -------- -------- ---------- ------ --- --- ------ ----- - -----\n"
        "12345.pbs01     alice    workq    STDIN        6410   1   1    --    --  R 25:26\n"
    )
    out = table + pro_json({"12345.pbs01": pro_job("R", substate=42)})
    assert parse_qstat_pro_json(out, JobId("12345.pbs01")).state == RUNNING


def test_pro_json_salvage_without_jobs_is_an_error():
    with pytest.raises(SchedulerOutputError):
        parse_qstat_pro_json('{\n\t"pbs_server":\t"pbs01",\n\t"x":\t"a"b"\n}\n', JobId("1.pbs01"))


def test_pro_json_salvage_of_an_unknown_job_is_none():
    out = BROKEN_JSON_HEAD + BROKEN_JSON[3] + BROKEN_JSON_TAIL
    assert parse_qstat_pro_json(out, JobId("999.pbs01")) is None


# --------------------------------------------------------------------------
# qstat -f text (PBS Pro with -x, and Torque)
# --------------------------------------------------------------------------

PRO_TEXT = """\
Job Id: 5487654.polaris-pbs-01.hsn.cm.polaris.alcf.anl.gov
    Job_Name = hpcdist-train
    Job_Owner = alice@polaris-login-01.hsn.cm.polaris.alcf.anl.gov
    resources_used.cpupercent = 3180
    resources_used.cput = 22:10:41
    resources_used.walltime = 00:42:10
    job_state = F
    queue = prod
    server = polaris-pbs-01.hsn.cm.polaris.alcf.anl.gov
    Checkpoint = u
    ctime = Mon Jan  5 09:58:12 2026
    Resource_List.ncpus = 64
    Resource_List.select = 2:ncpus=32:ngpus=4
    Resource_List.walltime = 01:00:00
    substate = 92
    Variable_List = PBS_O_HOME=/home/alice,PBS_O_LANG=en_US.UTF-8,PBS_O_LOGNAME
\t=alice,PBS_O_PATH=/usr/local/bin:/usr/bin:/bin,PBS_O_WORKDIR=/home/alice
\t/runs,PBS_O_SYSTEM=Linux
    comment = Job run at Mon Jan 05 at 10:00 on (x3006c0s13b0n0:ncpus=32:ngpus=4)
\t+(x3006c0s13b1n0:ncpus=32:ngpus=4) and finished
    Exit_status = {exit}
    Submit_arguments = -N hpcdist-train job.pbs

"""

TORQUE_TEXT = """\
Job Id: 1098.torque-head.cluster.local
    Job_Name = hpcdist-train
    Job_Owner = alice@login01.cluster.local
    resources_used.cput = 00:07:46
    resources_used.energy_used = 0
    resources_used.mem = 3400kb
    resources_used.vmem = 364080kb
    resources_used.walltime = {used}
    job_state = {state}
    queue = batch
    server = torque-head.cluster.local
    Checkpoint = u
    ctime = Mon Jan  5 09:58:12 2026
    Error_Path = login01.cluster.local:/home/alice/hpcdist-train.e1098
    exec_host = node01/0-3+node02/0-3
    Resource_List.nodes = 2:ppn=4:gpus=4
    Resource_List.walltime = 00:01:40
    Resource_List.nodect = 2
    Variable_List = PBS_O_QUEUE=batch,PBS_O_HOME=/home/alice,PBS_O_LOGNAME=ali
\tce,PBS_O_SHELL=/bin/bash
    euser = alice
    {exit_line}
    submit_args = job.pbs
    Walltime.Remaining = 0
    start_count = 1

"""


def torque_text(state, exit_status=None, used="00:00:50"):
    exit_line = f"exit_status = {exit_status}" if exit_status is not None else "egroup = users"
    return TORQUE_TEXT.format(state=state, used=used, exit_line=exit_line)


QSTAT_TEXT = [
    # (text, job id, state, exit code, raw)
    (PRO_TEXT.replace("{exit}", "0"), "5487654.polaris-pbs-01.hsn.cm.polaris.alcf.anl.gov",
     COMPLETED, 0, "F"),
    (PRO_TEXT.replace("{exit}", "0"), "5487654.polaris-pbs-01", COMPLETED, 0, "F"),
    (PRO_TEXT.replace("{exit}", "-29"), "5487654.polaris", TIMEOUT, -29, "F"),
    (PRO_TEXT.replace("{exit}", "-11"), "5487654.polaris", FAILED, -11, "F"),  # Pro: rerun
    (PRO_TEXT.replace("{exit}", "3"), "5487654.polaris", FAILED, 3, "F"),
    (PRO_TEXT.replace("{exit}", "271"), "5487654.polaris", CANCELLED, 143, "F"),
    (PRO_TEXT.replace("job_state = F", "job_state = R").replace("    Exit_status = {exit}\n", ""),
     "5487654.polaris", RUNNING, None, "R"),
    (torque_text("C", 0), "1098.torque-head", COMPLETED, 0, "C"),
    (torque_text("C", 1), "1098.torque-head", FAILED, 1, "C"),
    (torque_text("C", -11, used="00:01:45"), "1098.torque-head", TIMEOUT, -11, "C"),  # OVERLIMIT_WT
    (torque_text("C", -10), "1098.torque-head", OUT_OF_MEMORY, -10, "C"),
    (torque_text("C", -12), "1098.torque-head", TIMEOUT, -12, "C"),
    # Torque tracejob sample: walltime kill recorded as 265, used 7:46 of 1:40
    (torque_text("C", 265, used="00:07:46"), "1098.torque-head", TIMEOUT, 137, "C"),
    (torque_text("C", 271), "1098.torque-head", CANCELLED, 143, "C"),
    (torque_text("C"), "1098.torque-head", FAILED, None, "C"),
    (torque_text("E", 0), "1098.torque-head", RUNNING, None, "E"),
    (torque_text("R"), "1098.torque-head.cluster.local", RUNNING, None, "R"),
    (torque_text("Q"), "1098.torque-head", PENDING, None, "Q"),
    (torque_text("H"), "1098.torque-head", PENDING, None, "H"),
    (torque_text("W"), "1098.torque-head", PENDING, None, "W"),
    (torque_text("T"), "1098.torque-head", PENDING, None, "T"),
    (torque_text("S"), "1098.torque-head", PENDING, None, "S"),
    (torque_text("C", 0).replace("\n", "\r\n"), "1098.torque-head", COMPLETED, 0, "C"),
]


@pytest.mark.parametrize("text, job, state, code, raw", QSTAT_TEXT)
def test_parse_qstat_full_text(text, job, state, code, raw):
    status = parse_qstat_full_text(text, JobId(job, scheduler="pbs"))
    assert (status.state, status.exit_code, status.raw) == (state, code, raw)


def test_qstat_text_continuation_lines_are_joined():
    status = parse_qstat_full_text(PRO_TEXT.replace("{exit}", "0"), JobId("5487654.x"))
    assert status.reason == (
        "Job run at Mon Jan 05 at 10:00 on (x3006c0s13b0n0:ncpus=32:ngpus=4)"
        "+(x3006c0s13b1n0:ncpus=32:ngpus=4) and finished"
    )


def test_qstat_text_several_jobs():
    text = torque_text("C", 0) + torque_text("R").replace("1098.", "1099.") + PRO_TEXT.replace(
        "{exit}", "1")
    assert parse_qstat_full_text(text, JobId("1098.torque-head")).state == COMPLETED
    assert parse_qstat_full_text(text, JobId("1099.torque-head")).state == RUNNING
    assert parse_qstat_full_text(text, JobId("5487654.polaris")).state == FAILED
    assert parse_qstat_full_text(text, JobId("1100.torque-head")) is None
    assert parse_qstat_full_text(text, JobId("1098[].torque-head")) is None


def test_qstat_text_array():
    text = "Job Id: 123[].pbs01\n    job_state = B\n    comment = Job Array Began at Mon\n\n"
    assert parse_qstat_full_text(text, JobId("123[].pbs01")).state == RUNNING
    assert parse_qstat_full_text(text, JobId("123.pbs01")) is None


@pytest.mark.parametrize("text", ["", "\n\n"])
def test_qstat_text_empty(text):
    assert parse_qstat_full_text(text, JobId("1.pbs01")) is None


@pytest.mark.parametrize(
    "text",
    [
        # Torque's qstat -x is XML, not history (reference section 7)
        '<?xml version="1.0"?><Data><Job><Job_Id>1.torque-head</Job_Id>'
        "<job_state>C</job_state><exit_status>0</exit_status></Job></Data>\n",
        "qstat: Unknown Job Id 1.pbs01\n",
        "Job id            Name             User              Time Use S Queue\n",
        "Job Id: 1.pbs01\n    queue = workq\n",  # no job_state
        "Job Id: 1.pbs01\n    job_state = Running\n",
        "Job Id: 1.pbs01\n    job_state = F\n    Exit_status = zero\n",
    ],
)
def test_qstat_text_rejects_junk(text):
    with pytest.raises(SchedulerOutputError):
        parse_qstat_full_text(text, JobId("1.pbs01"))


QSTAT_STDERR = [
    ("qstat: Unknown Job Id 123.srv\n", True),
    ("qstat: Unknown Job Id Error 1098.torque-head.cluster.local\n", True),  # Torque
    ("qstat: 5487654.polaris-pbs-01.hsn.cm.polaris.alcf.anl.gov Job has finished, "
     "use -x or -H to obtain historical job information\n", True),  # Parsl#3906
    ("qdel: Job 123.srv has finished\n", True),
    ("qdel: Unknown Job Id 123.srv\n", True),
    ("", False),
    ("Connection refused\nqstat: cannot connect to server pbs01 (errno=111)\n", False),
    ("qstat: illegally formed job identifier: 123.srv@other\n", False),
    ("qstat: Unauthorized Request\n", False),
]


@pytest.mark.parametrize("stderr, unknown", QSTAT_STDERR)
def test_parse_qstat_unknown(stderr, unknown):
    assert parse_qstat_unknown(stderr) is unknown
    assert parse_qstat_unknown(stderr.encode()) is unknown


def test_states_sets():
    assert FINISHED_STATES < STATES
    assert PENDING not in FINISHED_STATES and REQUEUED not in FINISHED_STATES
    assert UNKNOWN not in FINISHED_STATES


# --------------------------------------------------------------------------
# Random text: every parser answers or raises SchedulerOutputError
# --------------------------------------------------------------------------

FRAGMENTS = [
    "\n", "\r\n", "\t", " ", "    ", "123", "0", "-29", "271", "005", "4242", ";", ":", "|",
    ".", "[", "]", "[]", "*", "_", ",", '"', "\\", "\\'", "{", "}", "\u0663", "\x00",
    "Submitted batch job ", " on cluster ", "foo", "sbatch: warning: ", ".server",
    "Request ", " submitted to queue", "0:", "Job Id: ", "job_state = ", "Exit_status = ",
    "exit_status = ", "job_state", "Exit_status", "substate", "comment", '"Jobs"', '"Jobs":{',
    '"job_state":', '"Exit_status":', '"12345.pbs01":{', "resources_used", "Resource_List",
    '"walltime":"01:00:00"', "walltime = 99:00:00", "F", "C", "R", "Q", "M",
    "RUNNING", "PENDING", "CANCELLED by 0", "COMPLETED", "0:15", "0:0", "State|ExitCode",
    "CLUSTER: ", "STATE|REASON", "None", "Unknown Job Id", "has finished",
]
noisy_text = st.one_of(
    st.text(max_size=300),
    st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=5)), max_size=60).map("".join),
)
job_ids = st.sampled_from(
    [JobId("12345.pbs01"), JobId("12345"), JobId("123[].server"), JobId("1", scheduler="pbs")]
)


def _answers_or_raises(call, *args, allowed=(JobId, JobStatus, type(None))):
    try:
        result = call(*args)
    except SchedulerOutputError as err:
        assert isinstance(str(err), str)
        return None
    assert isinstance(result, allowed), (call.__name__, args, result)
    if isinstance(result, JobStatus):
        assert result.state in STATES
        assert result.exit_code is None or isinstance(result.exit_code, int)
    return result


@settings(max_examples=300, deadline=None)
@given(stdout=noisy_text, stderr=noisy_text, rc=st.sampled_from([0, 0, 0, 1, None]), job=job_ids)
def test_random_text_never_breaks_a_parser(stdout, stderr, rc, job):
    jid = _answers_or_raises(parse_sbatch, stdout, stderr, rc, allowed=JobId)
    if jid is not None:
        assert jid.scheduler == "slurm" and jid.matches(jid.id)
    jid = _answers_or_raises(parse_qsub, stdout, stderr, rc, allowed=JobId)
    if jid is not None:
        assert jid.scheduler == "pbs" and jid.matches(jid.id)
    _answers_or_raises(parse_squeue, stdout)
    _answers_or_raises(parse_sacct, stdout)
    _answers_or_raises(parse_qstat_pro_json, stdout, job)
    _answers_or_raises(parse_qstat_full_text, stdout, job)
    for check in (parse_qstat_unknown, parse_squeue_unknown, parse_sacct_disabled):
        assert isinstance(check(stdout), bool)
    assert isinstance(job.matches(stdout), bool)


def _pbs_json_values():
    scalars = st.one_of(
        st.none(), st.booleans(), st.integers(-(10**20), 10**20), st.floats(allow_nan=False),
        st.text(max_size=10), st.sampled_from(["F", "R", "Q", "C", "X", "M", "0", "-29", "01:00:00"]),
    )
    return st.recursive(
        scalars,
        lambda children: st.one_of(
            st.lists(children, max_size=3),
            st.dictionaries(
                st.sampled_from(["job_state", "Exit_status", "substate", "comment", "walltime",
                                 "resources_used", "Resource_List", "x"]) | st.text(max_size=5),
                children, max_size=5),
        ),
        max_leaves=15,
    )


@settings(max_examples=300, deadline=None)
@given(entry=_pbs_json_values(), key=st.sampled_from(["12345.pbs01", "12345", "12345.pb*", "9.x"]),
       cut=st.integers(0, 400))
def test_random_pbs_json_never_breaks_the_parser(entry, key, cut):
    text = json.dumps({"pbs_server": "pbs01", "Jobs": {key: entry}}, indent="\t")
    _answers_or_raises(parse_qstat_pro_json, text, JobId("12345.pbs01"))
    _answers_or_raises(parse_qstat_pro_json, text[:cut], JobId("12345.pbs01"))  # cut short


@settings(max_examples=200, deadline=None)
@given(
    number=st.integers(0, 10**12),
    cluster=st.from_regex(r"[A-Za-z0-9_.-]{1,20}", fullmatch=True),
    banner=st.lists(st.text(alphabet="abc XYZ:=%0123456789.,()-", max_size=40), max_size=4),
)
def test_sbatch_roundtrip(number, cluster, banner):
    lines = [line for line in banner if line.strip() and not line.strip().isdigit()]
    prefix = "".join(line + "\n" for line in lines)
    jid = parse_sbatch(f"{prefix}{number};{cluster}\n")
    assert (jid.id, jid.cluster) == (str(number), cluster)
    jid = parse_sbatch(f"{prefix}Submitted batch job {number} on cluster {cluster}\n")
    assert (jid.id, jid.cluster) == (str(number), cluster)
    assert parse_sbatch(f"{prefix}{number}\n") == JobId(str(number))


@settings(max_examples=200, deadline=None)
@given(
    number=st.integers(0, 10**12),
    array=st.sampled_from(["", "[]", "[7]"]),
    server=st.from_regex(r"[A-Za-z0-9_-]{1,12}(\.[A-Za-z0-9_-]{1,12}){0,4}", fullmatch=True),
    banner=st.lists(st.text(alphabet="abc XYZ:=%0123456789,()-", max_size=40), max_size=4),
)
def test_qsub_roundtrip(number, array, server, banner):
    # banner lines that contain numbers but are not ids (dask-jobqueue#699)
    lines = [f"note {line} 42" for line in banner]
    ident = f"{number}{array}.{server}"
    jid = parse_qsub("".join(line + "\n" for line in lines) + ident + "\n")
    assert (jid.id, jid.number, jid.is_array) == (ident, str(number), bool(array))
    assert jid.matches(ident) and jid.matches(f"{number}{array}.{server[:3]}*")
    assert jid.matches(f"0:{ident}")
    assert not jid.matches(f"{number + 1}{array}.{server}")


# --------------------------------------------------------------------------
# The fake scheduler commands in tests/fakes/
# --------------------------------------------------------------------------


def fake_env(tmp_path, **modes):
    env = dict(os.environ)
    for key in list(env):
        if key.startswith("HPCDIST_FAKE_"):
            del env[key]
    # The fakes run under "#!/usr/bin/env python3": put this interpreter first
    # (a pyenv shim costs ~0.1 s a call).
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), str(FAKES), env.get("PATH", "")])
    env["HPCDIST_FAKE_LOG"] = str(tmp_path / "fake.log")
    for key, value in modes.items():
        env["HPCDIST_FAKE_" + key.upper()] = value
    return env


def run_fake(tool, args, env, timeout=20, cwd=None, stdin=subprocess.DEVNULL):
    return subprocess.run(
        [str(FAKES / tool), *args], env=env, cwd=cwd, stdin=stdin, capture_output=True,
        text=True, timeout=timeout,
    )


def read_log(tmp_path):
    path = tmp_path / "fake.log"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.parametrize("tool", FAKE_TOOLS)
def test_fakes_are_marked_executable_scripts(tool):
    path = FAKES / tool
    assert os.access(path, os.X_OK)
    text = path.read_text()
    assert text.startswith("#!/usr/bin/env python3\n")
    header = text.split("import ", 1)[0]
    assert "FAKE" in header and "test-cluster" in header
    assert "schedulers.md" in header or "scancel(1)" in header  # what it reproduces
    assert (FAKES / "README.md").exists()


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "job.sh"
    path.write_text("#!/bin/bash\n#SBATCH --nodes=2\n#PBS -l select=2\nsrun hostname\n")
    return path


SBATCH_MODES = [
    # (mode, --parsable given, expected (id, cluster) or the text an error quotes)
    ("parsable", True, ("12345", None)),
    ("parsable", False, ("12345", None)),
    ("parsable-cluster", True, ("12345", "foo")),
    ("parsable-cluster", False, ("12345", "foo")),
    ("plain", True, ("12345", None)),
    ("on-cluster", True, ("12345", "foo")),
    ("banner", True, ("12345", None)),
    ("banner", False, ("12345", None)),
    ("merged-stderr", True, ("12345", None)),
    ("wrapper-number-only", True, ("12345", None)),
    ("no-id", True, "GPU-hours"),
    ("error-with-id", True, "Invalid account"),
    ("fail", True, "invalid partition specified: gpu"),
]


@pytest.mark.parametrize("mode, parsable, expected", SBATCH_MODES)
def test_fake_sbatch_agrees_with_parse_sbatch(tmp_path, script, mode, parsable, expected):
    env = fake_env(tmp_path, sbatch=mode)
    args = (["--parsable"] if parsable else []) + ["--job-name=t", str(script)]
    proc = run_fake("sbatch", args, env)
    if isinstance(expected, tuple):
        jid = parse_sbatch(proc.stdout, proc.stderr, proc.returncode)
        assert (jid.id, jid.cluster) == expected
    else:
        with pytest.raises(SchedulerOutputError) as info:
            parse_sbatch(proc.stdout, proc.stderr, proc.returncode)
        assert expected in str(info.value)
    (entry,) = read_log(tmp_path)
    assert entry["tool"] == "sbatch" and entry["mode"] == mode and entry["argv"] == args
    assert entry["script"] == str(script) and "srun hostname" in entry["script_text"]


def test_fake_sbatch_nih_number(tmp_path, script):
    env = fake_env(tmp_path, sbatch="wrapper-number-only", jobid="15786755")
    proc = run_fake("sbatch", [str(script)], env)
    assert proc.stdout == "15786755\n"
    assert parse_sbatch(proc.stdout, proc.stderr, proc.returncode).id == "15786755"


def test_fake_sbatch_reads_the_script_from_stdin(tmp_path):
    env = fake_env(tmp_path)
    proc = subprocess.run(
        [str(FAKES / "sbatch"), "--parsable"], env=env, input="#!/bin/bash\necho from-stdin\n",
        capture_output=True, text=True, timeout=20)
    assert parse_sbatch(proc.stdout, proc.stderr, proc.returncode).id == "12345"
    (entry,) = read_log(tmp_path)
    assert entry["script"] is None and "from-stdin" in entry["stdin"]


QSUB_MODES = [
    # (mode, args, expected id or the text an error quotes)
    ("pro", [], "12345.pbs01"),
    ("pro", ["-J", "1-4"], "12345[].pbs01"),
    ("pro", ["-z"], "(empty)"),
    ("fqdn", [], "12345.polaris-pbs-01.hsn.cm.polaris.alcf.anl.gov"),
    ("array", [], "12345[].pbs01"),
    ("torque", [], "12345.torque-head.cluster.local"),
    ("torque", ["-t", "0-4"], "12345[].torque-head.cluster.local"),
    ("banner-numbers-first", [], "12345.pbs01"),
    ("prefix", [], "12345.pbs01"),
    ("nqsii", [], "12345.nqs01"),
    ("no-id", [], "node-hours"),
    ("error-with-id", [], "Job Rejected"),
    ("fail", [], "qsub: Unknown queue"),
]


@pytest.mark.parametrize("mode, args, expected", QSUB_MODES)
def test_fake_qsub_agrees_with_parse_qsub(tmp_path, script, mode, args, expected):
    env = fake_env(tmp_path, qsub=mode)
    proc = run_fake("qsub", [*args, str(script)], env)
    if "." in expected and "(" not in expected:
        jid = parse_qsub(proc.stdout, proc.stderr, proc.returncode)
        assert jid.id == expected and jid.number == "12345"
        assert jid.is_array == ("[]" in expected)
    else:
        with pytest.raises(SchedulerOutputError) as info:
            parse_qsub(proc.stdout, proc.stderr, proc.returncode)
        assert expected in str(info.value)
    (entry,) = read_log(tmp_path)
    assert entry["tool"] == "qsub" and entry["script"] == str(script)


def test_fake_qsub_command_form_is_logged(tmp_path):
    env = fake_env(tmp_path)
    proc = run_fake("qsub", ["-l", "select=1", "--", "/bin/sleep", "30"], env)
    assert parse_qsub(proc.stdout).id == "12345.pbs01"
    (entry,) = read_log(tmp_path)
    assert entry["command"] == ["/bin/sleep", "30"] and entry["script"] is None


SQUEUE_MODES = [
    ("pending", PENDING), ("held", PENDING), ("pending-resources", PENDING),
    ("running", RUNNING), ("completing", RUNNING), ("completed", COMPLETED),
    ("failed", FAILED), ("cancelled", CANCELLED), ("timeout", TIMEOUT),
    ("preempted", PREEMPTED), ("array", RUNNING), ("gone", None),
]


@pytest.mark.parametrize("mode, state", SQUEUE_MODES)
@pytest.mark.parametrize(
    "args",
    [
        ["-h", "-j", "12345", "-o", "%T|%r"],
        ["--noheader", "--jobs=12345", "--format=%T|%r", "--clusters=foo"],
        ["-j", "12345", "-o", "%T|%r"],  # header line
    ],
)
def test_fake_squeue_agrees_with_parse_squeue(tmp_path, mode, state, args):
    proc = run_fake("squeue", args, fake_env(tmp_path, squeue=mode))
    assert proc.returncode == 0, proc.stderr
    status = parse_squeue(proc.stdout, stderr=proc.stderr)
    assert (status.state if status else None) == state


@pytest.mark.parametrize("mode, unknown", [("invalid", True), ("fail", False)])
def test_fake_squeue_errors(tmp_path, mode, unknown):
    proc = run_fake("squeue", ["-h", "-j", "12345", "-o", "%T|%r"], fake_env(tmp_path, squeue=mode))
    assert proc.returncode == 1 and proc.stdout == ""
    assert parse_squeue_unknown(proc.stderr) is unknown


def test_fake_squeue_refuses_other_formats(tmp_path):
    proc = run_fake("squeue", ["-h", "-j", "12345", "-o", "%i %T"], fake_env(tmp_path))
    assert proc.returncode == 2 and "only -o" in proc.stderr


def test_fake_squeue_sequence_follows_a_job(tmp_path):
    env = fake_env(tmp_path, squeue="pending,running,gone")
    args = ["-h", "-j", "12345", "-o", "%T|%r"]
    seen = []
    for _ in range(4):
        status = parse_squeue(run_fake("squeue", args, env).stdout)
        seen.append(status.state if status else None)
    assert seen == [PENDING, RUNNING, None, None]
    assert [e["mode"] for e in read_log(tmp_path)] == ["pending", "running", "gone", "gone"]


def test_fake_unknown_mode_fails_loudly(tmp_path):
    proc = run_fake("squeue", ["-h", "-j", "1", "-o", "%T|%r"], fake_env(tmp_path, squeue="sideways"))
    assert proc.returncode == 2 and "unknown HPCDIST_FAKE_SQUEUE mode 'sideways'" in proc.stderr


SACCT_MODES = [
    ("completed", COMPLETED, 0), ("failed", FAILED, 1), ("cancelled", CANCELLED, 143),
    ("timeout", TIMEOUT, 0), ("oom", OUT_OF_MEMORY, 253), ("node-fail", NODE_FAIL, 1),
    ("preempted", PREEMPTED, 0), ("running", RUNNING, None), ("pending", PENDING, None),
    ("requeued", COMPLETED, 0), ("empty", None, None),
]


@pytest.mark.parametrize("mode, state, code", SACCT_MODES)
@pytest.mark.parametrize(
    "args",
    [
        ["-X", "-n", "-P", "-j", "12345", "-o", "State,ExitCode"],
        ["-XnP", "--jobs=12345", "--format=State,ExitCode"],
        ["-X", "-p", "-j", "12345", "-o", "State,ExitCode"],  # header and trailing "|"
    ],
)
def test_fake_sacct_agrees_with_parse_sacct(tmp_path, mode, state, code, args):
    proc = run_fake("sacct", args, fake_env(tmp_path, sacct=mode))
    assert proc.returncode == 0, proc.stderr
    status = parse_sacct(proc.stdout)
    if state is None:
        assert status is None
    else:
        assert (status.state, status.exit_code) == (state, code)


@pytest.mark.parametrize("mode, disabled", [("disabled", True), ("fail", False)])
def test_fake_sacct_errors(tmp_path, mode, disabled):
    proc = run_fake("sacct", ["-X", "-n", "-P", "-j", "1", "-o", "State,ExitCode"],
                    fake_env(tmp_path, sacct=mode))
    assert proc.returncode == 1 and parse_sacct_disabled(proc.stderr) is disabled


def test_fake_sacct_refuses_other_queries(tmp_path):
    env = fake_env(tmp_path)
    assert run_fake("sacct", ["-X", "-n", "-P", "-j", "1", "-o", "JobID,State"], env).returncode == 2
    assert run_fake("sacct", ["-X", "-n", "-j", "1", "-o", "State,ExitCode"], env).returncode == 2


QSTAT_SCENARIOS = {
    # scenario: (pro (state, exit), torque (state, exit) or None when pro only)
    "queued": ((PENDING, None), (PENDING, None)),
    "held": ((PENDING, None), (PENDING, None)),
    "running": ((RUNNING, None), (RUNNING, None)),
    "exiting": ((RUNNING, None), (RUNNING, None)),
    "finished": ((COMPLETED, 0), (COMPLETED, 0)),
    "failed": ((FAILED, 1), (FAILED, 1)),
    "walltime": ((TIMEOUT, -29), (TIMEOUT, -11)),
    "walltime-signal": ((TIMEOUT, 143), (TIMEOUT, 137)),
    "killed": ((CANCELLED, 143), (CANCELLED, 143)),
    "oom": ((OUT_OF_MEMORY, -27), (OUT_OF_MEMORY, -10)),
    "deleted": ((CANCELLED, None), None),
    "moved": ((UNKNOWN, None), None),
    "bad-json": ((COMPLETED, 0), None),
}
FINISHED_SCENARIOS = {"finished", "failed", "walltime", "walltime-signal", "killed", "oom",
                      "deleted", "bad-json"}


@pytest.mark.parametrize("scenario", sorted(QSTAT_SCENARIOS))
@pytest.mark.parametrize("form", ["json", "text"])
def test_fake_qstat_pro_agrees(tmp_path, scenario, form):
    expected = QSTAT_SCENARIOS[scenario][0]
    env = fake_env(tmp_path, qstat=scenario)
    jid = JobId("12345.pbs01")
    args = ["-f", "-F", "json", "-x", jid.id] if form == "json" else ["-f", "-x", jid.id]
    proc = run_fake("qstat", args, env)
    assert proc.returncode == 0, proc.stderr
    parse = parse_qstat_pro_json if form == "json" else parse_qstat_full_text
    status = parse(proc.stdout, jid)
    assert (status.state, status.exit_code) == expected
    if scenario == "bad-json" and form == "json":
        with pytest.raises(ValueError):
            json.loads(proc.stdout)
    # without -x a finished job is "unknown" to qstat (Parsl#3906)
    proc = run_fake("qstat", [a for a in args if a != "-x"], env)
    if scenario in FINISHED_SCENARIOS:
        assert proc.returncode == 35 and proc.stdout == ""
        assert parse_qstat_unknown(proc.stderr)
    else:
        assert proc.returncode == 0 and parse(proc.stdout, jid).state == expected[0]


@pytest.mark.parametrize("scenario", sorted(s for s, v in QSTAT_SCENARIOS.items() if v[1]))
def test_fake_qstat_torque_agrees(tmp_path, scenario):
    expected = QSTAT_SCENARIOS[scenario][1]
    env = fake_env(tmp_path, qstat=scenario, pbs_flavor="torque")
    jid = parse_qsub(run_fake("qsub", ["job.sh"], fake_env(tmp_path, qsub="torque")).stdout)
    proc = run_fake("qstat", ["-f", jid.id], env)
    assert proc.returncode == 0, proc.stderr
    status = parse_qstat_full_text(proc.stdout, jid)
    assert (status.state, status.exit_code) == expected
    # On Torque, -x is XML, which the text parser refuses (reference section 7)
    proc = run_fake("qstat", ["-f", "-x", jid.id], env)
    assert proc.stdout.startswith("<?xml")
    with pytest.raises(SchedulerOutputError):
        parse_qstat_full_text(proc.stdout, jid)
    # and -F json does not exist there
    proc = run_fake("qstat", ["-f", "-F", "json", jid.id], env)
    assert proc.returncode == 2 and "invalid option" in proc.stderr


@pytest.mark.parametrize("flavor", ["pro", "torque"])
def test_fake_qstat_unknown_and_fail(tmp_path, flavor):
    env = fake_env(tmp_path, qstat="unknown,fail", pbs_flavor=flavor)
    proc = run_fake("qstat", ["-f", "12345.pbs01"], env)
    assert proc.returncode == 153 and parse_qstat_unknown(proc.stderr)
    assert parse_qstat_full_text(proc.stdout, JobId("12345.pbs01")) is None
    proc = run_fake("qstat", ["-f", "12345.pbs01"], env)
    assert proc.returncode == 1 and not parse_qstat_unknown(proc.stderr)


def test_fake_qstat_short_server_name(tmp_path):
    # cylc-flow#4051: qsub says 38438.master.gw4.metoffice.gov.uk, qstat 38438.master
    jid = parse_qsub(run_fake("qsub", ["job.sh"], fake_env(
        tmp_path, qsub="pro", jobid="38438", pbs_server="master.gw4.metoffice.gov.uk")).stdout)
    assert jid.id == "38438.master.gw4.metoffice.gov.uk"
    env = fake_env(tmp_path, qstat="finished", qstat_id="38438.master")
    proc = run_fake("qstat", ["-f", "-F", "json", "-x", jid.id], env)
    assert '"38438.master"' in proc.stdout
    assert parse_qstat_pro_json(proc.stdout, jid).state == COMPLETED
    proc = run_fake("qstat", ["-f", "-x", jid.id], env)
    assert proc.stdout.startswith("Job Id: 38438.master\n")
    assert parse_qstat_full_text(proc.stdout, jid).state == COMPLETED


def test_fake_qstat_table_truncates_like_polaris(tmp_path):
    jid = parse_qsub(run_fake("qsub", ["job.sh"], fake_env(tmp_path, qsub="fqdn")).stdout)
    proc = run_fake("qstat", [jid.id], fake_env(tmp_path, qstat="running"))
    row = proc.stdout.splitlines()[2]
    shown = row.split()[0]
    assert shown == "12345.polaris-pb*" and jid.matches(shown)


@pytest.mark.parametrize(
    "tool, mode, rc, unknown",
    [
        ("qdel", "ok", 0, False),
        ("qdel", "unknown", 153, True),
        ("qdel", "finished", 35, True),
        ("qdel", "fail", 1, False),
        ("scancel", "ok", 0, False),
        ("scancel", "invalid", 1, True),
        ("scancel", "fail", 1, False),
    ],
)
def test_fake_cancel_commands(tmp_path, tool, mode, rc, unknown):
    proc = run_fake(tool, ["12345.pbs01" if tool == "qdel" else "12345"],
                    fake_env(tmp_path, **{tool: mode}))
    assert proc.returncode == rc and proc.stdout == ""
    check = parse_qstat_unknown if tool == "qdel" else parse_squeue_unknown
    assert check(proc.stderr) is unknown
    (entry,) = read_log(tmp_path)
    assert entry["tool"] == tool and entry["argv"][-1].startswith("12345")


def test_fakes_hang_until_killed(tmp_path):
    """Each fake's hang mode is still running after 2 s, and is killed then."""
    args = {
        "sbatch": ["--parsable", "job.sh"],
        "qsub": ["job.sh"],
        "squeue": ["-h", "-j", "1", "-o", "%T|%r"],
        "sacct": ["-X", "-n", "-P", "-j", "1", "-o", "State,ExitCode"],
        "qstat": ["-f", "1.pbs01"],
        "qdel": ["1.pbs01"],
        "scancel": ["1"],
    }
    env = fake_env(tmp_path, **{tool: "hang" for tool in FAKE_TOOLS})
    procs = {}
    try:
        for tool in FAKE_TOOLS:
            procs[tool] = subprocess.Popen(
                [str(FAKES / tool), *args[tool]], env=env, stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            )
        deadline = time.monotonic() + 2
        for tool, proc in procs.items():
            with pytest.raises(subprocess.TimeoutExpired):
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            assert proc.poll() is None, f"{tool} stopped by itself"
    finally:
        for proc in procs.values():
            proc.kill()
            proc.wait(timeout=10)
            proc.stdout.close()
            proc.stderr.close()
    assert sorted(e["tool"] for e in read_log(tmp_path)) == sorted(FAKE_TOOLS)
    assert all(e["mode"] == "hang" for e in read_log(tmp_path))
