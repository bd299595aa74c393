"""Slurm: everything hpcdist knows of it, in one folder.

Where it runs: ``submit`` (sbatch, scancel, the #SBATCH lines), ``queue`` (reading squeue and
sacct), ``limits`` (the site's array and per-user caps) and the template ``slurm.sh.j2`` on the
login node; ``job`` (the job's id, its allocation, the retry words, the elastic agents) inside
the job, cheap enough to import in every rank.
"""
