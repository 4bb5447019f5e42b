"""attncheck in a test suite.

    from attncheck.testing import assert_attention, assert_attention_close

    def test_my_attention():
        assert_attention(my_attention, dtypes=["f32", "f16"], profile="quick")

    def test_my_attention_at_my_shapes():                 # where torch.testing.assert_close(out, ref, atol, rtol) was
        out = my_attention(q, k, v, causal=True)
        assert_attention_close(out, q, k, v, causal=True)

A failing property raises AssertionError whose message is the report's summary: each minimal counterexample with
its inputs — what pytest prints under the failing test. A warning (an advisory property's counterexample: behaviour
beyond the declared contract) raises only with strict=True; so does an undecided check, whatever strict says.
"""
import warnings

from ._api import check
from ._judge import judge


def assert_attention(fn, *, strict=False, **kwargs):
    """attncheck.check(fn, strict=strict, **kwargs); raises AssertionError with the counterexamples unless the gate
    passes — a failure, an undecided check, or with strict=True a warning. Returns the Report."""
    __tracebackhide__ = True  # pytest shows the message, not these frames
    report = check(fn, strict=strict, **kwargs)
    if not report.passed:
        raise AssertionError(f"attncheck: {report.verdict}\n{report.summary()}")
    return report


def assert_attention_close(out, q, k, v, *, strict=False, **kwargs):
    """attncheck.judge(q, k, v, out, **kwargs) as an assertion: the drop-in for an `assert_close(out, ref, atol=…,
    rtol=…)` line, each element held to the bound a correct kernel of its dtype and contract meets instead of a
    tolerance tuned by hand. Raises AssertionError naming the worst element, its bound and the declaration that would
    explain it; a warning (an advisory gradient check) raises only with strict=True. Where the error model cannot
    bound the elements (SPEC.md §4.5) it warns (UserWarning) and passes. Returns the Judgment."""
    __tracebackhide__ = True  # pytest shows the message, not these frames
    j = judge(q, k, v, out, strict=strict, **kwargs)
    if j.verdict == "undecided":
        warnings.warn(f"attncheck could not decide every element:\n{j}", stacklevel=2)
    elif not j.passed:
        raise AssertionError(str(j))
    return j
