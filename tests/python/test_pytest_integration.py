"""assert_attention and the attncheck_assert fixture inside a pytest run: a failing property is a readable failure."""
import os

from conftest import EXAMPLES

TESTS = f'''
import sys
sys.path.insert(0, {EXAMPLES!r})
from numpy_attention import attention, attention_unscaled
from attncheck.testing import assert_attention

def test_correct():
    assert_attention(attention, dtypes=["f32"], properties=["accuracy", "causal"], cases=10, quiet=True)

def test_unscaled():
    assert_attention(attention_unscaled, dtypes=["f32"], properties=["accuracy"], cases=10, quiet=True)

def test_fixture(attncheck_assert):
    attncheck_assert(attention, dtypes=["f16"], properties=["sum_to_one"], cases=10, quiet=True)
'''


def test_a_failing_property_is_a_pytest_failure_that_prints_the_counterexample(pytester):
    pytester.makepyfile(test_attention=TESTS)
    result = pytester.runpytest_subprocess("-q", "--attncheck-report-dir", str(pytester.path / "reports"))
    result.assert_outcomes(passed=2, failed=1)
    out = result.stdout.str()
    assert "test_unscaled" in out and "AssertionError: attncheck: fail" in out
    assert "failure: attention_unscaled (f32)" in out and "counterexample 1: accuracy — " in out and "q = " in out
    assert os.path.exists(pytester.path / "reports" / "test_fixture" / "report.json")
