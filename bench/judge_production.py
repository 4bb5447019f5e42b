#!/usr/bin/env python3
"""Judging a production shape from torch CPU tensors (issue 57): B=1, Hq=32, Hkv=8, L=8192, D=128, causal — torch
SDPA's forward and backward in bfloat16 as the kernel's outputs, saved as a test would save them and judged by
`attncheck judge` in a process of its own; prints its seconds and peak resident memory beside what a user would run
instead, torch's float64 SDPA forward and backward on the same inputs, and the ratio of the two times.

    python3 bench/judge_production.py [--attncheck build/attncheck] [--L 8192] [--heads 32 8] [--dim 128]
                                      [--dtype bf16] [--no-backward] [--threads N]

Needs torch (CPU) and NumPy. One line per measurement, then one summary line:
  judge L=8192 … seconds=… peak_mib=… torch_f64_seconds=… ratio=…
The fast-reference issue sets the targets (ratio ≤ 2, peak ≤ 2 GiB); until then, L is what this machine can afford.
"""
import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn.functional as F

DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


def storage(t):
    """A torch tensor as numpy.savez stores it for `attncheck judge`: float32, float16, bfloat16 as its bits."""
    t = t.detach().contiguous()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(np.uint16)
    return t.numpy()


def sdpa(q, k, v, backward, dout=None):
    """torch SDPA forward (and backward against dout) with GQA; returns (out, dq, dk, dv) (None without backward)."""
    q, k, v = (x.detach().requires_grad_(backward) for x in (q, k, v))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=q.shape[1] != k.shape[1])
    if not backward:
        return out.detach(), None, None, None
    return (out.detach(), *torch.autograd.grad(out, (q, k, v), dout))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--attncheck", default=os.path.join(here, "..", "build", "attncheck"))
    ap.add_argument("--L", type=int, default=8192)
    ap.add_argument("--heads", type=int, nargs=2, default=(32, 8), metavar=("HQ", "HKV"))
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--dtype", choices=DTYPES, default="bf16")
    ap.add_argument("--no-backward", action="store_true")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    backward = not a.no_backward
    hq, hkv = a.heads
    g = torch.Generator().manual_seed(0)
    q = torch.randn(1, hq, a.L, a.dim, generator=g).to(DTYPES[a.dtype])
    k, v = (torch.randn(1, hkv, a.L, a.dim, generator=g).to(DTYPES[a.dtype]) for _ in range(2))
    dout = torch.randn(1, hq, a.L, a.dim, generator=g).to(DTYPES[a.dtype])
    out, dq, dk, dv = sdpa(q, k, v, backward, dout)

    # What a user would run instead: torch's own float64 SDPA, forward and backward, on the same inputs.
    start = time.perf_counter()
    sdpa(*(x.double() for x in (q, k, v)), backward, dout.double())
    torch_seconds = time.perf_counter() - start

    arrays = dict(q=q, k=k, v=v, out=out)
    if backward:
        arrays.update(dout=dout, dq=dq, dk=dk, dv=dv)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "case.npz")
        np.savez(path, **{n: storage(t) for n, t in arrays.items()})
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        # SDPA aligns is_causal top-left and returns no LSE (examples/python/torch_sdpa.py).
        r = subprocess.run([a.attncheck, "judge", "--inputs", path, "--causal", "--contract", "causal=top-left lse=none",
                            "--quiet"], capture_output=True, text=True)
        seconds = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode not in (0, 1, 3):
        sys.exit(f"attncheck judge failed ({r.returncode}): {r.stderr.strip()}")
    verdict = {0: "pass", 1: "fail", 3: "undecided"}[r.returncode]
    peak_mib = max(after.ru_maxrss, before.ru_maxrss) / 1024  # kB on Linux: the largest child so far, this one
    print(f"judge L={a.L} Hq={hq} Hkv={hkv} D={a.dim} {a.dtype} causal backward={backward} verdict={verdict} "
          f"seconds={seconds:.2f} peak_mib={peak_mib:.0f} torch_f64_seconds={torch_seconds:.2f} "
          f"ratio={seconds / torch_seconds:.2f}")


if __name__ == "__main__":
    main()
