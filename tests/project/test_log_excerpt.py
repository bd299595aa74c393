"""What a failing cluster test shows of a job's log (tests/testcluster.py's log_excerpt).

A failure message is read by the person who must find the cause: it names
each run's log, shows hpcdist's own lines and the first error whole, and
leaves out DeepSpeed's INFO chatter that used to fill the last 4,000 characters.
"""

from __future__ import annotations

import testcluster

CHATTER = "\n".join(f"node1: [2026-11-24 10:00:0{i % 10},000] [INFO] [engine.py:{i}:step] "
                    f"chatter {i}" for i in range(300))


def test_it_names_each_run_and_shows_the_first_error_of_the_run_that_had_it():
    log = ("==> hpcdist: job 12, log /p/job.log <==\n"
           "hpcdist: nodes: node1 node2; master: node1:29500\n"
           f"{CHATTER}\n"
           "node2: Traceback (most recent call last):\n"
           'node2:   File "train.py", line 3, in <module>\n'
           "node2: ValueError: injected failure at step 5\n"
           f"{CHATTER}\n"
           "hpcdist: the training stopped on the walltime warning; the job was resubmitted as job 13\n"
           "==> hpcdist: job 13, log /p/job.restart1.log <==\n"
           f"{CHATTER}\n"
           "resumed from ckpt at step 40\n")
    text = testcluster.log_excerpt(log)
    assert "----- ==> hpcdist: job 12, log /p/job.log <== (" in text
    assert "----- ==> hpcdist: job 13, log /p/job.restart1.log <== (" in text
    run1, run2 = text.split("----- ==> hpcdist: job 13")
    assert "node2: ValueError: injected failure at step 5" in run1 and "the first error, line 302:" in run1
    assert "hpcdist: the training stopped on the walltime warning" in run1
    assert "resumed from ckpt at step 40" in run2 and "Error" not in run2
    assert "[INFO]" not in text
    # Whole lines only: every shown line is a line of the log.
    shown = [line[2:] for line in text.splitlines() if line.startswith("  ")]
    assert shown and all(line in log.splitlines() for line in shown)
