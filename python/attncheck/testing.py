"""attncheck in a test suite.

    from attncheck.testing import assert_attention

    def test_my_attention():
        assert_attention(my_attention, dtypes=["f32", "f16"], profile="quick")

A failing property raises AssertionError whose message is the report's summary: each minimal counterexample with
its inputs — what pytest prints under the failing test. A warning (an advisory property's counterexample: behaviour
beyond the declared contract) raises only with strict=True; so does an undecided check, whatever strict says.
"""
from ._api import check


def assert_attention(fn, *, strict=False, **kwargs):
    """attncheck.check(fn, strict=strict, **kwargs); raises AssertionError with the counterexamples unless the gate
    passes — a failure, an undecided check, or with strict=True a warning. Returns the Report."""
    __tracebackhide__ = True  # pytest shows the message, not these frames
    report = check(fn, strict=strict, **kwargs)
    if not report.passed:
        raise AssertionError(f"attncheck: {report.verdict}\n{report.summary()}")
    return report
