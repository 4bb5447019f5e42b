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
FAST = {"profile": "quick", "cases": 12, "quiet": True}
CORE_PROPERTIES = ["accuracy", "lse", "sum_to_one", "causal", "input_integrity"]


@pytest.fixture
def fast():
    return dict(FAST)
