"""A flag's value that begins with a dash, in the form users type: ``--directive --gres=gpu:4``.

argparse reads ``--gres=gpu:4`` after ``--directive`` as an option of its own and refuses the
line ("expected one argument"); only ``--directive=--gres=gpu:4`` passes. :func:`joined` rewrites
the first form into the second before parsing, for an option that takes one value, when the
word after it is no option of the command (so ``--directive --nodes 2`` is still the error it
was). Nothing after the script, nor after ``--``, is touched: those words are the program's.
"""

from __future__ import annotations


def joined(parser, argv: list[str]) -> list[str]:
    """``argv`` with ``--flag -value`` written ``--flag=-value`` where the command's ``--flag``
    takes one value and ``-value`` is none of its options."""
    found = _command(parser, argv)
    if found is None:
        return argv
    command, at = found
    out, k = list(argv), at + 1
    while k < len(out) - 1:
        word = out[k]
        if word == "--" or not word.startswith("-"):
            break  # the script (then its own arguments), or the end of the options
        action = command._option_string_actions.get(word)
        if action is not None and action.nargs is None:  # one value, given as the next word
            value = out[k + 1]
            if value.startswith("-") and value != "-" and not _is_option(command, value):
                out[k:k + 2] = [f"{word}={value}"]
            else:
                k += 1
        k += 1
    return out


def _command(parser, argv: list[str]):
    """``(the subcommand's parser, its position in argv)``, or None."""
    for action in getattr(getattr(parser, "_subparsers", None), "_group_actions", ()):
        choices = getattr(action, "choices", None) or {}
        for k, word in enumerate(argv):
            if word in choices:
                return choices[word], k
    return None


def _is_option(parser, word: str) -> bool:
    """Whether argparse would read ``word`` as one of ``parser``'s options (abbreviated too,
    where the parser allows it; hpcdist's do not)."""
    if word.split("=", 1)[0] in parser._option_string_actions:
        return True
    return bool(parser.allow_abbrev and parser._get_option_tuples(word))
