"""Cluster profiles in TOML: lookup order, precedence, and errors naming the key and the file."""

from __future__ import annotations

import pytest

from hpcdist.profiles import ProfileError, load_profile, merge


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
