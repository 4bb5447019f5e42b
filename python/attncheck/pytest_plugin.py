"""The pytest side of attncheck (registered through the pytest11 entry point when the package is installed).

    def test_attention(attncheck_assert):
        attncheck_assert(my_attention, dtypes=["f32"])

`attncheck_assert` is assert_attention with defaults from the command line: --attncheck-profile (quick unless
given), --attncheck-seed, --attncheck-report-dir DIR (each test's reports under DIR/<test name>) and
--attncheck-corpus DIR (a counterexample corpus every test shares: its cases replayed first, each failure added). A
failure is reported with the counterexample summary; pytest hides attncheck's traceback frames.
"""
import os
import re

import pytest


def pytest_addoption(parser):
    group = parser.getgroup("attncheck")
    group.addoption("--attncheck-profile", default="quick", choices=("quick", "default", "thorough"),
                    help="attncheck profile for attncheck_assert (default: quick)")
    group.addoption("--attncheck-seed", type=int, default=1, help="attncheck seed for attncheck_assert")
    group.addoption("--attncheck-report-dir", default=None,
                    help="write each attncheck_assert's reports to DIR/<test name>")
    group.addoption("--attncheck-corpus", default=None,
                    help="a counterexample corpus directory for attncheck_assert: its cases for each kernel are "
                         "replayed before the search, and every counterexample is added (attncheck check --corpus)")


@pytest.fixture
def attncheck_assert(request):
    """assert_attention(fn, **kwargs) with the session's profile, seed and report directory as defaults."""
    from .testing import assert_attention

    config = request.config
    defaults = {"profile": config.getoption("--attncheck-profile"), "seed": config.getoption("--attncheck-seed")}
    root = config.getoption("--attncheck-report-dir")
    if root:
        defaults["report_dir"] = os.path.join(root, re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name))
    corpus = config.getoption("--attncheck-corpus")
    if corpus:
        defaults["corpus"] = corpus

    def run(fn, **kwargs):
        __tracebackhide__ = True
        return assert_attention(fn, **{**defaults, **kwargs})

    return run
