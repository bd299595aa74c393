"""The local backend: a job run on this host, no queue.

Where it runs: ``submit`` (the runner, status, cancel) and the template ``local.sh.j2`` on the
login node or laptop that runs the job; ``job`` (the runner's id, this host as the allocation, one
agent per "node") inside the job, cheap enough to
import in every rank.
"""
