import os
import sys

# tests/launch.py is imported as a helper module by the tests beside it.
sys.path.insert(0, os.path.dirname(__file__))


import pytest  # noqa: E402

import testcluster  # noqa: E402


@pytest.fixture(scope="session")
def cluster():
    """The 2-host test cluster, up for the whole session (see tests/testcluster.py)."""
    reason = testcluster.why_not()
    if reason:
        pytest.skip(reason)
    with testcluster.exclusive():  # one test session at a time on the one cluster
        state = testcluster.up(2)
        try:
            yield state
        finally:
            testcluster.down()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed cluster test leaves the daemons' logs in test-output/<test>/."""
    outcome = yield
    report = outcome.get_result()
    if report.when == "call" and report.failed and testcluster.is_up:
        saved = testcluster.save_daemon_logs(item.nodeid)
        if saved:
            report.sections.append(("cluster daemons' logs", f"saved in {saved}"))

# Hypothesis profiles for tests without their own max_examples (tests/test_fuzz.py):
# "ci" by default; HPCDIST_FUZZ=long for the opt-in long run (100x the examples, no deadline).
from hypothesis import HealthCheck, settings  # noqa: E402

settings.register_profile("ci", max_examples=1000, deadline=None, database=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("long", max_examples=100_000, deadline=None, database=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
settings.load_profile("long" if os.environ.get("HPCDIST_FUZZ") == "long" else "ci")
