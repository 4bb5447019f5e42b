"""Scaled dot-product attention in NumPy, as attncheck checks it: q [B,Hq,Lq,D], k [B,Hkv,Lk,D], v [B,Hkv,Lk,Dv],
query head h reading kv head h // (Hq // Hkv), causal aligned bottom-right (row i sees keys j ≤ i + Lk − Lq), a row
that sees no key giving out 0 and lse −∞. It computes in float64 and rounds once to the inputs' dtype."""
import numpy as np


def attention(q, k, v, *, scale, causal):
    with np.errstate(all="ignore"):  # overflowing inputs give inf and NaN, as they should
        return _attention(q, k, v, scale, causal)


def _attention(q, k, v, scale, causal):
    dtype = q.dtype
    q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    group = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)  # grouped-query attention
    s = scale * np.einsum("bhid,bhjd->bhij", q, k)
    if causal:
        lq, lk = s.shape[-2], s.shape[-1]
        hidden = np.arange(lk)[None, :] > np.arange(lq)[:, None] + (lk - lq)
        s = np.where(hidden, -np.inf, s)
    m = s.max(axis=-1, keepdims=True, initial=-np.inf)  # an empty KV cache (Lk = 0) has no max
    m = np.where(np.isfinite(m), m, 0.0)  # a row that sees no key
    e = np.exp(s - m)
    total = e.sum(axis=-1, keepdims=True)
    out = np.einsum("bhij,bhjd->bhid", e / np.where(total > 0, total, 1.0), v)
    lse = (np.log(total) + m)[..., 0]
    return out.astype(dtype), lse.astype(np.float32)


def attention_unscaled(q, k, v, *, scale, causal):
    """The classic bug: the logits are not multiplied by scale = 1/√d."""
    return attention(q, k, v, scale=1.0, causal=causal)
