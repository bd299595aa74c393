"""A flag's value that begins with a dash, in the form users type: ``--directive --gres=gpu:4``.

argparse reads ``--gres=gpu:4`` after ``--directive`` as an option of its own and refuses the
line ("expected one argument"); only ``--directive=--gres=gpu:4`` passes. :func:`joined` rewrites
the first form into the second before parsing, for a job option that takes one value (the table
of :mod:`hpcdist.submission.options` says which), when the word after it is no option of the command (so
``--directive --nodes 2`` is still the error it was). Nothing after the script, nor after
``--``, is touched: those words are the program's.
"""

from __future__ import annotations


def joined(argv: list[str], commands: dict) -> list[str]:
    """``argv`` with ``--flag -value`` written ``--flag=-value`` where the command's ``--flag``
    takes one value and ``-value`` is none of its options. ``commands``: the subcommands that take
    the job options, each with the options it adds of its own (``{"submit": ("--wait", ...)}``)."""
    at = next((k for k, word in enumerate(argv) if not word.startswith("-")), None)
    if at is None or argv[at] not in commands:
        return argv
    from hpcdist.submission.options import FLAGS_WITH_A_VALUE, OPTION_FLAGS

    known = OPTION_FLAGS | set(commands[argv[at]]) | {"-h", "--help"}
    out, k = list(argv), at + 1
    while k < len(out) - 1:
        word = out[k]
        if word == "--" or not word.startswith("-"):
            break  # the script (then its own arguments), or the end of the options
        if word in FLAGS_WITH_A_VALUE:  # one value, given as the next word
            value = out[k + 1]
            if value.startswith("-") and value != "-" and value.split("=", 1)[0] not in known:
                out[k:k + 2] = [f"{word}={value}"]
            else:
                k += 1
        k += 1
    return out
