"""Arrays between attncheck's storage form and the caller's framework.

attncheck hands a kernel NumPy arrays in *storage form*: float32 and float16 as themselves, bfloat16 as its uint16
bits (NumPy has no bfloat16), in whatever strides the gate generated. A framework adapter turns them into the
framework's arrays on the chosen device (zero copy where the framework can view them) and turns what the function
returns back into contiguous storage form of a given dtype.
"""
from __future__ import annotations

import importlib.util

import numpy as np

FRAMEWORKS = ("numpy", "torch", "jax")


def _ml_dtypes():
    """ml_dtypes (NumPy's bfloat16, installed with JAX), or None."""
    try:
        import ml_dtypes
        return ml_dtypes
    except ImportError:
        return None


def available(name):
    return importlib.util.find_spec(name) is not None


def bf16_bits_to_f32(bits):
    """Exact float32 values of bfloat16 bits."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def f32_to_bf16_bits(x):
    """float32 → bfloat16 bits, rounding to nearest even (NaN stays NaN)."""
    b = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    rounded = ((b + np.uint32(0x7FFF) + ((b >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)).astype(np.uint16)
    return np.where(np.isnan(x), np.uint16(0x7FC0), rounded)


class Adapter:
    """One framework on one device."""

    def __init__(self, framework, device="cpu"):
        if framework not in FRAMEWORKS:
            raise ValueError(f"framework must be one of {', '.join(FRAMEWORKS)}, not {framework!r}")
        if framework != "numpy" and not available(framework):
            raise ValueError(f"framework {framework!r} is not installed: pip install {framework}")
        if framework == "numpy" and device != "cpu":
            raise ValueError("NumPy arrays live on the CPU: device must be 'cpu' for a NumPy function")
        self.framework = framework
        self.device = device
        if framework == "torch":
            import torch
            self.torch = torch
        elif framework == "jax":
            import jax
            import jax.numpy as jnp
            self.jax, self.jnp = jax, jnp
            self.jax_device = None if device == "cpu" else jax.devices(device.split(":")[0].replace("cuda", "gpu"))[
                int(device.split(":")[1]) if ":" in device else 0]

    # ---- storage form → framework ----
    def to_framework(self, a):
        """`a` (storage form, any strides; None passes through) as the framework's array on the device."""
        if a is None:
            return None
        bf16 = a.dtype == np.uint16
        if self.framework == "numpy":
            if not bf16:
                return a
            ml = _ml_dtypes()
            return a.view(ml.bfloat16) if ml is not None else bf16_bits_to_f32(a)
        if self.framework == "torch":
            t = self.torch.from_dlpack(a)  # a view: strides and all
            if bf16:
                t = t.view(self.torch.bfloat16)
            return t if self.device == "cpu" else t.to(self.device)
        # JAX copies into its own buffers (row-major).
        x = self.jnp.asarray(a.view(_ml_dtypes().bfloat16) if bf16 else a)
        return x if self.jax_device is None else self.jax.device_put(x, self.jax_device)

    # ---- framework → storage form ----
    def to_storage(self, x, like, name):
        """What the function returned for output `name`, as a contiguous array in the storage form of `like` (the
        gate's output tensor: its dtype and shape). Raises ValueError for a wrong shape or a non-array."""
        if self.framework == "torch" or _is_torch(x):
            import torch
            x = x.detach().to("cpu")
            if like.dtype == np.uint16:
                x = x.to(torch.bfloat16).contiguous().view(torch.int16).numpy().view(np.uint16)
            else:
                x = x.to(torch.float32 if like.dtype == np.float32 else torch.float16).contiguous().numpy()
        else:
            x = np.asarray(x)
            if like.dtype == np.uint16:
                ml = _ml_dtypes()
                if ml is not None and x.dtype == ml.bfloat16:
                    x = x.view(np.uint16)
                elif x.dtype != np.uint16:
                    x = f32_to_bf16_bits(x.astype(np.float32))
            elif x.dtype.kind not in "fiu" and not _is_bfloat16(x):
                raise ValueError(f"returned {name} of dtype {x.dtype}, not a floating-point array")
            else:
                x = x.astype(like.dtype)
        if tuple(x.shape) != tuple(like.shape):
            raise ValueError(f"returned {name} of shape {tuple(x.shape)}, expected {tuple(like.shape)}")
        return np.ascontiguousarray(x)

    # ---- autograd ----
    def autograd(self, fn, q, k, v, dout, scale, causal, features):
        """(dq, dk, dv) of fn's out by the framework's reverse mode: torch.autograd, jax.vjp."""
        if self.framework == "torch":
            torch = self.torch
            q, k, v = (t.detach().clone().requires_grad_(True) for t in (q, k, v))
            out = first(fn(q, k, v, scale=scale, causal=causal, **features))
            return torch.autograd.grad(out, (q, k, v), dout)
        if self.framework == "jax":
            out, vjp = self.jax.vjp(
                lambda q_, k_, v_: first(fn(q_, k_, v_, scale=scale, causal=causal, **features)), q, k, v)
            return vjp(dout.astype(out.dtype))
        raise ValueError("backward='autograd' needs a framework with autograd (torch or jax), not NumPy: "
                         "pass a backward function instead")


def first(result):
    """out of `out` or `(out, lse)`."""
    return result[0] if isinstance(result, (tuple, list)) else result


def _is_torch(x):
    return type(x).__module__.startswith("torch")


def _is_bfloat16(x):
    ml = _ml_dtypes()
    return ml is not None and x.dtype == ml.bfloat16


def framework_of(x):
    """The framework an array belongs to: 'torch', 'jax', 'numpy', or None."""
    mod = type(x).__module__
    if mod.startswith("torch"):
        return "torch"
    if mod.startswith("jax") or mod.startswith("jaxlib"):
        return "jax"
    if isinstance(x, np.ndarray):
        return "numpy"
    return None
