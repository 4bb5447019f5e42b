#!/usr/bin/env python3
"""Real framework attention functions checked through `attncheck.check`, each with its documented behaviour declared
as a contract: what a kernel author sees when the gate is pointed at jax, onnxruntime or a Triton kernel.

    python bench/frameworks/run.py                    # everything (about 10 minutes on a busy 2-core machine)
    python bench/frameworks/run.py --only jax,ort     # a subset (the ids below)
    python bench/frameworks/run.py --budget-scale 2   # every time budget doubled
    python bench/frameworks/run.py --report-dir DIR   # also report.json, summary.md, report.html per check
    python bench/frameworks/run.py --infer --only sdpa-flash   # the contract the function satisfies (attncheck.infer)

For each check it prints the framework and its version, the call, the contract, the options, the verdict, the wall
time, the distinct shapes the function actually ran to the end (declined and raising calls excluded; attncheck's
framework probe and the shape pool's probes on zeros included), and `report.summary()`. A framework that is not
importable is skipped with a one-line reason. The seed is fixed (1): what a check decides is a function of the seed,
the plan and the function's answers, except where a time budget (a guard, stated per check) cuts it, which the
summary then says.

The checks (ids):
  jax           jax.nn.dot_product_attention under jax.jit (LSE from return_residual=True), declining Dv != D,
                JAX's default shape pool, f32, every property
  jax-nopool    the same with shape_pool=0
  jax-f16-bf16  the same in float16 and bfloat16, accuracy only
  ort           an ONNX graph (MatMul -> Mul scale -> [Add causal mask] -> Softmax -> MatMul) run by onnxruntime's
                CPU execution provider, one session per shape (JIT-style: shape_pool at its default, "auto"), f32
  ort-f16       the same graph in float16 (every node's output float16: accumulate-qk=f16 declared)
  triton        a Triton forward kernel (online softmax tiled over keys, float32 accumulation) under the interpreter
                (TRITON_INTERPRET=1) on CPU torch tensors, f32 and f16, ten forward properties
  triton-bug    the control: the same kernel with its causal mask off by one, which must fail
  sdpa          torch.nn.functional.scaled_dot_product_attention on --sdpa-device (default cuda: a GPU machine;
                skipped where torch sees none) with torch's own backend choice, forward and autograd backward, f32,
                f16 and bf16, every property
  sdpa-math, sdpa-flash, sdpa-efficient, sdpa-cudnn
                the same inside sdpa_kernel([SDPBackend.X]) alone, in the dtypes each documents; the cases a
                backend refuses ("No available kernel") are declined with torch's reasons
  sdpa-unscaled the control: the same call with scale=1.0, float16 accuracy, which must fail
"""
from __future__ import annotations

import argparse
import importlib
import os
import platform
import sys
import time
import traceback

# The Triton interpreter must be chosen before triton is first imported (by torch too).
os.environ.setdefault("TRITON_INTERPRET", "1")

import numpy as np  # noqa: E402

import attncheck  # noqa: E402
from attncheck import _core  # noqa: E402

SEED = 1


class ShapeLog:
    """The distinct shapes (B, Hq, Hkv, Lq, Lk, D, Dv) a function ran to the end on, declined calls excluded."""

    def __init__(self):
        self.shapes = set()
        self.calls = 0

    def ran(self, q, k, v):
        self.calls += 1
        b, hq, lq, d = q.shape
        _, hkv, lk, dv = v.shape
        self.shapes.add((b, hq, hkv, lq, lk, d, dv))

    def line(self):
        return (f"the function ran {self.calls} call(s) on {len(self.shapes)} distinct shape(s) "
                "(B, Hq, Hkv, Lq, Lk, D, Dv)" +
                (": " + ", ".join(str(s) for s in sorted(self.shapes)) if len(self.shapes) <= 8 else ""))


# ---------------------------------------------------------------------------------------------------------------
# jax: jax.nn.dot_product_attention under jax.jit
# ---------------------------------------------------------------------------------------------------------------

def make_jax():
    import jax
    import jax.numpy as jnp

    # Documented: query BTNH, key/value BSKH with the same H ("value: should have the same shape as the key array"),
    # N a multiple of K (GQA), is_causal aligned top-left (jnp.tril of a T x S mask), return_residual=True returns
    # the logsumexp (BTN) in the key's dtype. Nothing is documented for a row that sees no key.
    jitted = jax.jit(lambda q, k, v, scale, is_causal: jax.nn.dot_product_attention(
        q, k, v, scale=scale, is_causal=is_causal, return_residual=True), static_argnames=("is_causal",))
    log = ShapeLog()

    def jax_dot_product_attention(q, k, v, *, scale, causal):
        if v.shape[-1] != q.shape[-1]:
            raise attncheck.Unsupported("jax.nn.dot_product_attention needs value's head dim equal to the key's "
                                        "(Dv = D)")
        out, lse = jitted(q.transpose(0, 2, 1, 3), k.transpose(0, 2, 1, 3), v.transpose(0, 2, 1, 3),
                          jnp.float32(scale), bool(causal))
        out, lse = out.transpose(0, 2, 1, 3), lse.transpose(0, 2, 1)
        out.block_until_ready()
        log.ran(q, k, v)
        return out, lse

    call = ("jax.jit(lambda q, k, v, scale, is_causal: jax.nn.dot_product_attention(q, k, v, scale=scale, "
            "is_causal=is_causal, return_residual=True), static_argnames=('is_causal',)) on BTNH transposes; "
            "raises attncheck.Unsupported when Dv != D")
    return jax_dot_product_attention, log, f"jax {jax.__version__} (jaxlib, {jax.default_backend()})", call


JAX_CONTRACT = {"causal": "top-left", "lse": "storage", "empty-rows": "unspecified"}


# ---------------------------------------------------------------------------------------------------------------
# onnxruntime: an ONNX attention graph per shape, CPU execution provider
# ---------------------------------------------------------------------------------------------------------------

def make_ort():
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    sessions = {}
    log = ShapeLog()
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.log_severity_level = 3

    def build(b, hq, hkv, lq, lk, d, dv, elem, causal):
        """Q [B,Hq,Lq,D] is viewed as [B,Hkv,G*Lq,D] (query head h uses key head h // G), S = Q·Kᵀ · scale,
        causal: + a [G*Lq, Lk] additive mask (0 / -inf, aligned bottom-right: key j visible to row i iff
        j <= i + Lk - Lq), P = Softmax(S, axis=-1), O = P·V back to [B,Hq,Lq,Dv]."""
        g = hq // hkv
        nodes = [
            helper.make_node("Reshape", ["Q", "qshape"], ["Qg"]),
            helper.make_node("Transpose", ["K"], ["Kt"], perm=[0, 1, 3, 2]),
            helper.make_node("MatMul", ["Qg", "Kt"], ["S0"]),
            helper.make_node("Mul", ["S0", "scale"], ["S1"]),
        ]
        inits = [helper.make_tensor("qshape", TensorProto.INT64, [4], [b, hkv, g * lq, d]),
                 helper.make_tensor("oshape", TensorProto.INT64, [4], [b, hq, lq, dv])]
        s = "S1"
        if causal:
            i = np.tile(np.arange(lq), g)[:, None]
            j = np.arange(lk)[None, :]
            mask = np.where(j <= i + lk - lq, 0.0, -np.inf).astype(np.float16 if elem == TensorProto.FLOAT16
                                                                   else np.float32)
            inits.append(numpy_helper.from_array(mask, "mask"))
            nodes.append(helper.make_node("Add", ["S1", "mask"], ["S2"]))
            s = "S2"
        nodes += [helper.make_node("Softmax", [s], ["P"], axis=-1),
                  helper.make_node("MatMul", ["P", "V"], ["Og"]),
                  helper.make_node("Reshape", ["Og", "oshape"], ["O"])]
        graph = helper.make_graph(
            nodes, "attention",
            [helper.make_tensor_value_info("Q", elem, [b, hq, lq, d]),
             helper.make_tensor_value_info("K", elem, [b, hkv, lk, d]),
             helper.make_tensor_value_info("V", elem, [b, hkv, lk, dv]),
             helper.make_tensor_value_info("scale", elem, [])],
            [helper.make_tensor_value_info("O", elem, [b, hq, lq, dv])], initializer=inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = min(model.ir_version, 9)
        return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])

    def ort_attention(q, k, v, *, scale, causal):
        if q.dtype == np.float32:
            elem = TensorProto.FLOAT
        elif q.dtype == np.float16:
            elem = TensorProto.FLOAT16
        else:
            raise attncheck.Unsupported(f"this graph is built for float32 and float16, not {q.dtype}")
        b, hq, lq, d = q.shape
        _, hkv, lk, dv = v.shape
        key = (b, hq, hkv, lq, lk, d, dv, elem, bool(causal))
        sess = sessions.get(key)
        if sess is None:
            sess = sessions[key] = build(*key)
        (out,) = sess.run(None, {"Q": np.ascontiguousarray(q), "K": np.ascontiguousarray(k),
                                 "V": np.ascontiguousarray(v), "scale": np.asarray(scale, dtype=q.dtype)})
        log.ran(q, k, v)
        return out

    call = ("onnxruntime.InferenceSession(graph, providers=['CPUExecutionProvider']).run per (shape, dtype, "
            "causal): Reshape Q to [B,Hkv,G*Lq,D] -> MatMul(Q, Kᵀ) -> Mul(scale) -> [Add bottom-right -inf mask] -> "
            "Softmax(axis=-1) -> MatMul(P, V) -> Reshape [B,Hq,Lq,Dv]; one thread; numpy in, numpy out")
    return ort_attention, log, f"onnxruntime {ort.__version__} (onnx {onnx.__version__})", call


# A -inf-masked row has Softmax of all -inf (NaN); the graph returns no LSE.
ORT_CONTRACT = {"lse": "none", "empty-rows": "unspecified"}


# ---------------------------------------------------------------------------------------------------------------
# Triton: a forward attention kernel under the interpreter
# ---------------------------------------------------------------------------------------------------------------

def make_triton(hide_diagonal=False):
    """hide_diagonal: the planted bug of the control check, a causal mask off by one (row i sees j < i + Lk - Lq)."""
    if os.environ.get("TRITON_INTERPRET") != "1":
        raise RuntimeError("TRITON_INTERPRET is not 1: this check runs the kernel under Triton's interpreter")
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def attention_fwd(Q, K, V, O, LSE, scale, Lq, Lk, D, Dv, group,
                      sqb, sqh, sqm, sqd, skb, skh, skn, skd, svb, svh, svn, svd,
                      sob, soh, som, sod, slb, slh, slm, Hq,
                      CAUSAL: tl.constexpr, SHIFT: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                      BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr):
        pid_m = tl.program_id(0)
        bh = tl.program_id(1)
        b = bh // Hq
        h = bh % Hq
        hk = h // group
        rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        rd = tl.arange(0, BLOCK_D)
        rdv = tl.arange(0, BLOCK_DV)
        q = tl.load(Q + b * sqb + h * sqh + rm[:, None] * sqm + rd[None, :] * sqd,
                    mask=(rm[:, None] < Lq) & (rd[None, :] < D), other=0.0).to(tl.float32)
        m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
        l_i = tl.zeros([BLOCK_M], tl.float32)
        acc = tl.zeros([BLOCK_M, BLOCK_DV], tl.float32)
        for start in range(0, Lk, BLOCK_N):
            rn = start + tl.arange(0, BLOCK_N)
            k = tl.load(K + b * skb + hk * skh + rn[None, :] * skn + rd[:, None] * skd,
                        mask=(rn[None, :] < Lk) & (rd[:, None] < D), other=0.0).to(tl.float32)
            s = tl.dot(q, k, input_precision="ieee") * scale
            visible = (rn[None, :] < Lk) & (rm[:, None] >= 0)
            if CAUSAL:
                visible = visible & (rn[None, :] <= rm[:, None] + (Lk - Lq) - SHIFT)
            s = tl.where(visible, s, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(s, 1))
            m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
            alpha = tl.exp(m_i - m_safe)
            p = tl.exp(s - m_safe[:, None])
            l_i = l_i * alpha + tl.sum(p, 1)
            v = tl.load(V + b * svb + hk * svh + rn[:, None] * svn + rdv[None, :] * svd,
                        mask=(rn[:, None] < Lk) & (rdv[None, :] < Dv), other=0.0).to(tl.float32)
            acc = acc * alpha[:, None] + tl.dot(p, v, input_precision="ieee")
            m_i = m_new
        seen = l_i > 0
        out = acc / tl.where(seen, l_i, 1.0)[:, None]
        lse = tl.where(seen, m_i + tl.log(tl.where(seen, l_i, 1.0)), float("-inf"))
        tl.store(O + b * sob + h * soh + rm[:, None] * som + rdv[None, :] * sod, out.to(O.dtype.element_ty),
                 mask=(rm[:, None] < Lq) & (rdv[None, :] < Dv))
        tl.store(LSE + b * slb + h * slh + rm * slm, lse, mask=rm < Lq)

    block_m, block_n = 16, 16
    log = ShapeLog()

    def triton_attention(q, k, v, *, scale, causal):
        if q.dtype not in (torch.float32, torch.float16):
            raise attncheck.Unsupported(f"this launcher takes float32 and float16, not {q.dtype}")
        b, hq, lq, d = q.shape
        _, hkv, lk, dv = v.shape
        out = torch.empty((b, hq, lq, dv), dtype=q.dtype)
        lse = torch.empty((b, hq, lq), dtype=torch.float32)
        grid = (triton.cdiv(lq, block_m), b * hq)
        attention_fwd[grid](q, k, v, out, lse, float(scale), lq, lk, d, dv, hq // hkv,
                            *q.stride(), *k.stride(), *v.stride(), *out.stride(), *lse.stride(), hq,
                            CAUSAL=bool(causal), SHIFT=int(hide_diagonal), BLOCK_M=block_m, BLOCK_N=block_n,
                            BLOCK_D=max(16, triton.next_power_of_2(d)), BLOCK_DV=max(16, triton.next_power_of_2(dv)))
        log.ran(q, k, v)
        return out, lse

    call = (f"attention_fwd[(cdiv(Lq, {block_m}), B*Hq)](q, k, v, out, lse, scale, ..., strides, CAUSAL, "
            f"BLOCK_M={block_m}, BLOCK_N={block_n}, BLOCK_D=next_pow2(D)): online softmax over key tiles, "
            "tl.dot(input_precision='ieee') in float32, bottom-right causal, O = 0 and LSE = -inf for rows that see "
            "no key; TRITON_INTERPRET=1, CPU torch tensors (any strides)")
    if hide_diagonal:
        call = "the same kernel with a planted bug: the causal mask hides the diagonal (SHIFT=1)"
        triton_attention.__name__ = "triton_attention_hides_diagonal"
    return triton_attention, log, f"triton {triton.__version__} (interpreter), torch {torch.__version__}", call


TRITON_CONTRACT = {}  # FlashAttention-2's defaults: bottom-right causal, float32 LSE, empty rows O = 0, LSE = -inf


# ---------------------------------------------------------------------------------------------------------------
# torch SDPA (on a CUDA device, or --sdpa-device cpu): the default dispatch and each backend alone
# ---------------------------------------------------------------------------------------------------------------

# Each backend's documented limits (torch/nn/attention, sdp_utils): the fused kernels need the head dim contiguous
# (last-dim stride 1), so the launcher hands them q, k, v so (a copy only where the gate's layout has another stride),
# as torch's own dispatcher would fall back to MATH for such a layout instead. Whatever else a backend refuses (its
# dtypes, head dims, zero-length sequences, GQA) torch reports as "No available kernel": that case is declined with
# torch's reasons, counted in the report, and the same case still reaches the backends that take it.
# torch's two refusals: CUDA's dispatcher when the enabled backends cannot run a case, the CPU's when none exists.
SDPA_REFUSALS = ("No available kernel", "No viable backend for scaled_dot_product_attention")


def sdpa_short(backend):
    """"default" for torch's own dispatch, else the backend's first word: math, flash, efficient, cudnn."""
    return "default" if backend is None else backend.split("_")[0].lower()


def make_sdpa(device, backend=None, unscaled=False):
    """backend: an SDPBackend name, or None for torch's own dispatch; unscaled: the control's planted bug (scale 1
    where the gate asks for 1/sqrt(D)), which must fail."""
    import contextlib
    import warnings

    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    if device.startswith("cuda") and not torch.cuda.is_available():
        raise RuntimeError("torch sees no CUDA device")
    where = torch.cuda.get_device_name(device) if device.startswith("cuda") else f"the CPU ({platform.machine()})"
    chosen = None if backend is None else [getattr(SDPBackend, backend)]
    log = ShapeLog()

    def sdpa(q, k, v, *, scale, causal):
        if chosen is not None:
            q, k, v = (t if t.stride(-1) == 1 else t.contiguous() for t in (q, k, v))
        with warnings.catch_warnings(record=True) as caught, \
                (sdpa_kernel(chosen) if chosen else contextlib.nullcontext()):
            warnings.simplefilter("always")
            try:
                out = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=1.0 if unscaled else scale,
                                                     enable_gqa=q.shape[1] != k.shape[1])
            except RuntimeError as e:
                if not any(m in str(e) for m in SDPA_REFUSALS):
                    raise
                why = "; ".join(str(w.message).strip() for w in caught) or str(e)
                raise attncheck.Unsupported(f"SDPBackend.{backend} declines this case: {why}") from None
        log.ran(q, k, v)
        return out

    sdpa.__name__ = "sdpa_" + sdpa_short(backend) + ("_unscaled" if unscaled else "")
    call = ("F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale, enable_gqa=Hq != Hkv) on "
            f"{where} " +
            ("under torch's own backend choice" if backend is None else
             f"inside sdpa_kernel([SDPBackend.{backend}]) (head dim made contiguous; 'No available kernel' -> "
             "attncheck.Unsupported)") + "; backward by torch.autograd")
    if unscaled:
        call = "the control, a planted bug: the same call with scale=1.0 in place of the gate's scale"
    version = (f"torch {torch.__version__} (CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}), "
               f"on {where}")
    return sdpa, log, version, call


# SDPA's is_causal is top-left (a lower-triangular mask) and it returns no LSE (examples/python/torch_sdpa.py).
SDPA_CONTRACT = {"causal": "top-left", "lse": "none"}
SDPA_BUDGET = 30  # seconds per dtype: a guard (a GPU machine is lent for minutes), stated in each check's options


# ---------------------------------------------------------------------------------------------------------------

def checks(budget_scale, sdpa_device="cuda"):
    s = budget_scale
    jax_m, ort_m, triton_m = ("jax",), ("onnxruntime", "onnx"), ("triton", "torch")
    triton_properties = ["accuracy", "lse", "causal", "empty_rows", "sum_to_one", "nonfinite_output",
                         "shift_invariance", "padding_isolation", "slice_independence", "input_integrity"]
    return [
        # The case of issue 26: a JIT function that declines Dv != D under JAX's default shape pool.
        dict(id="jax", make=make_jax, modules=jax_m, contract=JAX_CONTRACT,
             options=dict(dtypes=["f32"], profile="quick", time_budget=120 * s)),
        dict(id="jax-nopool", make=make_jax, modules=jax_m, contract=JAX_CONTRACT,
             options=dict(dtypes=["f32"], profile="quick", time_budget=180 * s, shape_pool=0)),
        # float16/bfloat16 under jax.jit on CPU: accuracy only (one root cause would repeat in every property).
        dict(id="jax-f16-bf16", make=make_jax, modules=jax_m, contract=JAX_CONTRACT,
             options=dict(dtypes=["f16", "bf16"], profile="quick", time_budget=60 * s, properties=["accuracy"])),
        dict(id="ort", make=make_ort, modules=ort_m, contract=ORT_CONTRACT,
             options=dict(dtypes=["f32"], profile="quick", time_budget=60 * s, framework="numpy")),
        # An all-float16 ONNX graph: every node's output is float16, the logits Q·Kᵀ included.
        dict(id="ort-f16", make=make_ort, modules=ort_m, contract=dict(ORT_CONTRACT, **{"accumulate-qk": "f16"}),
             options=dict(dtypes=["f16"], profile="quick", time_budget=60 * s, framework="numpy")),
        dict(id="triton", make=make_triton, modules=triton_m, contract=TRITON_CONTRACT,
             options=dict(dtypes=["f32", "f16"], profile="quick", time_budget=180 * s, framework="torch",
                          properties=triton_properties)),
        # The control: the same kernel with a planted causal bug must fail (a pass above is not a vacuous one).
        dict(id="triton-bug", make=lambda: make_triton(hide_diagonal=True), modules=triton_m,
             contract=TRITON_CONTRACT,
             options=dict(dtypes=["f32"], profile="quick", time_budget=120 * s, framework="torch",
                          properties=["accuracy", "causal"])),
    ] + sdpa_checks(s, sdpa_device)


def sdpa_checks(s, device):
    """torch SDPA on `device` (cuda: a GPU machine): the default dispatch, each backend alone in the dtypes it
    documents, and the unscaled control; forward and autograd backward, every property, the quick profile."""
    opts = dict(profile="quick", framework="torch", device=device, backward="autograd")
    dtypes = {None: ["f32", "f16", "bf16"], "MATH": ["f32", "f16", "bf16"], "FLASH_ATTENTION": ["f16", "bf16"],
              "EFFICIENT_ATTENTION": ["f32", "f16", "bf16"], "CUDNN_ATTENTION": ["f16", "bf16"]}
    out = [dict(id="sdpa" + ("" if b is None else "-" + sdpa_short(b)),
                make=lambda b=b: make_sdpa(device, b), modules=("torch",), contract=SDPA_CONTRACT,
                options=dict(opts, dtypes=d, time_budget=SDPA_BUDGET * s)) for b, d in dtypes.items()]
    out.append(dict(id="sdpa-unscaled", make=lambda: make_sdpa(device, unscaled=True), modules=("torch",),
                    contract=SDPA_CONTRACT,
                    options=dict(opts, dtypes=["f16"], time_budget=SDPA_BUDGET * s, properties=["accuracy"])))
    return out


def missing(modules):
    for m in modules:
        try:
            importlib.import_module(m)
        except Exception as e:  # noqa: BLE001 — any import failure skips the framework
            return f"{m} is not importable ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})"
    return None


def infer(fn, options, log, t0):
    """attncheck.infer on the check's function and options, from no declaration; prints what it found and returns
    its outcome."""
    try:
        found = attncheck.infer(fn, seed=SEED, quiet=True, **options)
    except Exception:  # noqa: BLE001 — a broken search is reported, the others still run
        print(f"infer raised after {time.monotonic() - t0:.1f} s:\n{traceback.format_exc()}")
        return "raised"
    print(f"inferred:  {found.outcome} (exit {found.exit_code}): {found.contract or '(the defaults)'}")
    print(f"wall time: {time.monotonic() - t0:.1f} s")
    print(f"shapes:    {log.line()}")
    print("--- attncheck.infer ---")
    print(found)
    sys.stdout.flush()
    return found.outcome


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default="",
                    help="comma-separated check ids (jax, jax-nopool, jax-f16-bf16, ort, ort-f16, triton, triton-bug, "
                         "sdpa, sdpa-math, -flash, -efficient, -cudnn, -unscaled); a trailing * takes every id it "
                         "begins (sdpa*)")
    ap.add_argument("--profile", default=None, choices=("quick", "default", "thorough"),
                    help="every check's profile (default: each check's own, quick)")
    ap.add_argument("--infer", action="store_true",
                    help="attncheck.infer in place of check: the contract each function satisfies, found from no "
                         "declaration (each check's own contract is not given)")
    ap.add_argument("--sdpa-device", default="cuda", help="the torch device of the sdpa checks (default cuda)")
    ap.add_argument("--budget-scale", type=float, default=1.0, help="multiplies every time budget")
    ap.add_argument("--report-dir", default=None,
                    help="writes each check's report.json, summary.md and report.html to DIR/<check id>")
    args = ap.parse_args(argv)
    todo = checks(args.budget_scale, args.sdpa_device)
    if args.only:
        wanted = args.only.split(",")

        def picks(w, i):
            return i.startswith(w[:-1]) if w.endswith("*") else i == w
        unknown = [w for w in wanted if not any(picks(w, c["id"]) for c in todo)]
        if unknown:
            ap.error(f"unknown check(s): {', '.join(unknown)}")
        todo = [c for c in todo if any(picks(w, c["id"]) for w in wanted)]
    known = {p[0] for p in attncheck.properties()}
    print(f"attncheck {attncheck.__version__}, Python {platform.python_version()}, numpy {np.__version__}, "
          f"{platform.machine()} {os.cpu_count()} CPU(s), seed {SEED}, "
          f"started {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}")
    verdicts = []
    t_all = time.monotonic()
    for c in todo:
        print("\n" + "=" * 100)
        print(f"[{c['id']}]")
        why = missing(c["modules"])
        if why:
            print(f"skipped: {why}")
            verdicts.append((c["id"], "skipped", 0.0))
            continue
        try:
            fn, log, version, call = c["make"]()
        except Exception as e:  # noqa: BLE001
            print(f"skipped: could not set it up ({type(e).__name__}: {e})")
            verdicts.append((c["id"], "skipped", 0.0))
            continue
        options = dict(c["options"])
        if args.profile:
            options["profile"] = args.profile
        if "properties" in options:
            options["properties"] = [p for p in options["properties"] if p in known]
        print(f"framework: {version}")
        print(f"call:      {call}")
        print("contract:  " + ("(infer: from no declaration)" if args.infer else
                               attncheck._api.contract_text(c['contract']) or "(none: the defaults)"))
        pool = options.get("shape_pool")
        print("options:   " + ", ".join(f"{k}={v}" for k, v in options.items()) + f", seed={SEED}" +
              ("" if pool is not None else f", shape_pool=default "
               f"({_core.AUTO_SHAPE_POOL if 'jax' in c['modules'] else 'auto'})"))
        sys.stdout.flush()
        t0 = time.monotonic()
        if args.infer:
            verdicts.append((c["id"], infer(fn, options, log, t0), time.monotonic() - t0))
            continue
        try:
            report_dir = os.path.join(args.report_dir, c["id"]) if args.report_dir else None
            report = attncheck.check(fn, contract=c["contract"], seed=SEED, quiet=True, report_dir=report_dir,
                                     **options)
        except Exception:  # noqa: BLE001 — a broken check is reported, the others still run
            wall = time.monotonic() - t0
            print(f"check raised after {wall:.1f} s:\n{traceback.format_exc()}")
            verdicts.append((c["id"], "raised", wall))
            continue
        wall = time.monotonic() - t0
        print(f"verdict:   {report.verdict} (passed={report.passed}, exit {report.exit_code}) {report!r}")
        print(f"wall time: {wall:.1f} s")
        print(f"shapes:    {log.line()}")
        print("--- report.summary() ---")
        print(report.summary())
        sys.stdout.flush()
        verdicts.append((c["id"], report.verdict, wall))
    print("\n" + "=" * 100)
    print(f"total {time.monotonic() - t_all:.1f} s: " +
          ", ".join(f"{i} {v} ({w:.1f} s)" for i, v, w in verdicts))


if __name__ == "__main__":
    main()
