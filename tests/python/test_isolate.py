"""isolate=True: the function runs in its own Python process (the exec protocol), so that a crash or a hang in
native code is a failing call — and the caller's process, this pytest, lives on."""
import importlib.util
import json
import os

import pytest

import attncheck
import kernels
from conftest import FAST


def test_an_isolated_correct_function_passes_as_in_process():
    isolated = attncheck.check(kernels.attention, dtypes=["f32"], properties=["accuracy", "causal"], isolate=True,
                               **FAST)
    in_process = attncheck.check(kernels.attention, dtypes=["f32"], properties=["accuracy", "causal"], **FAST)
    assert isolated.passed and in_process.passed
    assert [(p.id, p.verdict, p.cases) for p in isolated.properties] == \
        [(p.id, p.verdict, p.cases) for p in in_process.properties]
    assert isolated.document["runs"][0]["source"]["kind"] == "exec"


def test_a_segfault_in_the_function_is_a_failing_call_and_this_process_lives():
    report = attncheck.check(kernels.attention_segfaults_on_long_rows, dtypes=["f32"], properties=["accuracy"],
                             isolate=True, **FAST)
    assert report.verdict == "fail"
    cx = report.counterexamples[0]
    assert cx.spec["Lk"] == 5, "shrunk to the first length that crashes"
    assert "signal 11" in cx.detail or "SIGSEGV" in cx.detail, cx.detail
    assert report.replay(1).verdict == "fail"


def test_a_hang_in_the_function_is_a_failing_call_within_the_timeout():
    report = attncheck.check(kernels.attention_hangs_on_long_rows, dtypes=["f32"], properties=["accuracy"],
                             isolate=True, timeout=2.0, first_call_timeout=2.0, **{**FAST, "time_budget": 20})
    assert report.verdict == "fail"
    assert "timeout" in report.counterexamples[0].detail or "did not answer" in report.counterexamples[0].detail


def test_exceptions_in_an_isolated_function_keep_their_message():
    report = attncheck.check(kernels.attention_raises_on_gqa, dtypes=["f32"], properties=["accuracy"], isolate=True,
                             **FAST)
    assert "raised ValueError: no grouped-query attention here" in report.counterexamples[0].detail


def test_an_isolated_function_that_raises_says_one_line_per_call_and_keeps_its_traceback_in_the_report(capfd):
    report = attncheck.check(kernels.attention_raises_on_gqa, dtypes=["f32"], properties=["accuracy"], isolate=True,
                             **FAST)
    err = capfd.readouterr().err
    failing = [ln for ln in err.splitlines() if "attention_raises_on_gqa forward failed: raised ValueError" in ln]
    assert failing, err
    assert "Traceback" not in err and "File \"" not in err, err  # no traceback on stderr
    assert "Traceback (most recent call last)" in json.dumps(report.document), "the report keeps it"


@pytest.mark.skipif(importlib.util.find_spec("cloudpickle") is not None, reason="cloudpickle pickles lambdas")
def test_a_function_that_cannot_be_pickled_is_refused_with_what_to_do():
    with pytest.raises(ValueError, match="define it at module level"):
        attncheck.check(lambda q, k, v, *, scale, causal: kernels.attention(q, k, v, scale=scale, causal=causal),
                        framework="numpy", isolate=True, **FAST)


def test_no_temporary_file_is_left_behind(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", None)
    attncheck.check(kernels.attention, dtypes=["f32"], properties=["accuracy"], isolate=True, **FAST)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("contract", ["lse=none,causal=bottom-right", "causal=bottom-right, lse=none",
                                      {"lse": "none"}])
def test_an_isolated_function_reads_its_contract_as_the_core_does_commas_or_spaces(contract):
    # The isolated process reads the canonical text the core makes of the contract: with commas too, it knows
    # that the function returns no LSE.
    report = attncheck.check(kernels.attention_no_lse, dtypes=["f32"], properties=["accuracy"], isolate=True,
                             contract=contract, **FAST)
    assert report.passed, report.summary()


def test_the_core_resolves_a_contract_for_every_python_module_text_or_dict_alike():
    from attncheck import _api
    assert _api.resolve_contract(None) == ("", "f32", [])
    assert _api.resolve_contract("features=window+softcap,lse=storage") == \
        ("lse=storage features=window+softcap", "storage", ["window", "softcap"])
    assert _api.resolve_contract({"lse": "none", "features": ["mask"]}) == _api.resolve_contract("features=mask lse=none")
    with pytest.raises(ValueError, match="varlen"):
        attncheck.check(kernels.attention, dtypes=["f32"], contract="features=window,varlen", **FAST)


def test_a_contract_the_core_does_not_accept_is_one_clear_error():
    with pytest.raises(ValueError, match="lse"):
        attncheck.check(kernels.attention, dtypes=["f32"], contract="lse=sometimes", **FAST)
