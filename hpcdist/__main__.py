"""``python -m hpcdist``: the same as the ``hpcdist`` command."""

from hpcdist.cli import main

raise SystemExit(main())
