"""Python keeps the core's verdict tiers: a required property's counterexample is a failure, an advisory one's a
warning; Report, its repr and summary, assert_attention and replay all count them apart."""
import pytest

import attncheck
import kernels
from attncheck.testing import assert_attention

#: Under empty-rows=unspecified the kernel may return anything in a row without keys, but NaN is still a warning.
UNSPECIFIED = {"empty-rows": "unspecified"}


def check_nan_empty_rows(contract, **kwargs):
    return attncheck.check(kernels.attention_nan_empty_rows, dtypes=["f32"], properties=["empty_rows"],
                           contract=contract, profile="quick", cases=12, quiet=True, **kwargs)


def test_a_run_with_one_warning_has_no_failure_and_passes_the_gate():
    report = check_nan_empty_rows(UNSPECIFIED)
    assert len(report.failures) == 0 and len(report.warnings) == 1
    assert report.passed and report.verdict == "warn"
    [warning] = report.warnings
    assert warning.verdict == "warn" and warning.property == "empty_rows"
    assert repr(report) == "<attncheck.Report warn: 0 failure(s), 1 warning(s)>"
    summary = report.summary()
    assert "0 failure(s), 1 warning(s)" in summary and "warning (beyond the declared contract): " in summary
    assert attncheck.Report(report.json).exit_code == report.exit_code == 0  # read back: the core's exit code


def test_assert_attention_raises_on_a_warning_only_when_strict():
    report = assert_attention(kernels.attention_nan_empty_rows, dtypes=["f32"], properties=["empty_rows"],
                              contract=UNSPECIFIED, profile="quick", cases=12, quiet=True)
    assert len(report.warnings) == 1
    with pytest.raises(AssertionError, match="1 warning"):
        assert_attention(kernels.attention_nan_empty_rows, dtypes=["f32"], properties=["empty_rows"],
                         contract=UNSPECIFIED, profile="quick", cases=12, quiet=True, strict=True)


def test_a_strict_check_keeps_its_warnings_apart_from_its_failures():
    report = check_nan_empty_rows(UNSPECIFIED, strict=True)
    assert not report.passed and report.verdict == "fail"
    assert attncheck.Report(report.json).exit_code == report.exit_code == 1  # strict is in the report
    assert len(report.failures) == 0 and len(report.warnings) == 1


def test_a_required_propertys_counterexample_is_a_failure():
    report = check_nan_empty_rows(None)
    assert len(report.failures) == 1 and len(report.warnings) == 0
    assert not report.passed and report.verdict == "fail"
    assert repr(report) == "<attncheck.Report fail: 1 failure(s), 0 warning(s)>"


def test_replay_judges_under_the_contract_it_is_given():
    warned = check_nan_empty_rows(UNSPECIFIED)
    assert warned.replay(1).verdict == "warn" and warned.replay(1).passed
    # The default contract fixes an empty row to O = 0: the same case is a failure there.
    replayed = warned.replay(1, contract={})
    assert replayed.verdict == "fail" and not replayed.passed
    failed = check_nan_empty_rows(None)
    assert failed.replay(1).verdict == "fail"
    assert failed.replay(1, contract=UNSPECIFIED).verdict == "warn"
    # Top-left alignment leaves no row without a key: nothing for empty_rows to check.
    off = failed.replay(1, contract={"causal": "top-left"})
    assert off.verdict == "off" and "nothing to check" in off.detail
    assert failed.replay(1, fn=kernels.attention, contract={}).verdict == "pass"


class Unloadable:
    """A function that cannot be loaded: a call raises (finding its framework calls it) and isolate=True cannot
    pickle it into a new process."""

    def __call__(self, q, k, v, *, scale, causal):
        raise AssertionError("called")

    def __reduce__(self):
        raise TypeError("cannot pickle an Unloadable")


def test_a_replay_under_a_contract_that_turns_the_property_off_loads_no_function():
    failed = check_nan_empty_rows(None)
    # The tier is decided before the function is loaded: nothing is called, no process started, for a replay that
    # runs nothing.
    off = failed.replay(1, fn=Unloadable(), isolate=True, contract={"causal": "top-left"})
    assert off.verdict == "off" and off.passed and "nothing to check" in off.detail
    with pytest.raises((ValueError, TypeError), match="pickle"):  # where the property is on, it is loaded
        failed.replay(1, fn=Unloadable(), framework="numpy", isolate=True, contract={})


def test_replay_refuses_an_argument_it_cannot_honour():
    report = check_nan_empty_rows(None)
    with pytest.raises(TypeError, match="not profile"):
        report.replay(1, profile="thorough")


def test_a_plain_import_makes_attncheck_testing_available():
    import subprocess
    import sys
    code = "import attncheck; print(attncheck.testing.assert_attention.__name__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "assert_attention"
