"""IBM LSF, inside the job only: hpcdist does not submit to LSF, but ranks that ``jsrun`` starts
read their job's hosts.

Where it runs: ``job`` (the job's id and its rank file) inside the job, cheap
enough to import in every rank.
"""
