"""attncheck.judge: tensors a kernel already returned, held element by element against the exact values.

    out = my_attention(q, k, v, causal=True)                 # torch (CPU or CUDA), JAX or NumPy arrays
    j = attncheck.judge(q, k, v, out, causal=True)
    assert j.passed, j

The same ladder and bounds as check()'s `accuracy` (O, LSE) and `gradient_accuracy` (dQ, dK, dV), under the contract
the kernel declares; no kernel is called. Arrays on a GPU are copied to the host.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import List, Optional, Tuple

import numpy as np

from . import _core
from ._api import contract_text
from ._frameworks import _ml_dtypes, framework_of

_STORAGE = {"float32": "f32", "float16": "f16", "bfloat16": "bf16"}
#: The layouts judge reads: torch's SDPA [B, H, L, D], FlashAttention's [B, L, H, D].
LAYOUTS = ("bhld", "blhd")


@dataclass(frozen=True)
class TensorJudgment:
    """One given tensor against its exact values: `exceeding` of its `elements` are beyond their bound (`undecided`:
    where the error model cannot bound an element); the worst element is `worst_index` with `got`, `exact`, `bound`
    and `ratio` = |got − exact| ÷ bound (> 1: out of bound)."""
    tensor: str
    shape: Tuple[int, ...]
    elements: int
    exceeding: int
    undecided: int
    worst_index: Tuple[int, ...]
    got: float
    exact: float
    bound: float
    ratio: float


class Judgment:
    """What attncheck.judge found. `passed`: no required check failed and none was left undecided (a warning — an
    advisory gradient check under the contract — passes unless strict=True); `verdict` is "pass", "warn", "fail" or
    "undecided"; `tensors` each given tensor's TensorJudgment; `explained_by` the (declaration, meaning) pairs under
    which the tensors would pass; `hints` what a failing O shows of its defect when no declaration explains it ("O is
    the exact attention at scale 1, not 1/√D = 0.125", a shifted causal diagonal, dropped keys, a lost rescale, exp
    overflow), each verified on these outputs; str(j) the whole judgment for people."""

    def __init__(self, verdict, exit_code, text, tensors, explained_by, contract, hints=(), data=None, inputs=None):
        self.verdict = verdict
        self.exit_code = exit_code
        self.text = text
        self.tensors = [TensorJudgment(t[0], tuple(t[1]), t[2], t[3], t[4], tuple(t[5]), *t[6:]) for t in tensors]
        self.explained_by = [tuple(e) for e in explained_by]
        self.contract = contract
        self.hints = list(hints)
        self._data = data       # the core's judgment, for save()
        self._inputs = inputs   # the host arrays it judged ([B, H, L, D], float64), for save()

    def save(self, directory):
        """Writes report.json ("format": "attncheck-judgment", spec/REPORT_SCHEMA.md), summary.md and report.html
        into `directory` (created if needed), with the inputs kept beside them as inputs.npz (q, k, v, the outputs
        and dout in [B, H, L, D], float32: exactly the storage dtype's values) and the command that judges them
        again (`attncheck judge --inputs inputs.npz …`; a judgment with features is judged again in Python). Returns
        the directory. ValueError when it cannot be written."""
        if self._data is None:
            raise ValueError("save: this Judgment was not made by attncheck.judge")
        directory = os.fspath(directory)
        try:
            os.makedirs(directory, exist_ok=True)
            np.savez(os.path.join(directory, "inputs.npz"),
                     **{n: a.astype(np.float32) for n, a in self._inputs.items() if a is not None})
        except OSError as e:
            raise ValueError(f"save: {directory}: {e.strerror or e}") from None
        _core.write_judgment(self._data, directory, "inputs.npz")
        return directory

    @property
    def passed(self):
        return self.exit_code == 0

    def tensor(self, name):
        """The TensorJudgment of "O", "LSE", "dQ", "dK" or "dV"; KeyError when it was not given."""
        for t in self.tensors:
            if t.tensor == name:
                return t
        raise KeyError(f"{name} was not judged (judged: {', '.join(t.tensor for t in self.tensors)})")

    def __str__(self):
        return self.text

    def __repr__(self):
        return f"<attncheck.Judgment {self.verdict}: {', '.join(t.tensor for t in self.tensors)}>"


def _storage_name(dtype, name, allowed):
    label = str(dtype).replace("torch.", "")
    storage = _STORAGE.get(label)
    if storage is None or storage not in allowed:
        kinds = [k for k, v in _STORAGE.items() if v in allowed]
        kinds = ", ".join(kinds[:-1]) + " or " + kinds[-1] if len(kinds) > 1 else kinds[0]
        raise ValueError(f"{name} is {label}; attncheck judges {kinds} tensors (the kernel's storage dtype)")
    return storage


def _host(x, name, rank, layout, allowed=tuple(_STORAGE.values()), dims=None):
    """(storage dtype, float64 C-order values in [B, H, L, D] order) of a NumPy, torch or JAX array; None passes.
    `dims` names the expected dimensions in a wrong rank's message."""
    if x is None:
        return None
    if framework_of(x) == "torch":
        label = x.dtype
    else:
        try:
            x = np.asarray(x)
        except Exception as e:  # an object NumPy cannot read
            raise ValueError(f"{name} is not an array ({type(x).__name__}): {e}") from None
        ml = _ml_dtypes()
        label = "bfloat16" if ml is not None and x.dtype == ml.bfloat16 else str(x.dtype)
    storage = _storage_name(label, name, allowed)
    values = _values(x)
    if values.ndim != rank:
        dims = dims or ("[B, H, L]" if rank == 3 else ("[B, L, H, D]" if layout == "blhd" else "[B, H, L, D]"))
        raise ValueError(f"{name} has shape {tuple(values.shape)}; expected {rank} dimensions {dims}")
    if rank == 4 and layout == "blhd":
        values = values.transpose(0, 2, 1, 3)
    return storage, np.ascontiguousarray(values, dtype=np.float64)


def _offsets(cu, name):
    """cu_seqlens as a list of ints: [0, L_0, L_0 + L_1, …], nondecreasing."""
    cu = _values(cu)
    if cu.ndim != 1 or len(cu) < 2 or cu[0] != 0 or np.any(np.diff(cu) < 0) or np.any(cu != np.round(cu)):
        raise ValueError(f"{name} must be [0, L_0, L_0 + L_1, …]: one more offset than sequences, from 0, "
                         f"nondecreasing integers")
    return [int(x) for x in cu]


def _unpacked(x, name, cu, longest, fill, allowed=tuple(_STORAGE.values())):
    """A varlen batch's packed array — [total, H, X] as FlashAttention's varlen functions take them, or the LSE
    [H, total] — as the logical [B, H, longest, X] ([B, H, longest]), `fill` past each sequence's length (what a
    kernel's outputs hold there in the logical frame: O and gradients 0, LSE −∞)."""
    lse = name == "lse"
    packed = _host(x, name, 2 if lse else 3, "bhld", allowed, dims="[H, total]" if lse else "[total, H, D]")
    if packed is None:
        return None
    storage, values = packed
    total = values.shape[1] if lse else values.shape[0]
    if total != cu[-1]:
        raise ValueError(f"{name} holds {total} {'columns' if lse else 'rows'}; the cu_seqlens it goes with end at "
                         f"{cu[-1]}")
    heads = values.shape[0] if lse else values.shape[1]
    logical = np.full((len(cu) - 1, heads, longest) + (() if lse else (values.shape[2],)), fill, dtype=np.float64)
    for b in range(len(cu) - 1):
        part = values[:, cu[b]:cu[b + 1]] if lse else values[cu[b]:cu[b + 1]].transpose(1, 0, 2)
        logical[b, :, :cu[b + 1] - cu[b]] = part
    return storage, logical


def _cache(x, name, lengths, block_table, layout):
    """A KV cache's k or v as the logical [B, Hkv, max(lengths), D], zero past each sequence's keys: dense [B,
    Lk_cap, Hkv, D] (in `layout`), or paged [num_pages, page_size, Hkv, D] read through `block_table`."""
    longest = max(max(lengths), 1)
    if block_table is None:
        storage, values = _host(x, name, 4, layout)
        if values.shape[2] < max(lengths):
            raise ValueError(f"{name} holds {values.shape[2]} keys per sequence; cache_seqlens asks for {max(lengths)}")
        logical = np.zeros(values.shape[:2] + (longest, values.shape[3]))
        for b, n in enumerate(lengths):
            logical[b, :, :n] = values[b, :, :n]
        return storage, logical
    storage, pages = _host(x, name, 4, "blhd", dims="[num_pages, page_size, Hkv, D]")  # [num_pages, Hkv, page, D]
    table = _values(block_table)
    page = pages.shape[2]
    if table.ndim != 2 or table.shape[0] != len(lengths) or np.any(table != np.round(table)):
        raise ValueError(f"block_table must be [B, max_pages] page numbers, one row per sequence ({len(lengths)})")
    logical = np.zeros((len(lengths), pages.shape[1], longest, pages.shape[3]))
    for b, n in enumerate(lengths):
        used = [int(t) for t in table[b, :-(-n // page)]]
        if len(used) * page < n or any(not 0 <= t < pages.shape[0] for t in used):
            raise ValueError(f"block_table row {b} does not hold the {n} keys of sequence {b} in pages of {page} "
                             f"among the cache's {pages.shape[0]}")
        if used:
            logical[b, :, :n] = np.concatenate([pages[t] for t in used], axis=1)[:, :n]
    return storage, logical


def _values(x):
    """A feature argument's values on the host, float64 (torch tensors from any device)."""
    if framework_of(x) == "torch":
        import torch
        return x.detach().to(device="cpu", dtype=torch.float64).numpy()
    return np.asarray(x, dtype=np.float64)


def _window(window):
    if window is None:
        return None
    try:
        left, right = window
    except (TypeError, ValueError):
        raise ValueError(f"window is (left, right), not {window!r}") from None
    return (-1 if left is None else int(left), -1 if right is None else int(right))


def _vector(x, name):
    if x is None:
        return None
    values = _values(x)
    if values.ndim != 1:
        raise ValueError(f"{name} has shape {tuple(values.shape)}; expected one value per query head [Hq]")
    return values.tolist()


def _mask(attn_mask):
    if attn_mask is None:
        return None
    # Boolean (nonzero visible) as bool, or as uint8 the way the C ABI sends it; any other dtype is added.
    boolean = str(getattr(attn_mask, "dtype", "")).replace("torch.", "") in ("bool", "uint8")
    values = _values(attn_mask)
    if values.ndim != 4:
        raise ValueError(f"attn_mask has shape {tuple(values.shape)}; expected [B or 1, Hq or 1, Lq, Lk]")
    return boolean, np.ascontiguousarray(values)


def judge(q, k, v, out, *, lse=None, dout=None, dq=None, dk=None, dv=None, scale=None, causal=False,
          contract=None, layout="bhld", strict=False, explain=True, window=None, softcap=None, alibi_slopes=None,
          sinks=None, attn_mask=None, cu_seqlens_q=None, cu_seqlens_k=None, cache_seqlens=None, block_table=None,
          progress=True) -> Judgment:
    """Judges `out` (and `lse`; and the gradients `dq`, `dk`, `dv` of `dout`) as a kernel's results on `q`, `k`, `v`.

    Arrays: NumPy, torch (any device: copied to the host) or JAX, float32, float16 or bfloat16 as the kernel stores
    them — q [B, Hq, Lq, D], k [B, Hkv, Lk, D], v [B, Hkv, Lk, Dv], out and dout [B, Hq, Lq, Dv], lse [B, Hq, Lq]
    (float32 or the storage dtype); with layout="blhd" the 4-D ones are [B, L, H, D] (FlashAttention's). `scale`
    defaults to 1/√D; `causal` is the mask the kernel was called with, aligned as `contract` (a dict or text as
    check() takes it, SPEC.md §3.1: {"causal": "top-left"}) declares. `strict`: a warning fails too. `explain`: on
    a failure, judge again under each declaration that could explain it (Judgment.explained_by). Raises ValueError,
    one line, for what does not fit.

    Features the kernel was called with, as check() hands them to a function (SPEC.md §2.7): `window=(left,
    right)` (None or −1: unbounded), `softcap=`, `alibi_slopes=` and `sinks=` ([Hq]), `attn_mask=` ([B or 1, Hq or 1,
    Lq, Lk]: bool or uint8, nonzero visible; or float, added to the logits, −inf hides).

    A varlen batch, as flash_attn_varlen_func takes it: `cu_seqlens_q` and `cu_seqlens_k` ([B + 1] offsets), q, out,
    dout, dq packed [total_q, Hq, D], k, v, dk, dv [total_k, Hkv, D], lse [Hq, total_q]; each sequence is aligned
    causally on its own rows and keys. The judgment's indices are then [b, h, i, d] within sequence b.

    A KV cache, as flash_attn_with_kvcache reads it: `cache_seqlens` ([B]) keys of each sequence in k and v — a dense
    cache [B, Lk_max, Hkv, D] under layout="blhd" (or [B, Hkv, Lk_max, D]), or with `block_table` ([B, max_pages]
    page numbers, as vLLM and FlashInfer keep them) a paged one [num_pages, page_size, Hkv, D]. q's Lq rows align
    causally with the last keys of each sequence.

    `progress`: while judging, a bar of the query rows bounded on stderr when it is a terminal (a model's shapes take
    minutes)."""
    __tracebackhide__ = True
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {', '.join(LAYOUTS)}, not {layout!r}")
    named = (("q", q), ("k", k), ("v", v), ("out", out), ("dout", dout), ("dq", dq), ("dk", dk), ("dv", dv))
    for needed, given in named[:4]:
        if given is None:
            raise ValueError(f"{needed} is None: judge needs q, k, v and the kernel's out")
    seqlens = None
    if (cu_seqlens_q is None) != (cu_seqlens_k is None):
        raise ValueError("give cu_seqlens_q and cu_seqlens_k together (a varlen batch), or neither")
    if cache_seqlens is None and block_table is not None:
        raise ValueError("block_table needs cache_seqlens: the keys of each sequence in its pages")
    if cache_seqlens is not None and cu_seqlens_q is not None:
        raise ValueError("give cu_seqlens_q/k (a packed varlen batch) or cache_seqlens (a KV cache), not both")
    if cache_seqlens is not None:
        if any(g is not None for g in (dq, dk, dv)):
            raise ValueError("gradients of a KV cache are not judged here: give the dense k and v instead")
        arrays = {n: _host(a, n, 4, layout) for n, a in named if n not in ("k", "v")}
        lengths = _values(cache_seqlens)
        if lengths.ndim != 1 or np.any(lengths < 0) or np.any(lengths != np.round(lengths)):
            raise ValueError("cache_seqlens must be [B] key counts: integers ≥ 0, one per sequence")
        lengths = [int(n) for n in lengths]
        batch, rows = arrays["q"][1].shape[0], arrays["q"][1].shape[2]
        if len(lengths) != batch:
            raise ValueError(f"cache_seqlens has {len(lengths)} sequences; q has a batch of {batch}")
        arrays["k"] = _cache(k, "k", lengths, block_table, layout)
        arrays["v"] = _cache(v, "v", lengths, block_table, layout)
        seqlens = ([rows] * batch, lengths)
        arrays["lse"] = _host(lse, "lse", 3, layout, allowed=("f32", arrays["q"][0]))
    elif cu_seqlens_q is None:
        arrays = {n: _host(a, n, 4, layout) for n, a in named}
        arrays["lse"] = _host(lse, "lse", 3, layout, allowed=("f32", arrays["q"][0]))
    else:
        cu_q, cu_k = _offsets(cu_seqlens_q, "cu_seqlens_q"), _offsets(cu_seqlens_k, "cu_seqlens_k")
        if len(cu_q) != len(cu_k):
            raise ValueError(f"cu_seqlens_q has {len(cu_q) - 1} sequences and cu_seqlens_k {len(cu_k) - 1}")
        seqlens = ([b - a for a, b in zip(cu_q, cu_q[1:])], [b - a for a, b in zip(cu_k, cu_k[1:])])
        longest_q, longest_k = max(max(seqlens[0]), 1), max(max(seqlens[1]), 1)
        arrays = {n: _unpacked(a, n, cu_k if n in ("k", "v", "dk", "dv") else cu_q,
                               longest_k if n in ("k", "v", "dk", "dv") else longest_q, 0.0) for n, a in named}
        arrays["lse"] = _unpacked(lse, "lse", cu_q, longest_q, -np.inf, allowed=("f32", arrays["q"][0]))
    if scale is not None:
        scale = float(scale)
    features = (_window(window), None if softcap is None else float(softcap), _vector(alibi_slopes, "alibi_slopes"),
                _vector(sinks, "sinks"), _mask(attn_mask), seqlens)
    result = _core.judge(arrays["q"], arrays["k"], arrays["v"], arrays["out"], arrays["lse"], arrays["dout"],
                         arrays["dq"], arrays["dk"], arrays["dv"], scale, bool(causal), contract_text(contract),
                         bool(strict), bool(explain), features, bool(progress))
    return Judgment(*result, inputs={n: None if a is None else a[1] for n, a in arrays.items()})
