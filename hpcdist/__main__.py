"""``python -m hpcdist``: the same as the ``hpcdist`` command.

The two commands every job script runs (``job-setup``, ``agents``) go straight to their modules:
the command line's package (its parsers, the login side's commands) is not theirs to pay for.
"""

import sys

if sys.argv[1:2] == ["job-setup"]:
    from hpcdist.injob.job_setup import main

    raise SystemExit(main(sys.argv[2:]))
from hpcdist.cli import main

raise SystemExit(main())
