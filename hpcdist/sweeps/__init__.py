"""Sweeps: many runs of one script as one array job, under the site's limits.

Where its code runs: the login node (``hpcdist submit --sweep``, ``--resubmit JOB --failed``,
``hpcdist status`` of a sweep; and the submitit plugin's ``map_array``, which asks
:mod:`hpcdist.sweeps.limits` how large an array may be). Nothing here runs inside a job: a
subjob reads its set from the ``case`` block its script holds.

sets.py    the parameter sets: ``--sweep KEY=V1,V2`` (their product), ``--sweep-file`` (one a
           line, JSON, YAML), checked before the queue
limits.py  the array cap and the per-user job cap, read from the scheduler where it says them
           (its ``hpcdist/schedulers/<name>/limits.py``), else a profile key; ``split``
arrays.py  a sweep submitted as the arrays the caps allow, waiting for room; what each array's
           script and ``sweep.json`` hold
table.py   ``hpcdist status`` of a sweep; the sets ``--failed`` runs again
cli.py     the sweep's side of ``hpcdist submit``, ``render`` and ``status``
"""
