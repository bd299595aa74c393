"""One rule for ending what a job started, whoever ends it: ``hpcdist agents`` (one node's agent
failed: the others) and ``hpcdist supervise`` (a failed node, a hang, the job's own end).

Where it runs: inside the job script, on the first node.

SIGTERM first, so that a rank can save a checkpoint on its way out; SIGKILL to what is left after
:data:`GRACE_S`. The signals that end a job (a cancel, the walltime, Ctrl-C, a lost session) are
passed on to what runs; a site's warning signals are passed on too, to a launcher that relays them
to its ranks (srun), never to torchrun's agents, which USR1 would end.
"""

import signal

#: Seconds what is ended gets after SIGTERM before SIGKILL: a launcher cleans up every node in it
#: (DeepSpeed's waits for its ranks), and a rank saves its checkpoint.
GRACE_S = 20.0
#: The signals that end a job, passed on to what runs.
ENDING = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
#: A site's warning before the walltime or a preemption (``--signal=USR1@300``), passed on to a
#: launcher that relays it to its ranks.
WARNINGS = (signal.SIGUSR1, signal.SIGUSR2)
