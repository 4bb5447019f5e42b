#!/usr/bin/env python3
"""A correct attention kernel in NumPy that speaks the attncheck exec protocol (spec/EXEC_PROTOCOL.md).

    attncheck check --exec 'python3 examples/exec/numpy_kernel.py' ...

Forward (out and LSE) and backward, float32 / float16 / bfloat16 storage (bfloat16 as '<u2' raw bits),
bottom-right aligned causal mask, GQA/MQA. Arithmetic in float64, rounded once to the storage dtype.
A row that sees no key gets out = 0 and lse = -inf (SPEC.md §2.3).

Planted bugs, for testing checkers (--bug NAME):
  missing_scale    logits are q·k, the scale is ignored
  causal_top_left  causal mask aligned top-left (j <= i) instead of bottom-right
  lse_log2         lse in base 2
  gqa_no_sum       dk, dv of a kv head take only the first query head of its group
Other options: --name NAME (kernel name, default numpy), --forward-only, --f32-only (unsupported otherwise),
--compile-seconds S (stand in for a JIT compiler — XLA, torch.compile, Triton autotuning: the first call of each new
(request, dtype, q/k/v shapes) sleeps S seconds first; bench/time_to_verdict uses it).

The kernel's contract (spec/SPEC.md §3.1) travels as key=value tokens on its hello line; --contract TOKENS declares
them, and the kernel behaves as declared for two of them, the conventions of framework SDPA:
  causal=top-left  the causal mask is aligned top-left (j <= i), as is_causal in PyTorch and JAX
  lse=none         forward writes no lse.npy; backward recomputes the LSE
e.g. --contract "causal=top-left lse=none" is a correct SDPA-style kernel; without the declaration the same
behaviour is a bug (--bug causal_top_left).
"""
import argparse
import os
import sys
import time

try:
    import numpy as np
except ImportError:
    sys.stderr.write("numpy_kernel.py needs NumPy: install it (apt install python3-numpy / pip install numpy) "
                     "or run it with a python3 that has it\n")
    sys.exit(1)

PROTOCOL_VERSION = 1
BUGS = ("missing_scale", "causal_top_left", "lse_log2", "gqa_no_sum")
DESCR = {"float32": "<f4", "float16": "<f2", "bfloat16": "<u2"}


# ---- storage dtypes ----

def bf16_to_f32(bits):
    """bfloat16 bits (uint16) -> float32, exact."""
    return (bits.astype(np.uint32) << 16).view(np.float32)


def f64_to_bf16(x):
    """float64 -> bfloat16 bits, rounded once to nearest even (8-bit significand, subnormals down to 2^-133);
    overflow gives ±inf, NaN stays a quiet NaN."""
    x = np.asarray(x, dtype=np.float64)
    finite = np.isfinite(x)
    _, e = np.frexp(np.where(finite, x, 1.0))                 # x = m·2^e, 0.5 <= |m| < 1
    quantum = np.maximum(e - 8, -133)                          # value = integer · 2^quantum
    y = np.where(finite, np.ldexp(np.rint(np.ldexp(x, -quantum)), quantum), x)  # rint: half to even
    with np.errstate(over="ignore"):
        u = y.astype(np.float32).view(np.uint32)               # exact: y is a bfloat16 value (or ±inf, NaN)
    u = np.where(np.isnan(y), u | np.uint32(0x00400000), u)   # quiet NaN survives the truncation
    return (u >> 16).astype(np.uint16)


def load(path, dtype):
    """A .npy input widened exactly to float64."""
    a = np.load(path)
    if a.dtype.str != DESCR[dtype]:
        raise ValueError(f"{os.path.basename(path)} has descr {a.dtype.str}, expected {DESCR[dtype]}")
    return (bf16_to_f32(a) if dtype == "bfloat16" else a).astype(np.float64)


def save(path, x, dtype):
    """float64 rounded once to the storage dtype."""
    if dtype == "bfloat16":
        a = f64_to_bf16(x)
    else:
        a = x.astype(np.float32 if dtype == "float32" else np.float16)
    np.save(path, np.ascontiguousarray(a))


# ---- attention (SPEC.md §2), float64 ----

CONTRACT = set()  # the declared contract tokens (--contract)


def visible(Lq, Lk, causal, bug):
    """[Lq, Lk] boolean: query i sees key j."""
    if not causal:
        return np.ones((Lq, Lk), dtype=bool)
    i = np.arange(Lq)[:, None]
    j = np.arange(Lk)[None, :]
    top_left = bug == "causal_top_left" or "causal=top-left" in CONTRACT
    return j <= i if top_left else j <= i + Lk - Lq


def probabilities(q, k, scale, causal, bug):
    """P [B,Hq,Lq,Lk], LSE [B,Hq,Lq], and k expanded to the query heads."""
    G = q.shape[1] // k.shape[1]
    kx = np.repeat(k, G, axis=1)
    s = np.einsum("bhid,bhjd->bhij", q, kx) * (1.0 if bug == "missing_scale" else scale)
    vis = visible(q.shape[2], k.shape[2], causal, bug)
    s = np.where(vis, s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    empty = ~vis.any(axis=-1)[None, None, :, None]  # rows that see no key
    m = np.where(empty, 0.0, m)
    e = np.exp(s - m)
    l = e.sum(axis=-1, keepdims=True)
    p = np.where(empty, 0.0, e / np.where(empty, 1.0, l))
    with np.errstate(divide="ignore"):
        lse = np.where(empty, -np.inf, m + np.log(np.where(empty, 1.0, l)))[..., 0]
    if bug == "lse_log2":
        lse = lse / np.log(2.0)
    return p, lse, G


def forward(d, dtype, scale, causal, bug):
    q, k, v = (load(os.path.join(d, n + ".npy"), dtype) for n in ("q", "k", "v"))
    p, lse, G = probabilities(q, k, scale, causal, bug)
    out = np.einsum("bhij,bhjc->bhic", p, np.repeat(v, G, axis=1))
    save(os.path.join(d, "out.npy"), out, dtype)
    if "lse=none" not in CONTRACT:
        np.save(os.path.join(d, "lse.npy"), lse.astype(np.float32))


def backward(d, dtype, scale, causal, bug):
    q, k, v, dout = (load(os.path.join(d, n + ".npy"), dtype) for n in ("q", "k", "v", "dout"))
    p, _, G = probabilities(q, k, scale, causal, bug)
    B, Hkv, Lk, _ = k.shape
    kx, vx = np.repeat(k, G, axis=1), np.repeat(v, G, axis=1)
    out = np.einsum("bhij,bhjc->bhic", p, vx)        # recomputed in float64 rather than the rounded out.npy
    dp = np.einsum("bhic,bhjc->bhij", dout, vx)
    D = (dout * out).sum(axis=-1, keepdims=True)
    ds = p * (dp - D)
    s = 1.0 if bug == "missing_scale" else scale
    dq = s * np.einsum("bhij,bhjd->bhid", ds, kx)
    dkx = s * np.einsum("bhij,bhid->bhjd", ds, q)
    dvx = np.einsum("bhij,bhic->bhjc", p, dout)

    def per_kv(x):  # [B,Hq,Lk,X] -> [B,Hkv,Lk,X]: sum over the G query heads of each kv head
        x = x.reshape(B, Hkv, G, Lk, x.shape[-1])
        return x[:, :, 0] if bug == "gqa_no_sum" else x.sum(axis=2)

    save(os.path.join(d, "dq.npy"), dq, dtype)
    save(os.path.join(d, "dk.npy"), per_kv(dkx), dtype)
    save(os.path.join(d, "dv.npy"), per_kv(dvx), dtype)


# ---- the protocol ----

def send(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()  # a pipe is block-buffered: an unflushed answer looks like a hang


def compile_once(args, compiled, verb, dtype, d):
    """--compile-seconds: the first call of each (verb, dtype, q/k/v shapes) "compiles"."""
    if args.compile_seconds <= 0:
        return
    key = (verb, dtype) + tuple(np.load(os.path.join(d, n + ".npy"), mmap_mode="r").shape for n in ("q", "k", "v"))
    if key not in compiled:
        time.sleep(args.compile_seconds)
        compiled.add(key)
        sys.stderr.write(f"[jit] compiled {key} ({len(compiled)} compiled)\n")
        sys.stderr.flush()


def serve(args):
    compiled = set()
    caps = "forward" if args.forward_only else "forward backward"
    send(f"attncheck-exec {PROTOCOL_VERSION}")
    send(f"kernel {args.name} {caps}" + "".join(f" {t}" for t in sorted(CONTRACT)))
    send("ready")
    for raw in sys.stdin:
        line = raw.rstrip("\n")
        if line == "quit":
            return
        fields = line.split(" ", 5)  # the directory, the last field, may hold spaces
        if len(fields) != 6 or fields[0] not in ("forward", "backward"):
            send(f"error malformed request: {line[:200]!r}")
            continue
        verb, name, dtype, scale, mask, d = fields
        try:
            scale = float(scale)
        except ValueError:
            send(f"error malformed request: scale {scale!r} is not a number")
            continue
        if name != args.name or dtype not in DESCR or mask not in ("none", "causal") or \
                (verb == "backward" and args.forward_only):
            send(f"error malformed request: {line[:200]!r}")
            continue
        if args.f32_only and dtype != "float32":
            send(f"unsupported {args.name} handles float32 only")
            continue
        try:
            compile_once(args, compiled, verb, dtype, d)
            (forward if verb == "forward" else backward)(d, dtype, scale, mask == "causal", args.bug)
            send("ok")
        except Exception as e:  # a failed call answers 'error', the kernel keeps serving
            send(f"error {type(e).__name__}: {e}".replace("\n", " "))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bug", choices=BUGS, help="plant a bug")
    ap.add_argument("--name", default="numpy", help="kernel name in the hello (default numpy)")
    ap.add_argument("--forward-only", action="store_true", help="announce no backward")
    ap.add_argument("--f32-only", action="store_true", help="answer 'unsupported' for float16 and bfloat16")
    ap.add_argument("--contract", default="", help="contract tokens to declare, e.g. 'causal=top-left lse=none'")
    ap.add_argument("--compile-seconds", type=float, default=0,
                    help="sleep this long on the first call of each new (request, dtype, shapes): a JIT stand-in")
    args = ap.parse_args()
    CONTRACT.update(args.contract.replace(",", " ").split())
    serve(args)


if __name__ == "__main__":
    main()
