"""A Python attention function as an attncheck kernel.

The gate (attncheck._core, or the exec server of isolate=True) calls `Kernel.call` with arrays in storage form
(_frameworks.py); the kernel converts them to the function's framework and device, calls `fn(q, k, v, *, scale,
causal)` — and for backward the `backward` function or autograd — and returns what it got in storage form. Every
exception the function raises becomes a failing call whose message is its traceback; `attncheck.Unsupported`
declines the call instead (a shape or dtype the function does not handle).
"""
from __future__ import annotations

import traceback

import numpy as np

from . import _frameworks
from ._core import ERROR, OK, UNSUPPORTED  # the ABI's statuses


class Unsupported(Exception):
    """Raised by a checked function to decline a call it does not handle (a head ratio, a head dimension, a dtype):
    the case counts as declined, not failed."""


def _traceback_text(exc):
    """The exception's type and message first (the report's one-line view shows it), then the traceback."""
    head = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)).rstrip()
    return f"raised {head}\n{tb}"


class Kernel:
    """fn (and backward: a function, 'autograd' or None) as one kernel of the gate."""

    def __init__(self, fn, backward=None, framework=None, device="cpu", name=None):
        if not callable(fn):
            raise TypeError(f"fn must be callable, not {type(fn).__name__}")
        if backward is not None and backward != "autograd" and not callable(backward):
            raise TypeError("backward must be a function, 'autograd' or None")
        self.fn = fn
        self.backward = backward
        self.device = device
        self.name = name or kernel_name(fn)
        self.adapter = _frameworks.Adapter(framework or detect_framework(fn, device), device)
        if backward == "autograd" and self.adapter.framework == "numpy":
            raise ValueError("backward='autograd' needs torch or jax; a NumPy function passes a backward function")

    @property
    def location(self):
        """module:qualname of fn, as reports name it."""
        return f"{getattr(self.fn, '__module__', '?')}:{getattr(self.fn, '__qualname__', type(self.fn).__name__)}"

    def call(self, backward, scale, causal, ins, outs, features=None):
        """One call: `ins` (q, k, v | q, k, v, out, lse, dout) and `outs` (the gate's output tensors, for their
        dtypes and shapes; None where not wanted) in storage form, and the keyword arguments of the call's features
        (window, softcap, alibi_slopes, sinks, attn_mask). Returns (OK, arrays) or (status, message)."""
        try:
            a = self.adapter
            x = [a.to_framework(t) for t in ins]
            kw = {k: a.to_framework(v) if isinstance(v, np.ndarray) else v for k, v in (features or {}).items()}
            if not backward:
                result = self.fn(x[0], x[1], x[2], scale=scale, causal=causal, **kw)
                out, lse = (result[0], result[1]) if isinstance(result, (tuple, list)) else (result, None)
                got = [a.to_storage(out, outs[0], "out"),
                       None if outs[1] is None or lse is None else a.to_storage(lse, outs[1], "lse")]
                return OK, tuple(got)
            if self.backward == "autograd":
                grads = a.autograd(self.fn, x[0], x[1], x[2], x[5], scale, causal, kw)
            else:
                grads = self.backward(*x, scale=scale, causal=causal, **kw)
            if not isinstance(grads, (tuple, list)) or len(grads) != 3:
                raise ValueError("backward must return (dq, dk, dv)")
            return OK, tuple(a.to_storage(g, like, n) for g, like, n in zip(grads, outs, ("dq", "dk", "dv")))
        except Unsupported as e:
            return UNSUPPORTED, str(e) or "declined by the function"
        except Exception as e:  # the function's own failure: reported with its traceback
            return ERROR, _traceback_text(e)


def kernel_name(fn):
    """A kernel name from a function: letters, digits, _ . + - (the exec protocol's alphabet)."""
    raw = getattr(fn, "__name__", None) or type(fn).__name__
    name = "".join(c if c.isalnum() or c in "_.+-" else "_" for c in raw)[:64]
    return name or "fn"


PROBE_DTYPES = ("f32", "f16", "bf16")
_STORAGE = {"f32": np.float32, "f16": np.float16}  # bf16's storage form is its bits (f32_to_bf16_bits)
# (L, D) of the probe's q, k, v [1, 1, L, D], smallest first: kernels that need D % 8 == 0, a production head dim or
# whole tiles of keys decline the smaller ones.
PROBE_SHAPES = ((2, 4), (16, 16), (128, 64), (128, 128))


def probe_call(fn, adapter, dtypes=PROBE_DTYPES):
    """fn's result on a small problem (q, k, v of shape [1, 1, L, D], scale 0.5, not causal) in `adapter`'s
    framework: the first of PROBE_SHAPES, in the first of `dtypes`, that fn does not decline — a kernel that takes
    only float16 and bfloat16 (FlashAttention, cuDNN) raises attncheck.Unsupported for float32, one that needs
    D % 8 == 0 for D = 4. Raises fn's error, or the last Unsupported when it declines them all."""
    rng = np.random.default_rng(0)
    declined = None
    for length, head_dim in PROBE_SHAPES:
        values = [rng.standard_normal((1, 1, length, head_dim)).astype(np.float32) for _ in range(3)]
        for dtype in dtypes:
            storage = [_frameworks.f32_to_bf16_bits(a) if dtype == "bf16" else a.astype(_STORAGE[dtype])
                       for a in values]
            q, k, v = (adapter.to_framework(a) for a in storage)
            try:
                return fn(q, k, v, scale=0.5, causal=False)
            except Unsupported as e:
                declined = e
    raise declined if declined is not None else ValueError("probe_call: no dtype to probe")


def _probe(fn, framework, device):
    """The framework fn's result on a small problem in `framework` belongs to."""
    return _frameworks.framework_of(_frameworks.first(probe_call(fn, _frameworks.Adapter(framework, device))))


def detect_framework(fn, device="cpu"):
    """The framework fn works in, from what it returns: NumPy inputs first (a JAX function takes them and returns
    JAX arrays), then torch tensors, then JAX arrays."""
    errors = []
    for fw in _frameworks.FRAMEWORKS:
        if fw != "numpy" and not _frameworks.available(fw):
            continue
        if fw == "numpy" and device != "cpu":
            continue
        try:
            got = _probe(fn, fw, device)
        except Exception as e:
            errors.append(f"{fw}: {type(e).__name__}: {e}")
            continue
        if got is not None:
            return got
        errors.append(f"{fw}: returned {type(got).__name__}")
    raise ValueError("cannot tell which framework fn takes (pass framework='numpy', 'torch' or 'jax'); tried "
                     + "; ".join(errors))
