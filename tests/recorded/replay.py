#!/usr/bin/env python3
# STAND-IN for PBS's qsub and qstat, for hpcdist's tests only: it REPLAYS what a real OpenPBS
# 23.06 server printed (tests/recorded/openpbs/, copied from /work/shared/reference/openpbs/),
# since no PBS server runs where the tests run. Linked into a test's bin folder as `qstat` and
# `qsub`; what each call answers comes from the plan in $HPCDIST_REPLAY (a JSON file):
#
#   {"qstat": [{"if": ["-x"], "answers": [ANSWER, ...]}, {"answers": [...]}], "qsub": [...],
#    "replace": {"35.pbshead": "6.pbshead"}}
#
# A call takes the first rule of its tool whose "if" words are all in its argv, and the n-th
# answer of that rule on its n-th call (the last one repeats). ANSWER: {"stdout": text or
# "stdout_file": a file in tests/recorded/openpbs/, "stderr": text, "rc": int, "files": {name:
# text}}; "files" are written into the folder of the script qsub is given (what the job would
# write there), "replace" is applied to a stdout_file's text. Each call is appended to
# $HPCDIST_REPLAY.calls as one JSON line: tool, argv, cwd and the environment it got.
import json
import os
import sys

sys.dont_write_bytecode = True
RECORDED = os.path.join(os.path.dirname(os.path.realpath(__file__)), "openpbs")


def main(tool, argv):
    plan_file = os.environ["HPCDIST_REPLAY"]
    with open(plan_file, encoding="utf-8") as f:
        plan = json.load(f)
    calls_file = plan_file + ".calls"
    try:
        with open(calls_file, encoding="utf-8") as f:
            calls = [json.loads(line) for line in f]
    except OSError:
        calls = []
    for number, rule in enumerate(plan.get(tool, [])):
        if all(word in argv for word in rule.get("if", [])):
            break
    else:
        sys.stderr.write("replay: no answer planned for %s %s\n" % (tool, " ".join(argv)))
        return 2
    seen = sum(1 for call in calls if call["tool"] == tool and call["rule"] == number)
    answer = rule["answers"][min(seen, len(rule["answers"]) - 1)]
    with open(calls_file, "a", encoding="utf-8") as f:
        f.write(json.dumps({"tool": tool, "rule": number, "argv": argv, "cwd": os.getcwd(),
                            "env": dict(os.environ)}) + "\n")
    if answer.get("files"):
        script = next(arg for arg in reversed(argv) if os.path.isfile(arg))
        for name, text in answer["files"].items():
            with open(os.path.join(os.path.dirname(os.path.abspath(script)), name), "w") as f:
                f.write(text)
    stdout = answer.get("stdout", "")
    if "stdout_file" in answer:
        with open(os.path.join(RECORDED, answer["stdout_file"]), encoding="utf-8") as f:
            stdout = f.read()
        for old, new in plan.get("replace", {}).items():
            stdout = stdout.replace(old, new)
    sys.stdout.write(stdout)
    sys.stderr.write(answer.get("stderr", ""))
    return answer.get("rc", 0)


if __name__ == "__main__":
    sys.exit(main(os.path.basename(sys.argv[0]), sys.argv[1:]))
