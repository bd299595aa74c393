"""What the job script needs to write into its job folder (:mod:`hpcdist.jobs` owns the folder and
its names): the values a template gets as ``job_files``, and the words under ``$job_dir`` that
name a file of this run (a subjob's own). The lines themselves are shell in
``hpcdist/schedulers/job_folder.sh.j2``, beside the template that places them; whether this run is
the job recorded in the folder is checked by ``hpcdist job-setup`` (:mod:`hpcdist.injob.job_setup`)."""

from __future__ import annotations

from hpcdist.jobs import (EXIT_CODE, LAST_LINES, PROGRESS, RECORD, RESUBMITTED, RUNS, START,
                          SUBMITTING)
from hpcdist.shell import Shell


def script_context(folder: str | None, index_variable: str | None = None, job_id_variable: str = "HPCDIST_JOB_ID",
                   recorded_id: str = "${HPCDIST_JOB_ID:-}") -> dict | None:
    """The job folder's values, for the template (``job_files``): its path (the renderer quotes it;
    the script holds it once, as ``$job_dir``), the names of its files and words, the variable that
    holds this run's id (``job_id_variable``), the scheduler's shell word for the id the record
    holds (``recorded_id``: a subjob's array id) and, for an array's subjob, the variable with its
    index (``index_variable``: a subjob writes an exit-code file and a progress folder of its own).
    None without a folder (``hpcdist render``): the script then records nothing."""
    if not folder:
        return None

    def of_subjob(name: str) -> Shell:
        """``"$job_dir/NAME"``, with ``.<index>`` appended in an array's subjob (hpcdist/jobs/subjobs.py
        reads it); a job submitted without its array (by hand) runs too: then no index."""
        own = f"${{{index_variable}:+.${index_variable}}}" if index_variable else ""
        return Shell(f'"$job_dir/{name}"{own}')

    return {
        "folder": folder,
        "names": {"exit_code": EXIT_CODE, "progress": PROGRESS, "record": RECORD, "runs": RUNS, "start": START,
                  "resubmitted": RESUBMITTED, "submitting": SUBMITTING, "last_lines": LAST_LINES},
        "index_variable": index_variable,
        "job_id_variable": job_id_variable,
        "recorded_id": recorded_id,
        "exit_code_file": of_subjob(EXIT_CODE),
        "progress_dir": of_subjob(PROGRESS),
    }
