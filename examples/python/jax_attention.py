"""Attention in JAX checked forward and backward (jax.vjp): float32 accumulation whatever the storage dtype, a row
that sees no key giving out 0 and lse −∞, as attncheck's default contract asks.

    python examples/python/jax_attention.py
"""
import jax
import jax.numpy as jnp

import attncheck


def attention(q, k, v, *, scale, causal):
    group = q.shape[1] // k.shape[1]
    k, v = jnp.repeat(k, group, axis=1), jnp.repeat(v, group, axis=1)
    s = scale * jnp.einsum("bhid,bhjd->bhij", q, k, preferred_element_type=jnp.float32)
    if causal:
        lq, lk = s.shape[-2], s.shape[-1]
        s = jnp.where(jnp.arange(lk)[None, :] > jnp.arange(lq)[:, None] + (lk - lq), -jnp.inf, s)
    m = s.max(axis=-1, keepdims=True, initial=-jnp.inf)  # Lk = 0: no key, no max
    m = jnp.where(jnp.isfinite(m), m, 0.0)
    e = jnp.exp(s - m)
    total = e.sum(axis=-1, keepdims=True)
    out = jnp.einsum("bhij,bhjd->bhid", e / jnp.where(total > 0, total, 1.0), v.astype(jnp.float32))
    return out.astype(q.dtype), (jnp.log(total) + m)[..., 0]


if __name__ == "__main__":
    device = "gpu" if any(d.platform == "gpu" for d in jax.devices()) else "cpu"
    report = attncheck.check(attention, backward="autograd", device="cuda" if device == "gpu" else "cpu",
                             profile="quick")
    print(f"JAX attention on {device}: {report.verdict}")
    print(report.summary())
    raise SystemExit(0 if report.passed else 1)
