"""PyTorch's scaled_dot_product_attention checked as it is, forward and autograd backward, on the CPU — and on a
CUDA device when there is one (inputs go there, results come back; the reference stays on the host).

    python examples/python/torch_sdpa.py

SDPA aligns is_causal top-left and returns no log-sum-exp: its contract says so (spec/SPEC.md §3.1).
"""
import torch
import torch.nn.functional as F

import attncheck


def sdpa(q, k, v, *, scale, causal):
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale, enable_gqa=q.shape[1] != k.shape[1])


CONTRACT = {"causal": "top-left", "lse": "none"}

if __name__ == "__main__":
    device = "cuda" if torch.cuda.is_available() else "cpu"
    report = attncheck.check(sdpa, backward="autograd", contract=CONTRACT, device=device, profile="quick")
    print(f"torch SDPA on {device}: {report.verdict}")
    print(report.summary())
    raise SystemExit(0 if report.passed else 1)
