"""attncheck.check on NumPy functions: verdicts, counterexamples, reports, replay, determinism and bad input."""
import json
import os

import numpy as np
import pytest

import attncheck
import kernels
from conftest import CORE_PROPERTIES, NEVER_BINDS


def test_a_correct_numpy_attention_passes_every_property_in_every_dtype():
    report = attncheck.check(kernels.attention, backward=kernels.attention_backward, profile="quick", quiet=True,
                             time_budget=NEVER_BINDS)
    assert report.passed and not report.failures, report.summary()
    # The example leaks a NaN from a hidden key's value (0·NaN in its einsum): a warning, beyond the contract.
    assert report.verdict == ("warn" if report.warnings else "pass")
    assert {p.dtype for p in report.properties} == {"f32", "f16", "bf16"}
    ran = {p.id for p in report.properties if p.verdict == "pass" and p.cases > 0}
    assert {"accuracy", "gradient_accuracy", "causal", "empty_rows", "variance_normalization"} <= ran


def test_an_attention_without_the_scale_fails_with_a_shrunk_counterexample(fast):
    report = attncheck.check(kernels.attention_unscaled, dtypes=["f32"], properties=["accuracy"], **fast)
    assert not report.passed and report.verdict == "fail"
    [cx] = report.counterexamples
    assert cx.property == "accuracy" and cx.verdict == "fail" and cx.step in ("sums", "values")
    # Shrunk: one batch and head, few rows and keys, and a head dimension above 1 (where 1/√D ≠ 1).
    assert cx.spec["B"] == 1 and cx.spec["Hq"] == 1 and cx.spec["D"] >= 2
    assert cx.inputs["q"].shape == (1, 1, cx.spec["Lq"], cx.spec["D"])
    assert cx.scale == pytest.approx(1 / np.sqrt(cx.spec["D"]))
    # What the failing check found, as data: an element of a tensor, the kernel's value beyond the exact one's bound.
    f = cx.finding
    assert f["kind"] in ("value", "aggregate") and f["tensor"] in ("O", "LSE", "")
    if f["kind"] == "value":
        assert len(f["index"]) == {"O": 4, "LSE": 3}[f["tensor"]] and abs(f["got"] - f["exact"]) > f["bound"]
    summary = report.summary()
    assert "attention_unscaled f32: FAIL" in summary  # its run's line
    assert "failure: attention_unscaled (f32)" in summary and "counterexample 1: accuracy — " in summary
    assert cx.describe() in summary


def test_the_same_seed_gives_the_same_report(fast):
    runs = [attncheck.check(kernels.attention_unscaled, dtypes=["f16"], properties=CORE_PROPERTIES, seed=7, **fast)
            for _ in range(2)]
    assert runs[0].content == runs[1].content  # all but the timing, which the machine decides
    assert runs[0].timing["runs"][0]["properties"][0]["property"] == CORE_PROPERTIES[0]
    other = attncheck.check(kernels.attention_unscaled, dtypes=["f16"], properties=CORE_PROPERTIES, seed=8, **fast)
    assert other.content != runs[0].content


def test_reports_are_the_clis_files(tmp_path, fast):
    report = attncheck.check(kernels.attention_unscaled, dtypes=["f32"], properties=["accuracy"],
                             report_dir=tmp_path / "r", junit=tmp_path / "junit.xml", **fast)
    for name in ("report.json", "summary.md", "report.html"):
        assert (tmp_path / "r" / name).stat().st_size > 0
    assert (tmp_path / "r" / "report.json").read_text() == report.json
    assert (tmp_path / "r" / "summary.md").read_text() == report.summary_markdown()
    assert "<failure" in (tmp_path / "junit.xml").read_text()
    doc = json.loads(report.json)
    assert doc["runs"][0]["source"] == {"kind": "python", "location": "numpy_attention:attention_unscaled"}
    loaded = attncheck.Report.load(tmp_path / "r")
    assert loaded.json == report.json and loaded.verdict == "fail"
    assert loaded.exit_code == report.exit_code == 1  # the gate's exit code, from the core


def test_replay_reruns_the_counterexample_on_the_function_or_a_fixed_one(fast):
    report = attncheck.check(kernels.attention_unscaled, dtypes=["bf16"], properties=["accuracy"], **fast)
    assert report.replay(1).verdict == "fail"
    assert report.replay(1, fn=kernels.attention).passed
    with pytest.raises(IndexError):
        report.replay(2)
    with pytest.raises(ValueError, match="pass fn"):
        attncheck.Report(report.json).replay(1)


def test_an_exception_of_the_function_is_a_failing_call_with_its_traceback(fast):
    report = attncheck.check(kernels.attention_raises_on_gqa, dtypes=["f32"], properties=["accuracy"], **fast)
    assert report.verdict == "fail"
    cx = report.counterexamples[0]
    assert cx.step == "shape" and cx.spec["Hq"] != cx.spec["Hkv"]
    assert "raised ValueError: no grouped-query attention here" in cx.detail
    assert "Traceback (most recent call last)" in cx.detail and "kernels.py" in cx.detail


def test_unsupported_declines_a_call_instead_of_failing(fast):
    report = attncheck.check(kernels.attention_declines_gqa, dtypes=["f32"], properties=["accuracy"], **fast)
    assert report.passed, report.summary()
    [accuracy] = report.properties
    assert accuracy.declined > 0 and accuracy.cases > 0


def test_an_output_of_the_wrong_shape_fails_at_the_shape_step(fast):
    report = attncheck.check(kernels.attention_transposed, dtypes=["f32"], properties=["accuracy"], **fast)
    assert report.verdict == "fail"
    assert "returned out of shape" in report.counterexamples[0].detail


def test_a_function_writing_its_input_fails_input_integrity(fast):
    report = attncheck.check(kernels.attention_scales_in_place, dtypes=["f32"], properties=["input_integrity"],
                             **fast)
    assert report.verdict == "fail", report.summary()


def test_a_function_without_lse_passes_once_its_contract_says_so(fast):
    without = attncheck.check(kernels.attention_no_lse, dtypes=["f32"], properties=["accuracy"], **fast)
    assert without.verdict == "fail" and "returned no lse" in without.counterexamples[0].detail
    declared = attncheck.check(kernels.attention_no_lse, dtypes=["f32"], properties=["accuracy", "lse"],
                               contract={"lse": "none"}, **fast)
    assert declared.passed, declared.summary()


def test_a_planted_backward_bug_fails_gradient_accuracy(fast):
    report = attncheck.check(kernels.attention, backward=kernels.attention_backward_no_dk_scale, dtypes=["f32"],
                             properties=["gradient_accuracy"], **fast)
    assert report.verdict == "fail"
    assert "dK" in report.counterexamples[0].detail


@pytest.mark.parametrize("kwargs, message", [
    ({"dtypes": ["f64"]}, "unknown dtype 'f64'"),
    ({"properties": ["acuracy"]}, "unknown property 'acuracy'"),
    ({"profile": "fast"}, "unknown profile 'fast'"),
    ({"contract": {"causal": "sideways"}}, "contract:"),
    ({"backward": "autograd"}, "backward='autograd' needs torch or jax"),
    ({"framework": "numpy", "device": "cuda"}, "device must be 'cpu'"),
])
def test_bad_arguments_raise_one_clear_error(kwargs, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        attncheck.check(kernels.attention, quiet=True, **kwargs)


def test_the_framework_is_found_from_what_the_function_returns():
    from attncheck._kernel import detect_framework
    assert detect_framework(kernels.attention) == "numpy"
    with pytest.raises(ValueError, match="cannot tell which framework"):
        detect_framework(lambda q, k, v, *, scale, causal: "not an array")


def test_the_framework_of_a_function_that_declines_float32_is_found_in_float16(fast):
    from attncheck._kernel import detect_framework
    assert detect_framework(kernels.attention_half_only_no_lse) == "numpy"
    report = attncheck.check(kernels.attention_half_only_no_lse, dtypes=["f16"], properties=["accuracy"],
                             contract={"lse": "none"}, **fast)
    assert report.passed, report.summary()


def test_a_report_dir_that_cannot_be_written_is_refused_before_any_case(tmp_path, fast):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(ValueError):
        attncheck.check(kernels.attention, report_dir=blocker / "r", **fast)


def test_properties_lists_every_property_with_its_formula():
    props = {pid: formula for pid, formula, _ in attncheck.properties()}
    assert "accuracy" in props and "variance_normalization" in props and all(props.values())
    assert os.path.basename(attncheck._core.__file__).startswith("_core")


def test_a_function_that_declares_its_dtypes_is_called_in_none_other(fast):
    calls = []

    def half_only(q, k, v, *, scale, causal):
        calls.append(q.dtype)
        return kernels.attention_half_only_no_lse(q, k, v, scale=scale, causal=causal)

    report = attncheck.check(half_only, dtypes=["f32", "f16"], properties=["accuracy"], framework="numpy",
                             contract={"dtypes": ["f16", "bf16"], "lse": "none"}, **fast)
    assert report.passed, report.summary()
    assert "f32: off — the kernel's contract declares dtypes=f16+bf16" in report.summary(), report.summary()
    assert calls and all(dt == np.float16 for dt in calls), set(calls)
