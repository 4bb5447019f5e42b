#!/usr/bin/env python3
"""PyTorch's scaled_dot_product_attention, gated by attncheck as it is — no shim (spec/EXEC_PROTOCOL.md).

    attncheck check --exec 'python3 examples/exec/torch_sdpa_kernel.py'

torch.nn.functional.scaled_dot_product_attention aligns is_causal top-left, returns no log-sum-exp, and its
backward is autograd's. Instead of adapting those conventions to attncheck's defaults, the kernel declares them in
its hello line (spec/SPEC.md §3.1): `causal=top-left lse=none`. Forward and backward in float32, float16 and
bfloat16 on the CPU (or the device in ATTNCHECK_TORCH_DEVICE, e.g. cuda), GQA through enable_gqa.
"""
import os
import sys

try:
    import numpy as np
    import torch
    import torch.nn.functional as F
except ImportError as e:
    sys.stderr.write(f"torch_sdpa_kernel.py needs PyTorch and NumPy ({e}): pip install torch numpy\n")
    sys.exit(1)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from numpy_kernel import DESCR, PROTOCOL_VERSION, send  # noqa: E402  (the .npy conventions and the line writer)

NAME = "torch_sdpa"
CONTRACT = "causal=top-left lse=none"
DEVICE = os.environ.get("ATTNCHECK_TORCH_DEVICE", "cpu")
TORCH_DTYPE = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def load(d, name, dtype):
    """A .npy tensor as a torch tensor of the storage dtype (bfloat16 from its raw '<u2' bits), bit for bit."""
    a = np.load(os.path.join(d, name + ".npy"))
    if a.dtype.str != DESCR[dtype]:
        raise ValueError(f"{name}.npy has descr {a.dtype.str}, expected {DESCR[dtype]}")
    t = torch.from_numpy(a.astype(np.int16) if dtype == "bfloat16" else a)
    return (t.view(torch.bfloat16) if dtype == "bfloat16" else t).to(DEVICE)


def save(d, name, t, dtype):
    t = t.detach().to("cpu").contiguous()
    a = t.view(torch.int16).numpy().view(np.uint16) if dtype == "bfloat16" else t.numpy()
    np.save(os.path.join(d, name + ".npy"), a)


def sdpa(q, k, v, scale, causal):
    gqa = q.shape[1] != k.shape[1]
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale, enable_gqa=gqa)


def call(verb, d, dtype, scale, causal):
    q, k, v = (load(d, n, dtype) for n in ("q", "k", "v"))
    if verb == "forward":
        with torch.no_grad():
            save(d, "out", sdpa(q, k, v, scale, causal), dtype)
        return
    dout = load(d, "dout", dtype)
    q, k, v = (t.requires_grad_(True) for t in (q, k, v))
    out = sdpa(q, k, v, scale, causal)
    dq, dk, dv = torch.autograd.grad(out, (q, k, v), dout)
    for name, g in (("dq", dq), ("dk", dk), ("dv", dv)):
        save(d, name, g, dtype)


def main():
    send(f"attncheck-exec {PROTOCOL_VERSION}")
    send(f"kernel {NAME} forward backward {CONTRACT}")
    send("ready")
    for raw in sys.stdin:
        line = raw.rstrip("\n")
        if line == "quit":
            return
        fields = line.split(" ", 5)
        if len(fields) != 6 or fields[0] not in ("forward", "backward") or fields[1] != NAME or \
                fields[2] not in TORCH_DTYPE or fields[4] not in ("none", "causal"):
            send(f"error malformed request: {line[:200]!r}")
            continue
        verb, _, dtype, scale, mask, d = fields
        try:
            call(verb, d, dtype, float(scale), mask == "causal")
            send("ok")
        except Exception as e:  # a failed call answers 'error', the kernel keeps serving
            send(f"error {type(e).__name__}: {e}".replace("\n", " "))


if __name__ == "__main__":
    main()
