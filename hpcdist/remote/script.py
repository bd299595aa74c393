"""The one POSIX ``sh -c`` script each command runs on the login node (:func:`script`).

Where it runs: written on the laptop; run by the login node's ``sh``, as the user, in one ssh session.

In order: a first line on stdout (:data:`hpcdist.remote.BEGIN`: what a login shell printed before it,
a banner, is not the command's); the values that must not be on the login node's process list
(``--env``: a first line on stdin, into the environment, which only the user can read); the remote
folder, made private when it is made; the check that it is the user's own and that no other user
can write it, nor rename it away (each folder above it is root's or the user's, and sticky where
others can write it); the code snapshot, unpacked from stdin when it comes, checked whole (the
number of files it holds: a scratch purge removes some) and again the user's alone; then
``hpcdist COMMAND``. A submit's answer is written to a file there first (``.hpcdist/remote-submits/``):
one whose connection dropped goes on, and its answer is found later by its token. Every word is
quoted with :func:`shlex.quote`; a refusal is a line that starts with :data:`hpcdist.remote.MARK`.
"""

from __future__ import annotations

import json
import os
import shlex

from hpcdist import __version__
from hpcdist.remote import BEGIN, EXPECT, MARK, Target

#: The variable that carries the laptop's ``--env`` and ``--env-expand`` words to the login node's
#: hpcdist (read from stdin there: never an argument, which every user's ``ps`` shows).
SENT_ENV = "HPCDIST_SENT_ENV"
#: The flags whose values go that way.
SECRET_FLAGS = ("--env", "--env-expand")
#: Where a submit's answer waits, below the remote folder, by its token.
SUBMITS = ".hpcdist/remote-submits"


def folder_word(folder: str) -> str:
    """``folder`` as one shell word: ``~/...`` and ``$VAR/...`` expand on the login node, nothing else."""
    if folder == "~" or folder.startswith("~/"):
        rest = folder[2:]
        return '"$HOME"' + (f"/{shlex.quote(rest)}" if rest else "")
    if folder.startswith("$"):
        name, _, rest = folder[1:].partition("/")
        return f'"${{{name.strip("{}")}}}"' + (f"/{shlex.quote(rest)}" if rest else "")
    return shlex.quote(folder)


def split_secrets(words: list[str], with_value: frozenset) -> tuple[list[str], list[str]]:
    """``words`` (the flags before the script, then the script and its arguments) less the
    ``--env``/``--env-expand`` flags, and those flags as ``--env=NAME=VALUE`` words."""
    kept, secret, k = [], [], 0
    while k < len(words):
        word = words[k]
        if word == "--" or not word.startswith("-"):
            break
        name, eq, _ = word.partition("=")
        if name in SECRET_FLAGS:
            if eq:
                secret.append(word)
            elif k + 1 < len(words):
                secret.append(f"{word}={words[k + 1]}")
                k += 1
        else:
            kept.append(word)
            if not eq and word in with_value and k + 1 < len(words):
                kept.append(words[k + 1])
                k += 1
        k += 1
    return kept + words[k:], secret


def stdin_line(secret: list[str]) -> bytes:
    """The first line on the script's stdin: the secret words, as JSON (one line, ASCII)."""
    return (json.dumps(secret) + "\n").encode()


def take_sent_env(args) -> None:
    """On the login node: the words the laptop sent (:data:`SENT_ENV`) added to ``args`` as the flags
    they were, and the variable removed (the job does not inherit it)."""
    sent = os.environ.pop(SENT_ENV, "")
    if not sent:
        return
    for word in json.loads(sent):
        flag, _, value = word.partition("=")
        key = flag[2:].replace("-", "_")
        setattr(args, key, [*(getattr(args, key, None) or []), value])


def _checks(create: bool, folder: str) -> list[str]:
    """Into the remote folder, made private when it is made, and refused unless it is the user's
    own: no other user can write it or rename it away."""
    lines = ["umask 077"]  # what hpcdist makes there (the folder, the code) is the user's alone
    if create:
        lines.append(f"mkdir -p {folder} || exit 3")  # mkdir's own message names the folder
    lines += [f"cd {folder} 2>/dev/null || {{ echo '{MARK} no-folder' >&2; exit 3; }}", "base=$PWD", "u=$(id -u)",
              # A refusal: the path, its `ls -ld` line and who the user is, for the laptop's message.
              f"bad() {{ printf '{MARK} %s %s\\n' \"$1\" \"$2\" >&2; printf '{MARK} folder %s\\n' \"$base\" >&2; "
              f"printf '{MARK} me %s\\n' \"$(id -un)\" >&2; printf '{MARK} uid %s\\n' \"$u\" >&2; "
              f"printf '{MARK} ls %s\\n' \"$(ls -ld -- \"$2\")\" >&2; exit 3; }}",
              "x=$(find . -prune \\( ! -user \"$u\" -o -perm -020 -o -perm -002 \\) -print)",
              '[ -z "$x" ] || bad untrusted "$base"',
              # Each folder above: root's or the user's, and sticky where others may write.
              'd=$(pwd -P); set --; while [ "$d" != / ]; do d=${d%/*}; d=${d:-/}; set -- "$@" "$d"; done',
              'x=$([ $# -eq 0 ] || find "$@" -prune \\( \\( -perm -020 -o -perm -002 \\) ! -perm -1000 -o ! -user 0 '
              '! -user "$u" \\) -print 2>/dev/null | head -n 1)',
              '[ -z "$x" ] || bad replaceable "$x"']
    return lines


def _code(code: str, count: int, send: bool) -> list[str]:
    """The snapshot ``code/CODE``: whole, unpacked from stdin when ``send`` (aside, then renamed:
    whole or absent), and the user's alone.

    Whole: its list of files (``code/CODE.files``, written from what was unpacked, last) holds the
    ``count`` the laptop expects, and each is there. Not a count of the folder itself: jobs write
    in it (the set-up's ``.hpcdist-run.*``, a user's outputs). A name with a line break never
    reads as whole, and is sent again each time."""
    here, listed = f"code/{code}", f"code/{code}.files"
    whole = (f"whole() {{ [ -f {listed} ] && [ $(wc -l < {listed}) -eq {count} ] && "
             f"(cd {here} && while IFS= read -r f; do [ -e \"$f\" ] || [ -h \"$f\" ] || exit 1; done) < {listed}; }}")
    if send:
        # A folder a purge left part of is filled again in place (a job may be running from it: the
        # same files, by its name).
        fill = (f"whole || {{ mkdir -p code && t=$(mktemp -d code/.incoming.XXXXXX) && tar -xzf - -C \"$t\" && "
                f"(cd \"$t\" && find . ! -type d) > \"$t.files\" && {{ if [ -d {here} ]; then cp -pR \"$t\"/. "
                f"{here}/ && rm -rf \"$t\"; else mv -T \"$t\" {here} 2>/dev/null || rm -rf \"$t\"; fi; }} && "
                f"mv \"$t.files\" {listed}; }} || exit 3")
    else:
        fill = f"whole || {{ echo '{MARK} need-code' >&2; exit 3; }}"
    # Everything in it (but what the job's set-up writes there while it runs): the user's, written by no one else.
    trust = (f"x=$({{ find code -prune \\( ! -user \"$u\" -o -perm -020 -o -perm -002 \\) -print; find {here} {listed} "
             f"-name '.hpcdist-run.*' -prune -o \\( ! -user \"$u\" -o ! -type l \\( -perm -020 -o -perm -002 \\) \\) "
             f"-print; }} | head -n 1)")
    return [whole, fill, trust, '[ -z "$x" ] || bad untrusted "$base/$x"']


def script(target: Target, argv: list[str] | None, *, create: bool = False, code: str | None = None,
           send: bool = False, subdir: str = "", count: int = 0, secrets: bool = False, token: str = "",
           answers: tuple[str, ...] = ()) -> str:
    """The login node's side of one command: ``hpcdist ARGV`` in the remote folder (in the code
    snapshot ``code`` below it, of ``count`` files, unpacked from stdin when ``send``), after the
    checks. ``secrets``: stdin's first line holds the secret words (:func:`stdin_line`); ``token``:
    a submit's answer is kept under it; ``answers``: the tokens whose kept answers to write back."""
    folder, hpcdist = folder_word(target.folder), " ".join([folder_word(target.hpcdist[0]),
                                                            *map(shlex.quote, target.hpcdist[1:])])
    lines = [f"printf '%s\\n' {shlex.quote(BEGIN.rstrip())}"]
    if secrets:  # read before anything else reads stdin (sh's read takes no byte past its line)
        lines += [f"IFS= read -r {SENT_ENV} || exit 3", f"export {SENT_ENV}"]
    lines += _checks(create, folder)
    if argv is None:  # connect: the version as the hpcdist there says it, whatever its age
        lines += [f"v=$({hpcdist} --version 2>&1) || {{ echo '{MARK} missing' >&2; printf '%s\\n' \"$v\" >&2; "
                  f"exit 3; }}", f"[ \"$v\" = {shlex.quote('hpcdist ' + __version__)} ] || "
                  f"{{ printf '{MARK} version %s\\n' \"$v\" >&2; exit 3; }}"]
        return "; ".join(lines + ["echo \"$v $base\""])
    # The command itself checks the version (no second python), and a missing one is said as such.
    lines += [f"command -v {folder_word(target.hpcdist[0])} >/dev/null || {{ echo '{MARK} missing' >&2; exit 3; }}",
              f"{EXPECT}={shlex.quote(__version__)}", f"export {EXPECT}"]
    for kept in answers:  # submits whose answer did not reach the laptop: their answer, if they ended
        f = f"{SUBMITS}/{shlex.quote(kept)}"
        lines.append(f"[ ! -f {f}.rc ] || printf '{MARK} answer %s %s %s\\n' {shlex.quote(kept)} \"$(cat {f}.rc)\" "
                     f"\"$(cat {f}.out)\" >&2")
    if code is not None:
        lines += _code(code, count, send)
        lines += [f"cd code/{code}" + (f"/{shlex.quote(subdir)}" if subdir else "") + " || exit 3",
                  # The job's folder with the others, not in the snapshot; the laptop's profile came as flags.
                  'HPCDIST_JOBS_DIR="$base/.hpcdist/jobs"', "HPCDIST_NO_DEFAULT_PROFILE=1",
                  "export HPCDIST_JOBS_DIR HPCDIST_NO_DEFAULT_PROFILE"]
    command = f"{hpcdist} " + " ".join(map(shlex.quote, argv))
    if not token:
        return "; ".join(lines + [f"exec {command}"])
    # A submit: its answer kept in a file first, so that it ends (and is found) whatever the connection does.
    f = f'"$base"/{SUBMITS}/{shlex.quote(token)}'
    return "; ".join(lines + [f'mkdir -p "$base"/{SUBMITS} || exit 3', "trap '' HUP PIPE",
                              f"echo '{MARK} submitting' >&2",
                              f"{command} >{f}.out 2>{f}.err; s=$?; echo $s >{f}.rc", f"cat {f}.err >&2",
                              f"cat {f}.out", f"echo '{MARK} exit' $s >&2", "exit $s"])


def file_count(files: list[str]) -> int:
    """The lines ``find ! -type d | wc -l`` counts for these files (a name may hold a line break)."""
    return sum(1 + name.count("\n") for name in files)

