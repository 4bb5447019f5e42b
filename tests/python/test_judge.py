"""attncheck.judge and attncheck.testing.assert_attention_close: tensors a kernel already returned, judged element by
element — correct kernels' outputs pass in every dtype, planted bugs fail naming the worst element and the
declaration that would explain them, and what does not fit is one ValueError line."""
import json
import math
import os
import subprocess
import warnings

import numpy as np
import pytest

import attncheck
from attncheck.testing import assert_attention_close
import kernels
from kernels import attention, attention_backward

ml_dtypes = pytest.importorskip("ml_dtypes")
DTYPES = {"f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16}


def problem(dtype="f32", B=2, Hq=4, Hkv=2, Lq=9, Lk=13, D=16, Dv=8, seed=0):
    rng = np.random.default_rng(seed)
    t = DTYPES[dtype]
    return tuple(rng.standard_normal(s).astype(t) for s in ((B, Hq, Lq, D), (B, Hkv, Lk, D), (B, Hkv, Lk, Dv)))


def forward(q, k, v, *, causal=False, scale=None):
    return attention(q, k, v, scale=scale or 1 / math.sqrt(q.shape[-1]), causal=causal)


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("causal", [False, True])
def test_a_correct_kernels_output_and_lse_pass_in_every_dtype(dtype, causal):
    q, k, v = problem(dtype)
    out, lse = forward(q, k, v, causal=causal)
    j = attncheck.judge(q, k, v, out, lse=lse, causal=causal)
    assert j.passed and j.verdict == "pass", str(j)
    assert [t.tensor for t in j.tensors] == ["O", "LSE"]
    assert all(t.exceeding == 0 and t.ratio <= 1 for t in j.tensors)
    assert j.tensor("O").elements == out.size


def test_gradients_of_a_correct_backward_pass_and_a_wrong_dv_fails_on_dv():
    q, k, v = problem("f32")
    scale = 1 / math.sqrt(q.shape[-1])
    out, lse = forward(q, k, v)
    dout = np.random.default_rng(1).standard_normal(out.shape).astype(np.float32)
    dq, dk, dv = (g.astype(np.float32) for g in attention_backward(q, k, v, out, lse, dout, scale=scale, causal=False))
    j = attncheck.judge(q, k, v, out, lse=lse, dout=dout, dq=dq, dk=dk, dv=dv)
    assert j.passed, str(j)
    assert [t.tensor for t in j.tensors] == ["O", "LSE", "dQ", "dK", "dV"]
    dv_wrong = dv.copy()
    dv_wrong[1, 0, 3, 2] += 0.5
    j = attncheck.judge(q, k, v, out, lse=lse, dout=dout, dq=dq, dk=dk, dv=dv_wrong)
    assert j.verdict == "fail" and j.exit_code == 1
    assert j.tensor("dV").exceeding == 1 and j.tensor("dV").worst_index == (1, 0, 3, 2)
    assert j.tensor("dQ").exceeding == 0


def test_an_unscaled_kernel_fails_with_its_worst_element_counted():
    q, k, v = problem("f16")
    out, lse = attention(q, k, v, scale=1.0, causal=False)
    j = attncheck.judge(q, k, v, out, lse=lse)
    assert j.verdict == "fail"
    o = j.tensor("O")
    assert o.exceeding > 0 and o.ratio > 1 and len(o.worst_index) == 4
    assert abs(o.got - o.exact) > o.bound
    assert "first failing check" in str(j) and "O[" in str(j)
    assert j.hints == ["O and LSE are the exact attention at scale 1, not 1/√D = 0.25"]
    assert "hint: O and LSE are the exact attention at scale 1" in str(j)


def test_a_kernel_that_drops_its_tail_keys_is_told_so_and_a_correct_one_gets_no_hint():
    q, k, v = problem("f32", Lk=13)
    out, lse = attention(q, k[:, :, :8], v[:, :, :8], scale=0.25, causal=False)
    j = attncheck.judge(q, k, v, out, lse=lse)
    assert j.verdict == "fail" and len(j.hints) == 1
    assert "is the exact output without keys 8…12" in j.hints[0]
    with pytest.raises(AssertionError, match="a dropped tail tile"):
        assert_attention_close(out, q, k, v, lse=lse)
    right, right_lse = attention(q, k, v, scale=0.25, causal=False)
    assert attncheck.judge(q, k, v, right, lse=right_lse).hints == []


def test_a_top_left_causal_kernel_fails_the_default_and_names_the_declaration_that_explains_it():
    q, k, v = problem("f32", Lq=5, Lk=12)
    # Top-left alignment: row i sees keys j <= i, computed as bottom-right on the keys cut to Lq.
    out_tl, lse_tl = forward(q, k[:, :, :5], v[:, :, :5], causal=True)
    j = attncheck.judge(q, k, v, out_tl, lse=lse_tl, causal=True)
    assert j.verdict == "fail"
    assert "causal=top-left" in [d for d, _ in j.explained_by]
    assert "would pass under causal=top-left" in str(j)
    assert attncheck.judge(q, k, v, out_tl, lse=lse_tl, causal=True, contract="causal=top-left").passed


def test_torch_tensors_in_flash_attention_layout_are_judged_like_numpy():
    torch = pytest.importorskip("torch")
    q, k, v = problem("bf16", Hq=4, Hkv=1)
    out, lse = forward(q, k, v, causal=True)
    to_torch = lambda a: torch.from_numpy(a.astype(np.float32)).to(torch.bfloat16).transpose(1, 2)  # noqa: E731
    j = attncheck.judge(to_torch(q), to_torch(k), to_torch(v), to_torch(out), lse=torch.from_numpy(lse), causal=True,
                        layout="blhd")
    assert j.passed, str(j)
    ref = torch.nn.functional.scaled_dot_product_attention(
        *(torch.from_numpy(a.astype(np.float32)) for a in (q, np.repeat(k, 4, 1), np.repeat(v, 4, 1))))
    assert attncheck.judge(torch.from_numpy(q.astype(np.float32)), torch.from_numpy(k.astype(np.float32)),
                           torch.from_numpy(v.astype(np.float32)), ref).passed


def test_assert_attention_close_is_a_drop_in_for_assert_close():
    q, k, v = problem("f16")
    out, _ = forward(q, k, v)
    assert assert_attention_close(out, q, k, v).passed
    bad = out.copy()
    bad[0, 1, 2, 3] = np.float16(bad[0, 1, 2, 3] + 0.25)
    with pytest.raises(AssertionError, match=r"FAIL[\s\S]*O\[0,1,2,3\]"):
        assert_attention_close(bad, q, k, v)


def test_undecided_elements_warn_instead_of_failing():
    q, k, v = problem("f16", B=1, Hq=1, Hkv=1, Lq=2, Lk=3, D=4, Dv=4)
    q = (q.astype(np.float32) * 4000).astype(np.float16)  # logits past exp's range: the model cannot bound P
    out, lse = forward(q, k, v)
    j = attncheck.judge(q, k, v, out, lse=lse)
    if j.verdict == "undecided":
        with pytest.warns(UserWarning, match="could not decide"):
            assert_attention_close(out, q, k, v, lse=lse)
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert_attention_close(out, q, k, v, lse=lse)


@pytest.mark.parametrize("change, message", [
    (dict(out=np.zeros((2, 4, 9, 7), np.float32)), r"out has shape \[2, 4, 9, 7\]; this problem's out is \[2, 4, 9, 8\]"),
    (dict(out=np.zeros((2, 4, 9, 8), np.float16)), r"out is f16; expected f32"),
    (dict(out=np.zeros((2, 4, 9, 8), np.float64)), r"out is float64; attncheck judges float32, float16 or bfloat16"),
    (dict(out=np.zeros((4, 9, 8), np.float32)), r"out has shape \(4, 9, 8\); expected 4 dimensions"),
    (dict(lse=np.zeros((2, 4, 8), np.float32)), r"lse has shape \[2, 4, 8\]"),
    (dict(dq="same"), r"give dq, dk and dv together"),
    (dict(dq="same", dk="same", dv="same"), r"dq, dk, dv need dout"),
    (dict(q="nan"), r"q holds NaN at q\[0,0,0,0\]"),
    (dict(contract="causal=sideways"), r"contract: "),
    (dict(layout="lbhd"), r"layout must be one of bhld, blhd"),
    (dict(k="short"), r"D"),
])
def test_what_does_not_fit_is_one_value_error_line(change, message):
    q, k, v = problem("f32")
    out, lse = forward(q, k, v)
    args = dict(q=q, k=k, v=v, out=out, lse=lse)
    for name, value in change.items():
        if isinstance(value, np.ndarray) or name in ("contract", "layout"):
            pass
        elif value == "same":
            value = {"dq": q, "dk": k, "dv": v}[name]
        elif value == "nan":
            value = q.copy()
            value[0, 0, 0, 0] = np.nan
        elif value == "short":
            value = k[..., :3]
        args[name] = value
    q, k, v, out = (args.pop(n) for n in ("q", "k", "v", "out"))
    with pytest.raises(ValueError, match=message) as e:
        attncheck.judge(q, k, v, out, **args)
    assert "\n" not in str(e.value)


EXAMPLE = "test_my_attention.py"  # examples/python/, on sys.path (conftest.py)


def test_the_example_test_file_of_a_kernel_repository_passes_on_torch_sdpa():
    pytest.importorskip("torch")
    import os
    import subprocess
    import sys
    from conftest import EXAMPLES
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        os.path.join(EXAMPLES, EXAMPLE)], capture_output=True, text=True, cwd=EXAMPLES)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "30 passed" in r.stdout


def test_the_example_test_file_fails_a_kernel_with_the_wrong_scale(monkeypatch):
    torch = pytest.importorskip("torch")
    import test_my_attention as example
    unscaled = lambda q, k, v, causal: torch.nn.functional.scaled_dot_product_attention(  # noqa: E731
        q, k, v, is_causal=causal, scale=1.0, enable_gqa=q.shape[1] != k.shape[1])
    monkeypatch.setattr(example, "my_attention", unscaled)
    with pytest.raises(AssertionError, match="FAIL"):
        example.test_forward(example.SHAPES[1], True, torch.float16)


def test_shrink_cuts_a_failure_past_4096_keys_with_gqa_4_to_a_sixteenth_of_its_input():
    rng = np.random.default_rng(3)
    q = rng.standard_normal((2, 8, 8, 8)).astype(np.float32)
    k = rng.standard_normal((2, 2, 4160, 8)).astype(np.float32)
    v = rng.standard_normal((2, 2, 4160, 8)).astype(np.float32)
    fn = kernels.split_kv_past(4096)
    assert not attncheck.judge(q, k, v, fn(q, k, v, scale=8 ** -0.5, causal=False)[0], explain=False).passed
    s = attncheck.shrink(fn, q, k, v)
    assert s.judgment.verdict == "fail"
    assert s.fraction <= 1 / 16, str(s)
    # What the bug needs stays: two kv heads (the roll is the identity on one) and more than 4096 keys.
    assert s.slices["heads"][1] - s.slices["heads"][0] == 2
    assert s.k.shape[2] > 4096 and s.q.shape[2] == 1 and s.q.shape[0] == 1
    assert "attncheck shrink:" in str(s)
    # The slice is an input like any other: judge fails the kernel on it again.
    assert attncheck.judge(s.q, s.k, s.v, fn(s.q, s.k, s.v, scale=s.scale, causal=False)[0]).verdict == "fail"


def test_shrink_keeps_torch_tensors_in_their_layout_and_refuses_a_passing_input():
    torch = pytest.importorskip("torch")
    sdpa = lambda q, k, v, *, scale, causal: torch.nn.functional.scaled_dot_product_attention(  # noqa: E731
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), scale=scale, is_causal=causal,
        enable_gqa=True).transpose(1, 2)
    q, k, v = (torch.from_numpy(a).transpose(1, 2) for a in problem("f32", B=2, Hq=4, Hkv=2, Lq=9, Lk=40))
    with pytest.raises(ValueError, match="does not fail"):
        attncheck.shrink(sdpa, q, k, v, layout="blhd")
    unscaled = lambda q, k, v, *, scale, causal: sdpa(q, k, v, scale=1.0, causal=causal)  # noqa: E731
    s = attncheck.shrink(unscaled, q, k, v, layout="blhd")
    assert isinstance(s.q, torch.Tensor) and s.q.shape[0] == 1 and s.q.shape[1] == 1  # [B, L, H, D]: one row
    assert s.fraction < 1 / 16


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_outputs_under_every_python_feature_are_judged_with_the_features_and_a_wrong_one_fails(dtype):
    import kernels
    q, k, v = problem(dtype, Lq=11, Lk=17)
    rng = np.random.default_rng(5)
    features = dict(window=(4, 2), softcap=20.0, alibi_slopes=2.0 ** -np.arange(1, 5), sinks=rng.standard_normal(4),
                    attn_mask=(rng.random((1, 4, 11, 17)) < 0.8).astype(np.uint8))  # boolean, as the C ABI sends it
    out, lse = kernels.attention_with_features(q, k, v, scale=0.25, causal=True, **features)
    j = attncheck.judge(q, k, v, out, lse=lse, causal=True, **features)
    assert j.passed, str(j)
    for name in features:  # the same outputs judged without one of the features it used
        without = {n: f for n, f in features.items() if n != name}
        assert attncheck.judge(q, k, v, out, lse=lse, causal=True, explain=False, **without).verdict == "fail", name
    for same in (features["attn_mask"].astype(bool), np.where(features["attn_mask"], 0.0, -np.inf)):  # bool, additive
        assert attncheck.judge(q, k, v, out, lse=lse, causal=True, **dict(features, attn_mask=same)).passed


@pytest.mark.parametrize("change, message", [
    (dict(alibi_slopes=np.ones(3)), r"alibi_slopes: has 3 values; one per query head: Hq = 4"),
    (dict(sinks=np.ones((2, 2))), r"sinks has shape \(2, 2\); expected one value per query head"),
    (dict(attn_mask=np.ones((2, 4, 9), bool)), r"attn_mask has shape \(2, 4, 9\)"),
    (dict(attn_mask=np.ones((3, 4, 9, 13), bool)), r"attn_mask: is \[3, 4, …\]"),
    (dict(window=5), r"window is \(left, right\), not 5"),
    (dict(window=(-3, 0)), r"window: a window is \(left, right\)"),
    (dict(softcap=-1.0), r"softcap: softcap is a finite cap"),
])
def test_a_feature_argument_that_does_not_fit_is_one_value_error_line(change, message):
    q, k, v = problem("f32")
    out, lse = forward(q, k, v)
    with pytest.raises(ValueError, match=message) as e:
        attncheck.judge(q, k, v, out, lse=lse, **change)
    assert "\n" not in str(e.value)


def test_save_writes_the_judgment_and_its_inputs_and_the_cli_judges_them_again(tmp_path):
    cli = os.environ.get("ATTNCHECK_CLI")
    if not cli:
        pytest.skip("ATTNCHECK_CLI (the attncheck executable) is not set: run through ctest")
    q, k, v = problem("bf16", Lq=5, Lk=12)
    out, lse = forward(q, k, v, causal=True, scale=1.0)  # the wrong scale
    j = attncheck.judge(q, k, v, out, lse=lse, causal=True)
    assert j.save(tmp_path / "judged") == os.fspath(tmp_path / "judged")
    saved = {p.name for p in (tmp_path / "judged").iterdir()}
    assert saved == {"report.json", "summary.md", "report.html", "inputs.npz"}
    doc = json.loads((tmp_path / "judged" / "report.json").read_text())
    assert doc["format"] == "attncheck-judgment" and doc["verdict"] == "fail" and doc["dtype"] == "bf16"
    assert [t["tensor"] for t in doc["tensors"]] == ["O", "LSE"] and doc["hints"][0]["kind"] == "scale"
    assert doc["replay"].startswith("attncheck judge --inputs 'inputs.npz' --dtype bf16 --scale ")
    assert "hint: O and LSE are the exact attention at scale 1" in (tmp_path / "judged" / "summary.md").read_text()
    # The replay line judges the kept inputs again: the same verdict, the same worst elements.
    again = subprocess.run(cli + doc["replay"][len("attncheck"):], shell=True, cwd=tmp_path / "judged",
                           capture_output=True, text=True)
    assert again.returncode == 1, again.stderr
    assert again.stdout.splitlines()[:3] == str(j).splitlines()[:3]


def test_save_of_a_passing_judgment_and_to_a_place_it_cannot_write(tmp_path):
    q, k, v = problem("f32")
    out, lse = forward(q, k, v)
    j = attncheck.judge(q, k, v, out, lse=lse)
    j.save(tmp_path)
    assert json.loads((tmp_path / "report.json").read_text())["verdict"] == "pass"
    (tmp_path / "file").write_text("")
    with pytest.raises(ValueError, match="save: "):
        j.save(tmp_path / "file")


def varlen_forward(q, k, v, cu_q, cu_k, *, causal, leak=0):
    """flash_attn_varlen_func's results on packed q [total_q, Hq, D], k, v [total_k, Hkv, D]: each sequence on its
    own, bottom-right causal; `leak` keys of the next sequence read too (a boundary bug)."""
    outs, lses = [], []
    for b in range(len(cu_q) - 1):
        kb = slice(cu_k[b], min(cu_k[b + 1] + leak, cu_k[-1]))
        o, l = forward(q[None, cu_q[b]:cu_q[b + 1]].transpose(0, 2, 1, 3), k[None, kb].transpose(0, 2, 1, 3),
                       v[None, kb].transpose(0, 2, 1, 3), causal=causal)
        outs.append(o[0].transpose(1, 0, 2))
        lses.append(l[0])
    return np.concatenate(outs), np.concatenate(lses, axis=1)


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_a_varlen_batch_is_judged_per_sequence_and_a_kernel_reading_past_a_boundary_fails(dtype):
    rng = np.random.default_rng(5)
    cu_q, cu_k = np.array([0, 3, 3, 12], np.int32), np.array([0, 5, 9, 20], np.int32)  # an empty query sequence too
    t = DTYPES[dtype]
    q = rng.standard_normal((12, 4, 16)).astype(t)
    k, v = (rng.standard_normal((20, 2, 16)).astype(t) for _ in range(2))
    out, lse = varlen_forward(q, k, v, cu_q, cu_k, causal=True)
    j = attncheck.judge(q, k, v, out, lse=lse, causal=True, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k)
    assert j.passed, str(j)
    assert j.tensor("O").shape == (3, 4, 9, 16)  # logical [B, Hq, longest Lq, Dv]
    leaky, leaky_lse = varlen_forward(q, k, v, cu_q, cu_k, causal=False, leak=1)
    bad = attncheck.judge(q, k, v, leaky, lse=leaky_lse, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k)
    assert bad.verdict == "fail"
    with pytest.raises(ValueError, match="give cu_seqlens_q and cu_seqlens_k together"):
        attncheck.judge(q, k, v, out, cu_seqlens_q=cu_q)
    with pytest.raises(ValueError, match="the cu_seqlens it goes with end at 20"):
        attncheck.judge(q, k[:19], v[:19], out, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k)
    with pytest.raises(ValueError, match="cu_seqlens_k must be"):
        attncheck.judge(q, k, v, out, cu_seqlens_q=cu_q, cu_seqlens_k=np.array([0, 9, 5, 20]))


@pytest.mark.parametrize("paged", [False, True])
def test_a_kv_cache_dense_or_paged_is_judged_on_each_sequences_keys_and_a_wrong_page_fails(paged):
    rng = np.random.default_rng(9)
    lengths, page = [37, 5, 64], 16
    q = rng.standard_normal((3, 2, 4, 16)).astype(np.float16)  # [B, Lq, Hq, D]: two new rows per sequence
    keys = [(rng.standard_normal((n, 2, 16)).astype(np.float16), rng.standard_normal((n, 2, 16)).astype(np.float16))
            for n in lengths]
    outs, lses = [], []
    for b, (kb, vb) in enumerate(keys):
        o, l = forward(q[b:b + 1].transpose(0, 2, 1, 3), kb[None].transpose(0, 2, 1, 3),
                       vb[None].transpose(0, 2, 1, 3), causal=True)
        outs.append(o.transpose(0, 2, 1, 3))
        lses.append(l)
    out, lse = np.concatenate(outs), np.concatenate(lses)
    if paged:  # pages of 16 keys, shuffled, with one unused
        table = np.full((3, 4), -1, np.int32)
        k_cache, v_cache = (np.full((11, page, 2, 16), np.nan, np.float16) for _ in range(2))
        order = iter(rng.permutation(11))
        for b, (kb, vb) in enumerate(keys):
            for n in range(-(-len(kb) // page)):
                table[b, n] = next(order)
                k_cache[table[b, n], :len(kb[n * page:(n + 1) * page])] = kb[n * page:(n + 1) * page]
                v_cache[table[b, n], :len(vb[n * page:(n + 1) * page])] = vb[n * page:(n + 1) * page]
        k_cache, v_cache = np.nan_to_num(k_cache), np.nan_to_num(v_cache)
        cache = dict(block_table=table)
    else:  # a dense cache of 64 keys per sequence
        k_cache, v_cache = (np.zeros((3, 64, 2, 16), np.float16) for _ in range(2))
        for b, (kb, vb) in enumerate(keys):
            k_cache[b, :len(kb)], v_cache[b, :len(vb)] = kb, vb
        cache = {}
    judged = dict(lse=lse, causal=True, layout="blhd", cache_seqlens=np.array(lengths), **cache)
    j = attncheck.judge(q, k_cache, v_cache, out, **judged)
    assert j.passed, str(j)
    # A kernel that read sequence 0's last page as sequence 2's: wrong on sequence 2 only.
    wrong = out.copy()
    wrong[2] = outs[0][0]
    assert attncheck.judge(q, k_cache, v_cache, wrong, **judged).verdict == "fail"
    with pytest.raises(ValueError, match="cache_seqlens has 2 sequences; q has a batch of 3"):
        attncheck.judge(q, k_cache, v_cache, out, **{**judged, "cache_seqlens": np.array(lengths[:2])})
    with pytest.raises(ValueError, match="block_table needs cache_seqlens"):
        attncheck.judge(q, k_cache, v_cache, out, lse=lse, layout="blhd", block_table=np.zeros((3, 4)))
