"""PBS's own way to start one agent per node, for a site without an MPI launcher: ``pbsdsh``.

``--pbs-spread pbsdsh`` (:meth:`hpcdist.schedulers.pbs.Pbs.spread`). What pbsdsh does, as its
man pages and source say, and what the lines below do about it:

- ``pbsdsh -n INDEX -- PROGRAM ARGS`` spawns PROGRAM through PBS's task manager (tm_spawn) on the
  INDEX-th node of the job, counted as ``$PBS_NODEFILE``'s lines (one per slot). Both PBS Pro /
  OpenPBS (src/cmds/pbsdsh.c: ``pbsdsh [-c copies][-s][-v][-o] -- program``, ``[-n node_index]``;
  no ``-u``) and Torque (pbsdsh(1B): ``-n node``, and ``-u`` for once per host) take ``-n``: one
  pbsdsh per host, at the index of the host's first line, is the same line under both.
- The task gets the job's environment from the MOM, not the variables this script set (an
  activated environment's PATH, MASTER_ADDR, ``--env``), and starts in $HOME: each agent is
  started through ``env NAME=VALUE...`` with the variables it needs (argv words, not a command
  line: no quoting is lost), and changes to the submit folder itself.
- PBS Pro's pbsdsh exits 0 whatever its task did (it prints ``pbsdsh: task 0x... exit status N``):
  each agent writes its own exit status into the job's run folder (in the submit folder, which
  every node sees: the training script is read from it), and the lines below watch the pbsdsh processes.
  When one agent fails, or its pbsdsh ends without its status, the other pbsdsh are ended (on
  SIGTERM pbsdsh kills its task: tm_kill), and the job fails with the first failed status.
"""

from __future__ import annotations

from hpcdist.launchers.mpi import propagated
from hpcdist.schedulers.base import uses_node_rank
from hpcdist.shell import Shell, words_to_line

#: What every agent needs besides the propagated variables: the job's id (torchrun's rendezvous
#: id) and hostfiles (DeepSpeed --no-ssh reads $HPCDIST_HOSTFILE).
AGENT_VARIABLES = ("HPCDIST_JOB_ID", "HPCDIST_HOSTFILE", "HPCDIST_NODEFILE")
#: How long an ended pbsdsh's agent status may take to show on this node (a network file
#: system may cache a folder's listing for a few seconds).
STATUS_WAIT_S = 10


def agent_script(words: list) -> str:
    """The agent on one node, run by ``bash -c`` with the submit folder ($1) and its status file
    ($2): the launcher's words in the background (so that a SIGTERM from pbsdsh reaches them),
    then their exit status, written whole."""
    return "; ".join((
        'cd "$1" || exit 2',
        f"{words_to_line(words)} & child=$!",
        "trap 'kill -TERM \"$child\" 2>/dev/null' TERM INT HUP",
        'status=0',
        'wait "$child" || status=$?',
        'while kill -0 "$child" 2>/dev/null; do status=0; wait "$child" || status=$?; done',
        'echo "$status" > "$2.part" && mv -f "$2.part" "$2"',
        'exit "$status"',
    ))


def spread_lines(spec, words: list) -> list[str]:
    """Lines that start ``words`` once on each host of the job with pbsdsh and end every agent when
    one fails; they end with the job's status (``exit``: in the launch function, or the script)."""
    names = " ".join(dict.fromkeys(list(propagated(spec)) + list(AGENT_VARIABLES)))
    node_rank = ["NODE_RANK=$hpcdist_node_rank"] if uses_node_rank(words) else []
    start = words_to_line(["pbsdsh", "-n", Shell('"$hpcdist_index"'), "--", "env", Shell('"${hpcdist_agent_env[@]}"'),
                           *(Shell(f'"{w}"') for w in node_rank), "bash", "-c", agent_script(words), "hpcdist-agent",
                           Shell('"$PWD"'), Shell('"$hpcdist_agents/$hpcdist_node_rank"')])
    return [
        "# pbsdsh tasks get the job's environment from PBS, not this script's: what the agents need goes with them.",
        f'hpcdist_agent_env=(); for name in {names}; do if [ -n "${{!name+set}}" ]; then '
        'hpcdist_agent_env+=("$name=${!name}"); fi; done',
        '# Each agent leaves its exit status here (pbsdsh itself may exit 0 when its task failed).',
        'hpcdist_agents="$run_dir/agents"; mkdir "$hpcdist_agents"',
        "hpcdist_agent_pids=(); hpcdist_node_rank=0",
        "# One pbsdsh per host, at the index of the host's first line in $PBS_NODEFILE.",
        "for hpcdist_index in $(awk '!seen[$0]++ { print NR - 1 }' \"$PBS_NODEFILE\"); do",
        f"  {start} &",
        "  hpcdist_agent_pids+=($!); hpcdist_node_rank=$((hpcdist_node_rank + 1))",
        "done",
        "hpcdist_status=0",
        "# Until every agent has ended, or one failed: then the others are ended.",
        'while [ "${#hpcdist_agent_pids[@]}" -gt 0 ] && [ "$hpcdist_status" = 0 ]; do',
        "  sleep 1",
        '  for hpcdist_node_rank in "${!hpcdist_agent_pids[@]}"; do',
        '    ! kill -0 "${hpcdist_agent_pids[$hpcdist_node_rank]}" 2>/dev/null || continue',
        '    hpcdist_code=0; wait "${hpcdist_agent_pids[$hpcdist_node_rank]}" || hpcdist_code=$?',
        "    unset 'hpcdist_agent_pids[$hpcdist_node_rank]'",
        '    hpcdist_file="$hpcdist_agents/$hpcdist_node_rank"',
        f'    for _ in $(seq {STATUS_WAIT_S}); do ls "$hpcdist_agents" >/dev/null; [ ! -s "$hpcdist_file" ] || break; '
        "sleep 1; done",
        '    hpcdist_agent_status=$(cat "$hpcdist_file" 2>/dev/null || echo "unknown (it left none)")',
        '    if [ "$hpcdist_agent_status" != 0 ] || [ "$hpcdist_code" != 0 ]; then',
        '      echo "hpcdist: the agent on node $hpcdist_node_rank ($(sed -n "$((hpcdist_node_rank + 1))p" '
        '"$HPCDIST_NODEFILE")) ended with status $hpcdist_agent_status (pbsdsh: $hpcdist_code); ending the other '
        'agents" >&2',
        '      hpcdist_status=$hpcdist_agent_status',
        '      case $hpcdist_status in ""|0|*[!0-9]*) hpcdist_status=1 ;; esac',
        "      break",
        "    fi",
        "  done",
        "done",
        'if [ "${#hpcdist_agent_pids[@]}" -gt 0 ]; then kill "${hpcdist_agent_pids[@]}" 2>/dev/null || true; '
        'wait "${hpcdist_agent_pids[@]}" || true; fi',
        'exit "$hpcdist_status"',
    ]
