"""attncheck.infer: the contract a NumPy function satisfies, found from the defaults — a PyTorch-style top-left
causal mask is found and checks clean under the printed line; a planted bug (no 1/√d scale) fits no contract."""
import numpy as np
import pytest

import attncheck
from conftest import CORE_PROPERTIES, FAST
import kernels
from kernels import attention, attention_no_lse, attention_unscaled


def attention_top_left(q, k, v, *, scale, causal):
    """Correct attention whose causal mask is aligned top-left (row i sees keys j ≤ i), as PyTorch's is_causal."""
    with np.errstate(all="ignore"):
        dtype = q.dtype
        q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
        group = q.shape[1] // k.shape[1]
        k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
        s = scale * np.einsum("bhid,bhjd->bhij", q, k)
        if causal:
            lq, lk = s.shape[-2], s.shape[-1]
            s = np.where(np.arange(lk)[None, :] > np.arange(lq)[:, None], -np.inf, s)
        m = s.max(axis=-1, keepdims=True, initial=-np.inf)
        m = np.where(np.isfinite(m), m, 0.0)
        e = np.exp(s - m)
        total = e.sum(axis=-1, keepdims=True)
        out = np.einsum("bhij,bhjd->bhid", e / np.where(total > 0, total, 1.0), v)
        return out.astype(dtype), (np.log(total) + m)[..., 0].astype(np.float32)


OPTIONS = dict(FAST, dtypes=["f32"], properties=CORE_PROPERTIES)


def test_infer_finds_top_left_causal_and_check_passes_under_it():
    inferred = attncheck.infer(attention_top_left, **OPTIONS)
    assert inferred.found and inferred.exit_code == 0, str(inferred)
    assert "causal=top-left" in inferred.contract.split(), str(inferred)
    assert any(r["adopted"] == "causal=top-left" for r in inferred.rounds), str(inferred)
    report = attncheck.check(attention_top_left, contract=inferred.contract, **OPTIONS)
    assert report.passed and report.verdict in ("pass", "warn"), report.summary()
    # The same seed, the same contract.
    assert attncheck.infer(attention_top_left, **OPTIONS).contract == inferred.contract


def test_infer_keeps_the_defaults_of_a_correct_function():
    inferred = attncheck.infer(attention, **OPTIONS)
    assert inferred.found, str(inferred)
    assert "causal=top-left" not in inferred.contract.split()
    assert inferred.rounds[0]["verdict"] in ("pass", "warn")


def test_infer_gives_a_function_without_lse_lse_none():
    inferred = attncheck.infer(attention_no_lse, **OPTIONS)
    assert inferred.found and "lse=none" in inferred.contract.split(), str(inferred)
    report = attncheck.check(attention_no_lse, contract=inferred.contract, **OPTIONS)
    assert report.passed, report.summary()


def attention_d8_no_lse(q, k, v, *, scale, causal):
    """Correct attention without an LSE output that, like many compiled kernels, takes only D % 8 == 0."""
    if q.shape[-1] % 8 or v.shape[-1] % 8:
        raise attncheck.Unsupported("head dims must be multiples of 8")
    return attention_no_lse(q, k, v, scale=scale, causal=causal)


def test_infer_probes_for_the_lse_at_a_shape_the_function_accepts():
    # Declining the smallest probe (D = 4) is not "an LSE": the probe moves on to D = 16 and finds none.
    inferred = attncheck.infer(attention_d8_no_lse, **OPTIONS)
    assert "lse=none" in inferred.contract.split(), str(inferred)
    assert inferred.outcome != "no-fit" and "that is a bug" not in str(inferred), str(inferred)


def test_infer_asks_a_function_that_declines_float32_for_its_lse_in_float16():
    # A FlashAttention-style function (float16 and bfloat16 only, no LSE): the search still starts from lse=none.
    inferred = attncheck.infer(kernels.attention_half_only_no_lse, **dict(OPTIONS, dtypes=["f16"]))
    assert inferred.found and "lse=none" in inferred.contract.split(), str(inferred)


def test_infer_leaves_out_the_dtypes_a_function_declines_and_check_then_calls_nothing_of_them():
    options = dict(OPTIONS, dtypes=["f32", "f16"], properties=["accuracy", "causal"])
    inferred = attncheck.infer(kernels.attention_half_only_no_lse, **options)
    assert inferred.found, str(inferred)
    assert inferred.declined_dtypes["declaration"] == "dtypes=f16+bf16", str(inferred)
    assert inferred.declined_dtypes["evidence"].endswith("cases of f32"), str(inferred)
    assert "dtypes=f16+bf16" in inferred.contract.split(), str(inferred)
    report = attncheck.check(kernels.attention_half_only_no_lse, contract=inferred.contract, **options)
    assert report.passed, report.summary()
    assert "f32: off — the kernel's contract declares dtypes=f16+bf16" in report.summary(), report.summary()
    # A function that takes every dtype it is given keeps them all.
    assert attncheck.infer(attention, **OPTIONS).declined_dtypes is None


def test_a_float32_function_with_bfloat16_products_is_explained_found_and_passes_under_fp32_precision():
    # Under the defaults its float32 run fails, each failure explained by the declaration; infer finds it.
    report = attncheck.check(kernels.attention_bf16_products, **OPTIONS)
    assert not report.passed, report.summary()
    assert "explained by the declaration fp32-precision=bf16" in report.summary(), report.summary()
    assert "no declaration explains it" not in report.summary(), report.summary()
    inferred = attncheck.infer(kernels.attention_bf16_products, **OPTIONS)
    assert inferred.found and "fp32-precision=bf16" in inferred.contract.split(), str(inferred)
    report = attncheck.check(kernels.attention_bf16_products, contract=inferred.contract, **OPTIONS)
    assert report.passed, report.summary()


def test_infer_says_no_contract_fits_a_bug():
    inferred = attncheck.infer(attention_unscaled, **OPTIONS)
    assert inferred.outcome == "no-fit" and inferred.exit_code == 1, str(inferred)
    assert inferred.no_fit["property"] in CORE_PROPERTIES
    assert inferred.no_fit["counterexample"].startswith(inferred.no_fit["property"] + " — f32 B=")
    assert "no contract value fits" in str(inferred) and "that is a bug" in str(inferred)


def test_infer_rejects_bad_input():
    with pytest.raises(ValueError, match="unknown property"):
        attncheck.infer(attention, **dict(OPTIONS, properties=["no_such_property"]))
    with pytest.raises(ValueError, match="unknown profile"):
        attncheck.infer(attention, **dict(OPTIONS, profile="fast"))
