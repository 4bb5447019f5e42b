"""Attention functions for the Python tests: correct ones and planted bugs."""
import ctypes
import time

import numpy as np

import attncheck
from numpy_attention import attention, attention_unscaled  # noqa: F401  (re-exported for the tests)


def attention_no_lse(q, k, v, *, scale, causal):
    return attention(q, k, v, scale=scale, causal=causal)[0]


def attention_half_only_no_lse(q, k, v, *, scale, causal):
    """out alone, and only for float16 inputs: float32 is declined, as FlashAttention and cuDNN kernels do."""
    if q.dtype != np.float16:
        raise attncheck.Unsupported(f"float16 only, not {q.dtype}")
    return attention_no_lse(q, k, v, scale=scale, causal=causal)


def attention_raises_on_gqa(q, k, v, *, scale, causal):
    if q.shape[1] != k.shape[1]:
        raise ValueError(f"no grouped-query attention here: Hq={q.shape[1]} Hkv={k.shape[1]}")
    return attention(q, k, v, scale=scale, causal=causal)


def attention_declines_gqa(q, k, v, *, scale, causal):
    if q.shape[1] != k.shape[1]:
        raise attncheck.Unsupported("grouped-query attention is not implemented")
    return attention(q, k, v, scale=scale, causal=causal)


def attention_transposed(q, k, v, *, scale, causal):
    out, lse = attention(q, k, v, scale=scale, causal=causal)
    return np.swapaxes(out, 2, 3), lse


def attention_scales_in_place(q, k, v, *, scale, causal):
    """Writes its input: q *= scale, as a careless NumPy kernel does."""
    q *= np.asarray(scale, dtype=q.dtype)
    return attention(q, k, v, scale=1.0, causal=causal)


def attention_segfaults_on_long_rows(q, k, v, *, scale, causal):
    """Native code crashing: a null read once Lk > 4."""
    if k.shape[2] > 4:
        ctypes.string_at(0)
    return attention(q, k, v, scale=scale, causal=causal)


def attention_aborts_on_long_rows(q, k, v, *, scale, causal):
    """Native code aborting (an assertion in a C extension): abort() once Lk > 4."""
    if k.shape[2] > 4:
        ctypes.CDLL(None).abort()
    return attention(q, k, v, scale=scale, causal=causal)


def attention_hangs_on_long_rows(q, k, v, *, scale, causal):
    if k.shape[2] > 4:
        time.sleep(3600)
    return attention(q, k, v, scale=scale, causal=causal)


def attention_backward(q, k, v, out, lse, dout, *, scale, causal):
    """The exact gradients of `attention`, in float64, as a hand-written backward kernel returns them."""
    with np.errstate(all="ignore"):  # overflowing inputs give inf and NaN, as they should
        return _attention_backward(q, k, v, dout, scale, causal)


def _softmax(q, k, v, scale, causal):
    """In float64: k and v repeated over each kv head's query heads, P (0 on a row that sees no key) and the LSE."""
    group = q.shape[1] // k.shape[1]
    kr, vr = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    s = scale * np.einsum("bhid,bhjd->bhij", q, kr)
    if causal:
        lq, lk = s.shape[-2], s.shape[-1]
        s = np.where(np.arange(lk)[None, :] > np.arange(lq)[:, None] + (lk - lq), -np.inf, s)
    m = s.max(axis=-1, keepdims=True, initial=-np.inf)  # Lk = 0: no key, no max
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(s - m)
    total = e.sum(axis=-1, keepdims=True)
    return kr, vr, e / np.where(total > 0, total, 1.0), (np.log(total) + m)[..., 0]


def _attention_backward(q, k, v, dout, scale, causal):
    dtype = q.dtype
    q, k, v, dout = (np.asarray(x, dtype=np.float64) for x in (q, k, v, dout))
    group = q.shape[1] // k.shape[1]
    kr, vr, p, _ = _softmax(q, k, v, scale, causal)
    o = np.einsum("bhij,bhjd->bhid", p, vr)
    dv = np.einsum("bhij,bhid->bhjd", p, dout)
    dp = np.einsum("bhid,bhjd->bhij", dout, vr)
    ds = p * (dp - (dout * o).sum(axis=-1, keepdims=True))
    dq = scale * np.einsum("bhij,bhjd->bhid", ds, kr)
    dk = scale * np.einsum("bhij,bhid->bhjd", ds, q)
    b, hq = dk.shape[0], dk.shape[1]
    dk = dk.reshape(b, hq // group, group, *dk.shape[2:]).sum(axis=2)
    dv = dv.reshape(b, hq // group, group, *dv.shape[2:]).sum(axis=2)
    return dq.astype(dtype), dk.astype(dtype), dv.astype(dtype)


def attention_backward_no_dk_scale(q, k, v, out, lse, dout, *, scale, causal):
    dq, dk, dv = attention_backward(q, k, v, out, lse, dout, scale=scale, causal=causal)
    return dq, (np.asarray(dk, dtype=np.float64) / scale).astype(dk.dtype), dv


FEATURES = {"features": ["window", "softcap", "alibi", "sinks", "mask"]}


def _chop_to_12_bits(x):
    """x toward zero to 12 significant bits: tanh.approx.f32's relative error (2^-10.987) at its worst."""
    mantissa, exponent = np.frexp(x)
    return np.ldexp(np.trunc(mantissa * 2.0**12) / 2.0**12, exponent)


def _to_bfloat16(x):
    """x (float32 values) rounded to the nearest bfloat16, ties to even — how oneDNN's fpmath_mode=bf16 reads a
    float32 operand."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return bits.astype(np.uint32).view(np.float32).astype(np.float64)


def attention_bf16_products(q, k, v, *, scale, causal):
    """Correct float32 attention computed the way runtimes compute float32 models in bfloat16 on CPUs that have it:
    every matrix product reads its operands (q, k; P, v) rounded to bfloat16 and accumulates in float32 or wider."""
    with np.errstate(all="ignore"):
        dtype = q.dtype
        q, k, v = (_to_bfloat16(x) for x in (q, k, v))
        _, vr, p, lse = _softmax(q, k, v, scale, causal)
        out = np.einsum("bhij,bhjd->bhid", _to_bfloat16(p), vr)
        return out.astype(dtype), lse.astype(np.float32)


def attention_with_features(q, k, v, *, scale, causal, window=(-1, -1), softcap=0.0, alibi_slopes=None,
                            sinks=None, attn_mask=None, tanh=np.tanh):
    """`attention` with the features a Python function may declare, as spec/SPEC.md §2.7 defines them."""
    with np.errstate(all="ignore"):
        dtype = q.dtype
        q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
        group = q.shape[1] // k.shape[1]
        k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
        s = scale * np.einsum("bhid,bhjd->bhij", q, k)
        lq, lk = s.shape[-2], s.shape[-1]
        i, j = np.arange(lq)[:, None], np.arange(lk)[None, :]
        aligned = i + lk - lq  # bottom-right: row i sits at key i'
        visible = np.ones((lq, lk), dtype=bool)
        if causal:
            visible &= j <= aligned
        if window[0] >= 0:
            visible &= j >= aligned - window[0]
        if window[1] >= 0:
            visible &= j <= aligned + window[1]
        if softcap > 0:
            s = softcap * tanh(s / softcap)
        if alibi_slopes is not None:
            s = s - np.asarray(alibi_slopes, dtype=np.float64)[None, :, None, None] * np.abs(aligned - j)
        visible = np.broadcast_to(visible, s.shape)
        if attn_mask is not None:
            mask = np.asarray(attn_mask)
            if mask.dtype == np.uint8:
                visible = visible & (mask != 0)
            else:
                s, visible = s + mask.astype(np.float64), visible & (mask != -np.inf)
        s = np.where(visible, s, -np.inf)
        m = s.max(axis=-1, keepdims=True, initial=-np.inf)  # Lk = 0: no key, no max
        sink = None if sinks is None else np.asarray(sinks, dtype=np.float64)[None, :, None, None]
        if sink is not None:
            m = np.maximum(m, sink)
        m = np.where(np.isfinite(m), m, 0.0)
        e = np.exp(s - m)
        total = e.sum(axis=-1, keepdims=True) + (0.0 if sink is None else np.exp(sink - m))
        out = np.einsum("bhij,bhjd->bhid", e / np.where(total > 0, total, 1.0), v)
        return out.astype(dtype), (np.log(total) + m)[..., 0].astype(np.float32)


def attention_ignores_softcap(q, k, v, *, scale, causal, softcap=0.0, **features):
    return attention_with_features(q, k, v, scale=scale, causal=causal, **features)


def attention_approximate_tanh(q, k, v, *, scale, causal, **features):
    """Softcap through an emulated tanh.approx.f32, as FlashAttention-2 computes it (contract tanh=approx)."""
    return attention_with_features(q, k, v, scale=scale, causal=causal,
                                   tanh=lambda x: _chop_to_12_bits(np.tanh(x)), **features)


def attention_nan_empty_rows(q, k, v, *, scale, causal):
    """A row that sees no key (bottom-right causal, Lq > Lk) comes out NaN, as a naive softmax of −∞ logits does:
    a failure under the default contract (empty-rows=zero), a warning under empty-rows=unspecified."""
    out, lse = attention(q, k, v, scale=scale, causal=causal)
    empty = q.shape[2] - k.shape[2]
    if causal and empty > 0:
        out, lse = out.copy(), lse.copy()
        out[:, :, :empty] = np.nan
        lse[:, :, :empty] = np.nan
    return out, lse


#: The shapes attention_declines_dv ran: (B, Hq, Hkv, Lq, Lk, D, Dv).
RAN_SHAPES = set()


def attention_declines_dv(q, k, v, *, scale, causal):
    """Implements Dv = D only, as jax.nn.dot_product_attention does."""
    if v.shape[3] != q.shape[3]:
        raise attncheck.Unsupported("Dv != D is not implemented")
    RAN_SHAPES.add((*q.shape[:2], k.shape[1], q.shape[2], k.shape[2], q.shape[3], v.shape[3]))
    return attention(q, k, v, scale=scale, causal=causal)


def attention_one_key_only(q, k, v, *, scale, causal):
    """Implements a single key of head dimension 1: no shape pool can give it three shapes."""
    if k.shape[2] != 1 or q.shape[3] != 1 or v.shape[3] != 1 or q.shape[0] != 1 or q.shape[1] != 1:
        raise attncheck.Unsupported("one key of dimension 1 only")
    return attention(q, k, v, scale=scale, causal=causal)


def split_kv_past(threshold):
    """A split-KV kernel whose splits past `threshold` keys read the next kv head's values: right on short rows and
    on one kv head (every row the generated cases reach), wrong on every row of a longer one with several kv heads."""
    def fn(q, k, v, *, scale, causal):
        if k.shape[2] > threshold:
            v = v.copy()
            v[:, :, threshold:] = np.roll(v, 1, axis=1)[:, :, threshold:]
        return attention(q, k, v, scale=scale, causal=causal)
    return fn
