"""On the login node (or a laptop that renders): from a user's flags and profile to a submitted
job. :mod:`~hpcdist.submission.options` declares every job option once, with its owner;
:mod:`~hpcdist.submission.profiles` reads profile files and presets;
:mod:`~hpcdist.submission.spec` merges them into a :class:`~hpcdist.submission.spec.JobSpec` and
checks it (:mod:`~hpcdist.submission.unchosen`: not the local default for a job meant for a
cluster); :mod:`~hpcdist.submission.render` turns a spec into a script through its scheduler's
template; :mod:`~hpcdist.submission.submit` submits it, follows the job (``--wait``, ``logs``)
and cancels it. The job folder it writes is :mod:`hpcdist.jobs`'s."""
