import os
import sys

import pytest

SOURCE_DIR = os.environ.get("ATTNCHECK_SOURCE_DIR",
                            os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
EXAMPLES = os.path.join(SOURCE_DIR, "examples", "python")
sys.path.insert(0, EXAMPLES)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

pytest_plugins = ["pytester"]

# Few cases and few properties keep each check to seconds; the C++ suite covers the properties themselves.
# A time budget no correct function reaches even on a loaded machine: a verdict the tests assert depends on the
# function, never on the machine's load (a test about the budget sets its own).
NEVER_BINDS = 600
FAST = {"profile": "quick", "cases": 12, "quiet": True, "time_budget": NEVER_BINDS}
CORE_PROPERTIES = ["accuracy", "lse", "sum_to_one", "causal", "input_integrity"]


@pytest.fixture
def fast():
    return dict(FAST)
