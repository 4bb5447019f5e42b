"""An attention kernel's tests as kernel repositories write them — a grid of shapes, causal or not, three dtypes, GQA
and MQA, a decode step — with attncheck's per-element bound where `torch.testing.assert_close(out, ref, atol=…,
rtol=…)` was: no reference to write, no tolerance to tune per dtype.

    pytest examples/python/test_my_attention.py

The kernel here is PyTorch's scaled_dot_product_attention (on CUDA when there is a device); put yours in its place and
declare what it promises in CONTRACT (spec/SPEC.md §3.1).
"""
import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

from attncheck.testing import assert_attention_close  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
#: SDPA aligns is_causal top-left (row i sees keys j ≤ i) when Lq ≠ Lk.
CONTRACT = {"causal": "top-left"}


def my_attention(q, k, v, causal):
    """The kernel under test: q [B, Hq, Lq, D], k and v [B, Hkv, Lk, D]."""
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=q.shape[1] != k.shape[1])


SHAPES = [  # batch, heads_q, heads_kv, seqlen_q, seqlen_k, head_dim
    (1, 8, 8, 128, 128, 64),   # multi-head
    (2, 8, 2, 113, 203, 64),   # grouped-query (4 query heads per kv head), ragged lengths
    (2, 6, 1, 97, 97, 80),     # multi-query, a head dim that is no power of two
    (1, 12, 4, 1, 256, 128),   # one decode step against a KV cache
]
DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def inputs(batch, heads_q, heads_kv, seqlen_q, seqlen_k, head_dim, dtype, requires_grad=False):
    g = torch.Generator().manual_seed(0)
    make = lambda *shape: torch.randn(*shape, generator=g).to(DEVICE, dtype).requires_grad_(requires_grad)  # noqa
    return (make(batch, heads_q, seqlen_q, head_dim), make(batch, heads_kv, seqlen_k, head_dim),
            make(batch, heads_kv, seqlen_k, head_dim))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_forward(shape, causal, dtype):
    q, k, v = inputs(*shape, dtype)
    out = my_attention(q, k, v, causal)
    assert_attention_close(out, q, k, v, causal=causal, contract=CONTRACT)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES[1:3], ids=lambda s: "x".join(map(str, s)))
def test_backward(shape, dtype):
    q, k, v = inputs(*shape, dtype, requires_grad=True)
    out = my_attention(q, k, v, causal=True)
    dout = torch.randn(out.shape, generator=torch.Generator().manual_seed(1)).to(DEVICE, dtype)
    dq, dk, dv = torch.autograd.grad(out, (q, k, v), dout)
    # SDPA returns no log-sum-exp: lse=none says so, and the gradients are judged without one.
    assert_attention_close(out.detach(), q.detach(), k.detach(), v.detach(), dout=dout, dq=dq, dk=dk, dv=dv,
                           causal=True, contract=dict(CONTRACT, lse="none"))
