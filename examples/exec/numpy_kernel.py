#!/usr/bin/env python3
"""A correct attention kernel in NumPy that speaks the attncheck exec protocol (spec/EXEC_PROTOCOL.md).

    attncheck check --exec 'python3 examples/exec/numpy_kernel.py' ...

Forward (out and LSE) and backward, float32 / float16 / bfloat16 storage (bfloat16 as '<u2' raw bits),
bottom-right aligned causal mask, GQA/MQA. Arithmetic in float64, rounded once to the storage dtype.
A row that sees no key gets out = 0 and lse = -inf (SPEC.md §2.3).

The features of ABI 1.2 (SPEC.md §2.7; how they travel: spec/EXEC_PROTOCOL.md §4.1), declared in the hello as
features=window+softcap+alibi+sinks+mask+varlen+paged (--features LIST declares others, 'none' none): a sliding
window, logit softcapping, ALiBi, attention sinks, a boolean or additive mask tensor, packed variable-length batches
and (forward only) a paged KV cache. Every layout is turned into dense [B, H, L, D] arrays with per-sequence lengths
first (logical()), the math is one function of those (logits(), probabilities()), and the results go back into the
request's layout (physical()).

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
  causal=top-left  the causal mask is aligned top-left (j <= i), as is_causal in PyTorch and JAX; so are the window
                   and ALiBi (i' = i, SPEC.md §2.7)
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


# ---- attention (SPEC.md §2, features §2.7), float64 ----

CONTRACT = set()  # the declared contract tokens (--contract)
FEATURES = ("window", "softcap", "alibi", "sinks", "mask", "varlen", "paged")  # what this kernel implements


class Unsupported(Exception):
    """Answered 'unsupported <message>'."""


class Features:
    """A request's features (spec/EXEC_PROTOCOL.md §4.1): its tokens and the arguments' .npy files in <dir>."""

    def __init__(self, d, tokens):
        self.names = set(tokens["features"].split("+")) if "features" in tokens else set()
        unknown = self.names - set(FEATURES)
        if unknown:
            raise Unsupported("feature(s) " + "+".join(sorted(unknown)) + " not implemented")
        arg = lambda name: np.load(os.path.join(d, name + ".npy"))
        self.window = tuple(int(x) for x in tokens["window"].split(",")) if "window" in self.names else (-1, -1)
        self.softcap = float(tokens["softcap"]) if "softcap" in self.names else 0.0
        self.alibi = arg("alibi_slopes").astype(np.float64) if "alibi" in self.names else None
        self.sinks = arg("sinks").astype(np.float64) if "sinks" in self.names else None
        self.mask = arg("attn_mask") if "mask" in self.names else None
        self.cu_q = self.cu_k = None
        if "varlen" in self.names:
            self.cu_q, self.cu_k = arg("cu_seqlens_q").astype(np.int64), arg("cu_seqlens_k").astype(np.int64)
            self.max_q, self.max_k = (int(x) for x in tokens["max_seqlen"].split(","))
        self.block_table = None
        if "paged" in self.names:
            self.block_table, self.seqused_k = arg("block_table").astype(np.int64), arg("seqused_k").astype(np.int64)
            self.page_size = int(tokens["page_size"])


def unpack(x, cu, L):
    """varlen: packed [1, H, total, X] -> [B, H, L, X] (zero past each sequence's length)."""
    B = len(cu) - 1
    y = np.zeros((B, x.shape[1], L) + x.shape[3:])
    for b in range(B):
        y[b, :, :cu[b + 1] - cu[b]] = x[0, :, cu[b]:cu[b + 1]]
    return y


def pack(y, cu):
    """varlen: [B, H, L, X] -> packed [1, H, total, X], sequence b at rows cu[b] ...; the inverse of unpack."""
    return np.concatenate([y[b:b + 1, :, :cu[b + 1] - cu[b]] for b in range(len(cu) - 1)], axis=2)


def unpage(cache, f):
    """paged: pages [num_pages, H, page_size, X] -> [B, H, pages_per_seq·page_size, X]; key j of b is row j % page_size
    of page block_table[b, j // page_size]; keys past seqused_k[b] (and the NaN of unused rows) become 0."""
    pages = cache[f.block_table]                                   # [B, P, H, page_size, X]
    B, P, H, ps, X = pages.shape
    keys = pages.transpose(0, 2, 1, 3, 4).reshape(B, H, P * ps, X)
    used = np.arange(P * ps)[None, None, :, None] < f.seqused_k[:, None, None, None]
    return np.where(used, keys, 0.0)


def logical(q, k, v, f):
    """q, k, v as dense [B, H, L, D] arrays and each sequence's rows and keys, whatever the layout of the request."""
    if f.cu_q is not None:
        return (unpack(q, f.cu_q, f.max_q), unpack(k, f.cu_k, f.max_k), unpack(v, f.cu_k, f.max_k),
                np.diff(f.cu_q), np.diff(f.cu_k))
    if f.block_table is not None:
        return q, unpage(k, f), unpage(v, f), np.full(q.shape[0], q.shape[2]), f.seqused_k
    return q, k, v, np.full(q.shape[0], q.shape[2]), np.full(q.shape[0], k.shape[2])


def physical(x, f, cu):
    """A result of rows (cu = f.cu_q) or keys (f.cu_k) in the request's layout: packed under varlen."""
    return x if f.cu_q is None else pack(x, cu)


def logits(q, k, scale, causal, bug, f, len_q, len_k):
    """Logits s [B,Hq,Lq,Lk] (−inf where not visible), the softcap's derivative ds/d(scale·q·k), and GQA's G."""
    B, Hq, Lq, _ = q.shape
    G = Hq // k.shape[1]
    Lk = k.shape[2]
    s = np.einsum("bhid,bhjd->bhij", q, np.repeat(k, G, axis=1)) * (1.0 if bug == "missing_scale" else scale)
    i = np.arange(Lq)[None, None, :, None]
    j = np.arange(Lk)[None, None, None, :]
    lq, lk = len_q[:, None, None, None], len_k[:, None, None, None]
    top_left = bug == "causal_top_left" or "causal=top-left" in CONTRACT
    aligned = i if top_left else i + lk - lq                     # i': the key row i is aligned to
    vis = (i < lq) & (j < lk)                                    # the sequence's own rows and keys
    if causal:
        vis = vis & (j <= aligned)
    left, right = f.window                                       # window: i' − left <= j <= i' + right
    if left >= 0:
        vis = vis & (j >= aligned - left)
    if right >= 0:
        vis = vis & (j <= aligned + right)
    dcap = np.ones_like(s)
    if f.softcap > 0:                                            # softcap: c·tanh(s / c)
        t = np.tanh(s / f.softcap)
        s, dcap = f.softcap * t, 1 - t * t
    if f.alibi is not None:                                      # ALiBi: − slope_h·|i' − j|
        s = s - f.alibi[None, :, None, None] * np.abs(aligned - j)
    if f.mask is not None:                                       # mask [Bm, Hm, Lq, Lk], size-1 dims broadcast
        pad = ((0, 0), (0, 0), (0, 0), (0, Lk - f.mask.shape[3]))  # paged: the pages may hold more keys than Lk
        if f.mask.dtype == np.uint8:                             # boolean: nonzero = visible
            vis = vis & (np.pad(f.mask, pad) != 0)
        else:                                                    # additive, −inf hides
            m = np.pad(f.mask.astype(np.float64), pad, constant_values=-np.inf)
            s, vis = s + m, vis & (m != -np.inf)
    vis = np.broadcast_to(vis, s.shape)
    return np.where(vis, s, -np.inf), dcap, G


def probabilities(s, f, bug):
    """P [B,Hq,Lq,Lk] and LSE [B,Hq,Lq] of logits s; a sink adds e^sink_h to each row's denominator.
    A row with no visible key (and no sink) has P = 0 and LSE = −inf."""
    m = s.max(axis=-1, keepdims=True, initial=-np.inf)  # Lk = 0: no key, no max
    sink = None if f.sinks is None else f.sinks[None, :, None, None]
    if sink is not None:
        m = np.maximum(m, sink)
    empty = m == -np.inf
    m = np.where(empty, 0.0, m)
    e = np.exp(s - m)
    l = e.sum(axis=-1, keepdims=True) + (0.0 if sink is None else np.exp(sink - m))
    p = np.where(empty, 0.0, e / np.where(empty, 1.0, l))
    with np.errstate(divide="ignore"):
        lse = np.where(empty, -np.inf, m + np.log(np.where(empty, 1.0, l)))[..., 0]
    if bug == "lse_log2":
        lse = lse / np.log(2.0)
    return p, lse


def forward(d, dtype, scale, causal, bug, f):
    q, k, v = (load(os.path.join(d, n + ".npy"), dtype) for n in ("q", "k", "v"))
    q, k, v, len_q, len_k = logical(q, k, v, f)
    s, _, G = logits(q, k, scale, causal, bug, f, len_q, len_k)
    p, lse = probabilities(s, f, bug)
    out = np.einsum("bhij,bhjc->bhic", p, np.repeat(v, G, axis=1))
    save(os.path.join(d, "out.npy"), physical(out, f, f.cu_q), dtype)
    if "lse=none" not in CONTRACT:
        lse = physical(lse[..., None], f, f.cu_q)[..., 0]
        np.save(os.path.join(d, "lse.npy"), lse.astype(np.float32))


def backward(d, dtype, scale, causal, bug, f):
    if f.block_table is not None:
        raise Unsupported("a paged KV cache has no backward")
    q, k, v, dout = (load(os.path.join(d, n + ".npy"), dtype) for n in ("q", "k", "v", "dout"))
    if f.cu_q is not None:
        dout = unpack(dout, f.cu_q, f.max_q)
    q, k, v, len_q, len_k = logical(q, k, v, f)
    s, dcap, G = logits(q, k, scale, causal, bug, f, len_q, len_k)
    p, _ = probabilities(s, f, bug)
    B, Hkv, Lk, _ = k.shape
    kx, vx = np.repeat(k, G, axis=1), np.repeat(v, G, axis=1)
    out = np.einsum("bhij,bhjc->bhic", p, vx)        # recomputed in float64 rather than the rounded out.npy
    dp = np.einsum("bhic,bhjc->bhij", dout, vx)
    D = (dout * out).sum(axis=-1, keepdims=True)     # a sink has no value: it adds nothing to dP
    ds = p * (dp - D) * dcap                         # through the softcap: d(c·tanh(x/c))/dx = 1 − tanh²
    sc = 1.0 if bug == "missing_scale" else scale
    dq = sc * np.einsum("bhij,bhjd->bhid", ds, kx)
    dkx = sc * np.einsum("bhij,bhid->bhjd", ds, q)
    dvx = np.einsum("bhij,bhic->bhjc", p, dout)

    def per_kv(x):  # [B,Hq,Lk,X] -> [B,Hkv,Lk,X]: sum over the G query heads of each kv head
        x = x.reshape(B, Hkv, G, Lk, x.shape[-1])
        return x[:, :, 0] if bug == "gqa_no_sum" else x.sum(axis=2)

    save(os.path.join(d, "dq.npy"), physical(dq, f, f.cu_q), dtype)
    save(os.path.join(d, "dk.npy"), physical(per_kv(dkx), f, f.cu_k), dtype)
    save(os.path.join(d, "dv.npy"), physical(per_kv(dvx), f, f.cu_k), dtype)


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


def parse_request(line):
    """'forward|backward <kernel> <dtype> <scale> <mask> [<key>=<value>]... <dir>': the fields, the feature tokens
    (spec/EXEC_PROTOCOL.md §4.1) and the directory (the rest of the line from the first field that starts with '/')."""
    head, slash, rest = line.partition(" /")
    fields = head.split(" ")
    if not slash or len(fields) < 5 or not all("=" in t for t in fields[5:]):
        raise ValueError(repr(line[:200]))
    return fields[:5], dict(t.split("=", 1) for t in fields[5:]), "/" + rest


def serve(args):
    compiled = set()
    caps = "forward" if args.forward_only else "forward backward"
    tokens = sorted(CONTRACT) + (["features=" + args.features] if args.features != "none" else [])
    send(f"attncheck-exec {PROTOCOL_VERSION}")
    send(f"kernel {args.name} {caps}" + "".join(f" {t}" for t in tokens))
    send("ready")
    for raw in sys.stdin:
        line = raw.rstrip("\n")
        if line == "quit":
            return
        try:
            (verb, name, dtype, scale, mask), settings, d = parse_request(line)
            scale = float(scale)
        except ValueError as e:
            send(f"error malformed request: {e}")
            continue
        if verb not in ("forward", "backward") or name != args.name or dtype not in DESCR or \
                mask not in ("none", "causal") or (verb == "backward" and args.forward_only):
            send(f"error malformed request: {line[:200]!r}")
            continue
        if args.f32_only and dtype != "float32":
            send(f"unsupported {args.name} handles float32 only")
            continue
        try:
            compile_once(args, compiled, verb, dtype, d)
            features = Features(d, settings)
            (forward if verb == "forward" else backward)(d, dtype, scale, mask == "causal", args.bug, features)
            send("ok")
        except Unsupported as e:
            send(f"unsupported {e}")
        except Exception as e:  # a failed call answers 'error', the kernel keeps serving
            send(f"error {type(e).__name__}: {e}".replace("\n", " "))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bug", choices=BUGS, help="plant a bug")
    ap.add_argument("--name", default="numpy", help="kernel name in the hello (default numpy)")
    ap.add_argument("--forward-only", action="store_true", help="announce no backward")
    ap.add_argument("--f32-only", action="store_true", help="answer 'unsupported' for float16 and bfloat16")
    ap.add_argument("--contract", default="", help="contract tokens to declare, e.g. 'causal=top-left lse=none'")
    ap.add_argument("--features", default="+".join(FEATURES),
                    help="the features to declare, joined by '+' (default: all it implements), or 'none'")
    ap.add_argument("--compile-seconds", type=float, default=0,
                    help="sleep this long on the first call of each new (request, dtype, shapes): a JIT stand-in")
    args = ap.parse_args()
    CONTRACT.update(args.contract.replace(",", " ").split())
    serve(args)


if __name__ == "__main__":
    main()
