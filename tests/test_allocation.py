"""Allocations from PBS node files and Slurm variables, and the hostfiles made from them."""

from __future__ import annotations

import pytest

from hpcdist.allocation import Allocation, AllocationError


def from_nodefile(tmp_path, text: str) -> Allocation:
    path = tmp_path / "nodefile"
    path.write_bytes(text.encode())
    return Allocation.from_env({"PBS_NODEFILE": str(path)})


def test_pbs_nodefile_counts_slots_in_order_of_first_appearance(tmp_path):
    # Several chunks can land on one host: its lines need not be adjacent.
    alloc = from_nodefile(tmp_path, "n2\nn1\nn2\r\nn3\n\nn1\n")
    assert alloc.hosts == (("n2", 2), ("n1", 2), ("n3", 1))
    assert alloc.total_slots == 5


def test_pbs_names_are_kept_as_written(tmp_path):
    alloc = from_nodefile(tmp_path, "n1.cluster.org\nn1\nN1\n")
    assert alloc.host_names == ["n1.cluster.org", "n1", "N1"]


@pytest.mark.parametrize("text,needle", [
    ("", "empty"),
    ("\n \n", "empty"),
    ("n1 slots=2\n", "line 1"),
    ("n1\nn2:4\n", "line 2"),
    ("n1 n2\n", "one host name per line"),
])
def test_bad_pbs_nodefiles(text, needle, tmp_path):
    with pytest.raises(AllocationError, match=needle):
        from_nodefile(tmp_path, text)


def test_slurm_pairs_node_list_with_tasks_per_node():
    alloc = Allocation.from_slurm("gpu[001-003],cn7", "2(x3),1")
    assert alloc.hosts == (("gpu001", 2), ("gpu002", 2), ("gpu003", 2), ("cn7", 1))


def test_slurm_mismatch_names_both_variables():
    with pytest.raises(AllocationError) as info:
        Allocation.from_slurm("gpu[001-003],cn7", "2(x3)")
    message = str(info.value)
    assert "SLURM_JOB_NODELIST=gpu[001-003],cn7" in message and "4 hosts" in message
    assert "SLURM_TASKS_PER_NODE=2(x3)" in message and "3 counts" in message


def test_slurm_malformed_values_name_the_variable():
    with pytest.raises(AllocationError, match="SLURM_JOB_NODELIST"):
        Allocation.from_slurm("n[1-", "1")
    with pytest.raises(AllocationError, match="SLURM_TASKS_PER_NODE"):
        Allocation.from_slurm("n[1-2]", "2(x0)")


def test_one_precedence_and_a_script_asks_for_its_own_scheduler(tmp_path):
    """Slurm's variables first (they describe the step a process runs in), then PBS's; a job script
    names its scheduler (hpcdist job-setup --scheduler pbs) and reads that one alone."""
    from hpcdist.allocation import read

    nodefile = tmp_path / "nodes"
    nodefile.write_text("n1\nn1\nn2\nn2\n")
    env = {"PBS_NODEFILE": str(nodefile), "SLURM_JOB_NODELIST": "x[1-9]", "SLURM_TASKS_PER_NODE": "1(x9)"}
    assert Allocation.from_env(env).host_names == [f"x{k}" for k in range(1, 10)]
    alloc = read(env, scheduler="pbs")
    assert alloc.hosts == (("n1", 2), ("n2", 2))
    assert str(nodefile) in alloc.source
    assert read({"SLURM_JOB_NODELIST": "x1"}, scheduler="pbs") is None


def test_from_env_missing_nodefile_is_an_error(tmp_path):
    with pytest.raises(AllocationError, match="PBS_NODEFILE=.*cannot be read"):
        Allocation.from_env({"PBS_NODEFILE": str(tmp_path / "gone")})


def test_from_env_inside_an_srun_step_uses_the_step_pair():
    # srun rewrites SLURM_TASKS_PER_NODE to the step's counts but keeps the job's node list.
    env = {"SLURM_JOB_NODELIST": "n[1-2]", "SLURM_TASKS_PER_NODE": "2", "SLURM_STEP_ID": "3",
           "SLURM_STEP_NODELIST": "n2", "SLURM_STEP_TASKS_PER_NODE": "2"}
    assert Allocation.from_env(env).hosts == (("n2", 2),)
    batch = {"SLURM_JOB_NODELIST": "n[1-2]", "SLURM_TASKS_PER_NODE": "2(x2)"}
    assert Allocation.from_env(batch).hosts == (("n1", 2), ("n2", 2))


def test_from_env_without_tasks_per_node_needs_an_override():
    env = {"SLURM_JOB_NODELIST": "n[1-2]"}
    with pytest.raises(AllocationError, match="SLURM_TASKS_PER_NODE.*--slots-per-node"):
        Allocation.from_env(env)
    assert Allocation.from_env(env, slots_per_node=4).hosts == (("n1", 4), ("n2", 4))


def test_slots_per_node_override():
    alloc = Allocation.from_slurm("n[1-2]", "32(x2)").with_slots(4)
    assert alloc.hosts == (("n1", 4), ("n2", 4))
    with pytest.raises(AllocationError):
        alloc.with_slots(0)


def test_outside_a_job_this_host_alone():
    import socket

    alloc = Allocation.from_env({})
    assert alloc.hosts == ((socket.gethostname(), 1),)


def test_hostfile_formats():
    alloc = Allocation.from_slurm("n[1-2]", "2,1")
    assert alloc.to_hostfile("deepspeed") == "n1 slots=2\nn2 slots=1\n"
    assert alloc.to_hostfile("openmpi") == "n1 slots=2\nn2 slots=1\n"
    assert alloc.to_hostfile("mpich") == "n1:2\nn2:1\n"
    assert alloc.to_hostfile("hosts") == "n1\nn1\nn2\n"
    assert alloc.to_hostfile("nodes") == "n1\nn2\n"
    with pytest.raises(AllocationError, match="unknown hostfile format 'xml'"):
        alloc.to_hostfile("xml")


def test_deepspeed_parses_our_hostfile():
    """DeepSpeed's own parser (regex ^(\\S+)\\s+slots=(\\d+), duplicates rejected) accepts it."""
    runner = pytest.importorskip("deepspeed.launcher.runner", reason="deepspeed not installed")
    text = Allocation.from_slurm("gpu[001-003],cn7", "2(x3),1").to_hostfile("deepspeed")
    parsed = runner._parse_hostfile(text.splitlines())
    assert dict(parsed) == {"gpu001": 2, "gpu002": 2, "gpu003": 2, "cn7": 1}


# -- Host names (issue 29 item 20) and node files that are not files (item 21) ---------------------

@pytest.mark.parametrize("raw,shown", [
    (b"-oProxyCommand=touch pwned\n", "'-oProxyCommand=touch'"),  # a word of its own: only the option is read
    (b"n1\n-oProxyCommand=id\n", "'-oProxyCommand=id'"),
    (b"\xef\xbb\xbfn1\n", "'\\ufeffn1'"),      # a byte-order mark from an editor
    (b"n1\x00\n", "'n1\\x00'"),                # a NUL
    (b"n\xff1\n", "'n\\ufffd1'"),              # a byte that is not UTF-8: U+FFFD once read
    (b".hidden\n", "'.hidden'"),
    (b"n\xc3\xa91\n", "'n\\xe91'"),            # not ASCII
])
def test_a_node_file_name_that_is_not_a_host_name_is_refused_in_one_line(tmp_path, raw, shown):
    """PBS_NODEFILE's names reach hostfiles, mpirun, pdsh and `hpcdist doctor`'s ssh; only the
    whitespace was checked, so a byte-order mark, a NUL or U+FFFD passed, and `-o...` (one word)
    was taken by ssh for an option."""
    path = tmp_path / "nodefile"
    path.write_bytes(raw)
    with pytest.raises(AllocationError) as info:
        Allocation.from_env({"PBS_NODEFILE": str(path)})
    if raw.startswith(b"-oProxyCommand=touch"):
        assert "line 1" in str(info.value)  # two words: the node file's own message
        return
    assert str(info.value) == (f"bad host name {shown} in the allocation from PBS_NODEFILE={path}: a host name is "
                               f"ASCII letters, digits and - . _, and does not begin with '-' or '.'")


def test_a_slurm_node_list_of_an_option_is_refused():
    with pytest.raises(AllocationError, match="bad host name '-oProxyCommand=x'"):
        Allocation.from_slurm("-oProxyCommand=x", "1")
    assert Allocation.from_slurm("gpu_n[01-02].cluster-a", "2(x2)").host_names == ["gpu_n01.cluster-a",
                                                                                     "gpu_n02.cluster-a"]


def test_doctor_hands_ssh_a_host_never_an_option(tmp_path):
    """The real ssh client, given what a node file once could hold: with `--` before the host,
    `-oProxyCommand=...` is a host name that does not resolve, and the command never runs."""
    import shutil

    from hpcdist.injob.doctor import ssh_problem

    if shutil.which("ssh") is None:
        pytest.fail("no ssh client: scripts/bootstrap.sh installs openssh-client")
    marker = tmp_path / "ran"
    problem = ssh_problem(f"-oProxyCommand=touch {marker}", timeout=5)
    assert problem is not None and not marker.exists()


def test_a_fifo_or_a_device_as_the_node_file_is_refused_at_once(tmp_path):
    """A real FIFO with no writer (opening it for reading used to wait for ever) and /dev/zero
    (read until the memory ran out): `hpcdist hostfile` answers in one line at once."""
    import os
    import subprocess
    import sys

    from launch import clean_env

    fifo = tmp_path / "nodes"
    os.mkfifo(fifo)
    for path in (str(fifo), "/dev/zero"):
        proc = subprocess.run([sys.executable, "-m", "hpcdist", "hostfile"], env=clean_env(PBS_NODEFILE=path,
                              PBS_JOBID="1.server"), capture_output=True, text=True, timeout=30)
        assert (proc.returncode, proc.stderr) == (1, f"hpcdist hostfile: error: PBS_NODEFILE={path!r} is not a "
                                                     f"regular file: a node file lists one host per line\n")


def test_hostfile_output_to_a_device_a_fifo_or_a_link_is_written_through(tmp_path):
    """`hpcdist hostfile -o` renamed a temporary file over what it was given: as root a device
    (here a real copy of /dev/null made with mknod, not the machine's own) became a regular
    0600 file, and a link was replaced instead of its target written. Now only a regular file
    is renamed onto; a device, a FIFO and /dev/stdout are written in place."""
    import os
    import stat
    import subprocess
    import sys
    import threading

    from launch import clean_env

    nodefile = tmp_path / "nodes"
    nodefile.write_text("n1\nn1\nn2\n")

    def hostfile(output):
        return subprocess.run([sys.executable, "-m", "hpcdist", "hostfile", "-o", str(output)],
                              env=clean_env(PBS_NODEFILE=str(nodefile), PBS_JOBID="1.server"),
                              capture_output=True, text=True, timeout=60)

    device = tmp_path / "null"
    os.mknod(device, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    before = os.lstat(device)
    assert hostfile(device).returncode == 0
    assert (os.lstat(device).st_mode, os.lstat(device).st_ino) == (before.st_mode, before.st_ino)

    target = tmp_path / "hosts.txt"
    target.write_text("old\n")
    os.chmod(target, 0o644)
    link = tmp_path / "hostfile"
    link.symlink_to(target)
    assert hostfile(link).returncode == 0
    assert link.is_symlink() and target.read_text() == "n1 slots=2\nn2 slots=1\n"
    # Private, as every hostfile hpcdist writes (tests/jobs/test_many_jobs.py: 0600 over a 0644 file).
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o600

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(open(fifo).read()))
    reader.start()
    assert hostfile(fifo).returncode == 0
    reader.join(timeout=30)
    assert got == ["n1 slots=2\nn2 slots=1\n"] and stat.S_ISFIFO(os.lstat(fifo).st_mode)

    proc = hostfile("/dev/stdout")  # stdout a pipe here: written into it, /dev/stdout left alone
    assert (proc.returncode, proc.stdout) == (0, "n1 slots=2\nn2 slots=1\n")
    assert os.path.islink("/dev/stdout")
