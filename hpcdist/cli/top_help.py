"""`hpcdist --help`, written out: the list of commands as argparse formats it at 80 columns.

Building the 19 parsers to print it cost three times `python -c pass`. tests/cli/test_cli.py holds it
equal to what :func:`hpcdist.cli.build_parser` formats, and rewrites it with
``HPCDIST_UPDATE_GOLDEN=1``.
"""

TEXT = """\
usage: hpcdist [-h] [--version] COMMAND ...

Distributed PyTorch on PBS and Slurm clusters.

commands:
  render      print the job script for a training script
  submit      write the job script and submit it
  status      the state of submitted jobs
  logs        a job's output
  watch       each rank's progress in a running job; stragglers and hangs
  stacks      every rank's Python stack in a running job, grouped
  report      one page (HTML, offline) of a job: start-up, each rank's steps,
              stragglers and hangs; a sweep's sets
  cancel      cancel a job
  doctor      check every node of the allocation: ssh, launchers, versions,
              GPUs, master port
  profiles    list the profiles and site presets; show one
  connect     open the ssh connection to a cluster that the other commands use
              (the only one that may prompt)
  disconnect  close the ssh connection to a cluster

inside a job (env and hostfile are yours to use there; hpcdist's job scripts run the others):
  env         show this process's rank, local rank, world size, node rank and
              master
  hostfile    write the allocation's hostfile (run inside a job)
  supervise   run a pdsh-based launcher; end it on every node when one node
              fails (in job scripts)
  requeue     requeue (Slurm) or resubmit (PBS) this job after the walltime
              warning (in job scripts)
  monitor     (in a job script) name stragglers and hangs in the job's log
  job-setup   the job's set-up before the launcher, in one interpreter.
  agents      start a launcher's agent once on every node, and end them all
              when one fails.
  restart     after a failed launch, whether to start it again, and on which
              nodes.

options:
  -h, --help  show this help message and exit
  --version   show program's version number and exit

examples:
  hpcdist render --scheduler slurm --nodes 2 --gpus-per-node 4 train.py    # the job script, to read
  hpcdist submit --scheduler local --nodes 2 --wait train.py    # a job on this machine, to its end
  hpcdist submit -h    # a command's flags and examples

docs: docs/index.md in hpcdist's source
"""
