"""attncheck in a test suite.

    from attncheck.testing import assert_attention

    def test_my_attention():
        assert_attention(my_attention, dtypes=["f32", "f16"], profile="quick")

A failing property raises AssertionError whose message is the report's summary: each minimal counterexample with
its inputs — what pytest prints under the failing test.
"""
from ._api import check


def assert_attention(fn, **kwargs):
    """attncheck.check(fn, **kwargs); raises AssertionError with the counterexamples unless the gate passes.
    Returns the Report."""
    __tracebackhide__ = True  # pytest shows the message, not these frames
    report = check(fn, **kwargs)
    if not report.passed:
        raise AssertionError(f"attncheck: {report.verdict}\n{report.summary()}")
    return report
