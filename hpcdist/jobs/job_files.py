"""What the job script does in its job folder (:mod:`hpcdist.jobs` owns the folder and its
names): the lines a template gets as ``job_files``."""

from __future__ import annotations

from hpcdist.jobs import (EXIT_CODE, PROGRESS, RECORD, RESUBMITTED, RUNS, SUBMITTING, start_line_shell,
                          write_exit_code_shell)
from hpcdist.shell import Shell
from hpcdist.jobs.subjobs import exit_file_shell


def script_context(folder: str | None, index_variable: str | None = None, job_id_variable: str = "HPCDIST_JOB_ID",
                   recorded_id: str = "${HPCDIST_JOB_ID:-}") -> dict | None:
    """What the job script writes into its folder, for the template (``job_files``): the folder's
    path (the renderer quotes it; the script holds it once, as ``$job_dir``), the other files as
    shell words and lines under it (:class:`~hpcdist.shell.Shell`). None without a folder
    (``hpcdist render``): the script then records nothing. An array's subjob (its index in
    ``index_variable``) writes an exit-code file and a progress folder of its own. ``recorded_id``:
    :func:`recorded_run_shell`'s."""
    if not folder:
        return None
    exit_file = f'"$job_dir/{EXIT_CODE}"'
    return {
        "folder": folder,
        "exit_code_file": Shell(exit_file_shell(exit_file, index_variable) if index_variable else exit_file),
        "write_exit_code": Shell(write_exit_code_shell("$exit_file")),
        "check_run": Shell(recorded_run_shell(recorded_id)),
        "record_start": Shell('[ -z "$exit_file" ] || ' + start_line_shell(Shell('"$job_dir"'), job_id_variable)),
        # Each subjob's ranks in a folder of their own (progress.<index>: hpcdist.jobs.subjobs.progress_dir).
        "progress_dir": Shell(exit_file_shell(f'"$job_dir/{PROGRESS}"', index_variable) if index_variable
                              else f'"$job_dir/{PROGRESS}"'),
    }


def recorded_run_shell(recorded_id: str) -> str:
    """Shell that empties ``$exit_file`` unless this run (``recorded_id``) is the job recorded:
    the record's id or a resubmission's, by number (PBS_JOBID may carry an ``N:`` prefix, another
    server name, a subjob's index), or a record still being written. Else a run by hand (``bash
    job.sh``, ``sbatch job.sh``) overwrote the job's exit code."""
    return "\n".join([
        "recorded_run() {  # this run is the job recorded in $job_dir, by its id's number",
        '  local id=${1#*:} ids seq; id=${id%%[!0-9]*}; [ -n "$id" ] || return 1',
        f'  ! grep -qs \'"{SUBMITTING}":\' "$job_dir/{RECORD}" || return 0',
        f'  ids=$(sed -n \'s/^  "job_id": "\\([^"]*\\)".*/\\1/p\' "$job_dir/{RECORD}" 2>/dev/null',
        f'        sed -n \'s/^{RESUBMITTED} [0-9]* \\([^ ]*\\).*/\\1/p\' "$job_dir/{RUNS}" 2>/dev/null) || true',
        '  while read -r seq; do seq=${seq#*:}; [ "${seq%%[!0-9]*}" != "$id" ] || return 0; done <<< "$ids"',
        '  return 1',
        '}',
        f'recorded_run "{recorded_id}" || {{',
        '  exit_file=""',
        '  echo "hpcdist: this run is not the job recorded in $job_dir (its script run again by hand?):'
        ' its end is not recorded there" >&2',
        '}',
    ])
