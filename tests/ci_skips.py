"""Under ``CI=true`` a skipped test fails unless its reason says it is opt-in (a pytest plugin
that tests/conftest.py loads; tests/project/test_ci_skips.py runs it on a file of its own)."""

import os

import pytest

#: The word an opt-in row's skip reason carries (``HPCDIST_STAGE_COMPARE=1``, a GPU): the only
#: skips CI lets pass. Every other reason names something scripts/bootstrap.sh could install or
#: a machine CI is on provides (root, namespaces): missing there, it hid a whole feature unseen.
OPT_IN = "opt-in"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Under ``CI=true`` a skip that is not opt-in fails, saying why: a skip passes a run, and
    the laptop tests once skipped whole on every fresh machine with no one the wiser."""
    outcome = yield
    report = outcome.get_result()
    if not report.skipped or os.environ.get("CI", "").lower() not in ("true", "1", "yes"):
        return
    if hasattr(report, "wasxfail"):
        return
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    reason = reason.removeprefix("Skipped: ")
    if OPT_IN in reason:
        return
    report.outcome = "failed"
    report.longrepr = (
        f"skipped under CI=true, which counts as a failure: {reason}\n"
        "The set-up (scripts/test.sh runs `scripts/bootstrap.sh tests`) must install "
        "what this test needs; a row meant to run only on request says 'opt-in' in "
        "its reason."
    )
