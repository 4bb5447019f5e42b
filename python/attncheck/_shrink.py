"""attncheck.shrink: a failing production input cut down to the smallest slice on which the kernel still fails.

    s = attncheck.shrink(my_attention, q, k, v, causal=True)     # q, k, v on which judge fails
    print(s)                                                      # the slice kept, and its judgment
    s.q, s.k, s.v                                                 # the smallest failing inputs, in your framework

The kernel is called again on slices of the input — batch entries, groups of heads, query rows, key ranges, head
dims — each judged as attncheck.judge judges; a slice is kept when the kernel still fails on it, halving each
dimension in turn until no half fails.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Dict, Tuple

import numpy as np

from ._frameworks import first, framework_of
from ._judge import LAYOUTS, Judgment, judge

#: The dimensions shrink cuts, in the order it tries them: what a counterexample is read by first.
DIMENSIONS = ("batch", "heads", "rows", "keys", "head_dim", "value_dim")


@dataclass
class Shrunk:
    """A failing input cut down: `q`, `k`, `v` (in the caller's framework and layout) are the smallest slice on which
    the kernel still fails, `judgment` its Judgment; `slices` the [start, stop) kept of each dimension of the original
    (heads: kv heads, each with its query heads); `elements` the q, k, v elements before and after; `calls` the
    kernel calls made."""
    q: object
    k: object
    v: object
    judgment: Judgment
    slices: Dict[str, Tuple[int, int]]
    elements: Tuple[int, int]
    calls: int
    scale: float
    causal: bool
    history: list = field(default_factory=list)

    @property
    def fraction(self):
        """Elements kept ÷ elements given."""
        return self.elements[1] / self.elements[0]

    def __str__(self):
        kept = ", ".join(f"{d} {a}:{b}" for d, (a, b) in self.slices.items())
        return (f"attncheck shrink: {self.elements[0]} → {self.elements[1]} input elements "
                f"({self.fraction:.2%}) in {self.calls} calls; kept {kept}\n{self.judgment}")


def _axes(layout):
    """Axis of batch, heads, length, head dim in a 4-D tensor of `layout`."""
    return (0, 1, 2, 3) if layout == "bhld" else (0, 2, 1, 3)


def _contiguous(x):
    """A sliced array as a kernel expects it: its own contiguous buffer."""
    fw = framework_of(x)
    if fw == "torch":
        return x.contiguous()
    if fw == "numpy":
        return np.ascontiguousarray(x)
    return x  # JAX arrays are immutable values already


def _slice(x, axis, lo, hi):
    index = [slice(None)] * 4
    index[axis] = slice(lo, hi)
    return x[tuple(index)]


def _numel(*xs):
    return sum(math.prod(int(d) for d in x.shape) for x in xs)


def shrink(fn, q, k, v, *, scale=None, causal=False, contract=None, layout="bhld", max_calls=500) -> Shrunk:
    """The smallest slice of `q`, `k`, `v` on which `fn(q, k, v, *, scale, causal)` — a function as check() takes it,
    returning out or (out, lse) — still fails attncheck.judge under `contract`. `scale` is fixed when given, else 1/√D
    of each slice. Stops after `max_calls` kernel calls. Raises ValueError when fn passes on the whole input (nothing
    to shrink) or for what judge does not take."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {', '.join(LAYOUTS)}, not {layout!r}")
    ab, ah, al, ad = _axes(layout)
    hq, hkv = int(q.shape[ah]), int(k.shape[ah])
    if hkv < 1 or hq % hkv:
        raise ValueError(f"q has {hq} heads and k {hkv}: Hq must be a multiple of Hkv")
    group = hq // hkv
    full = {"batch": (0, int(q.shape[ab])), "heads": (0, hkv), "rows": (0, int(q.shape[al])),
            "keys": (0, int(k.shape[al])), "head_dim": (0, int(q.shape[ad])), "value_dim": (0, int(v.shape[ad]))}
    calls = 0
    history = []

    def cut(s):
        """q, k, v of the slices `s`."""
        qs = _slice(_slice(q, ab, *s["batch"]), ah, s["heads"][0] * group, s["heads"][1] * group)
        ks = _slice(_slice(k, ab, *s["batch"]), ah, *s["heads"])
        vs = _slice(_slice(v, ab, *s["batch"]), ah, *s["heads"])
        qs = _slice(_slice(qs, al, *s["rows"]), ad, *s["head_dim"])
        ks = _slice(_slice(ks, al, *s["keys"]), ad, *s["head_dim"])
        vs = _slice(_slice(vs, al, *s["keys"]), ad, *s["value_dim"])
        return _contiguous(qs), _contiguous(ks), _contiguous(vs)

    def judge_result(qs, ks, vs, used, result, explain):
        lse = result[1] if isinstance(result, (tuple, list)) and len(result) > 1 else None
        return judge(qs, ks, vs, first(result), lse=lse, scale=used, causal=causal, contract=contract, layout=layout,
                     explain=explain, progress=False)  # one bar per slice would only flicker

    def judged(s):
        """(the judgment of fn on the slices `s`, (the inputs, the scale, fn's result)) — None when fn raises there
        (another failure). Unexplained: a failing judgment's explanation judges again up to 14 times."""
        nonlocal calls
        qs, ks, vs = cut(s)
        used = scale if scale is not None else 1 / math.sqrt(int(qs.shape[ad]))
        calls += 1
        try:
            result = fn(qs, ks, vs, scale=used, causal=causal)
        except Exception as e:  # the kernel's own trouble on this slice (a shape it declines): not this failure
            history.append((dict(s), f"raised {type(e).__name__}"))
            return None, None
        j = judge_result(qs, ks, vs, used, result, explain=False)
        history.append((dict(s), j.verdict))
        return j, (qs, ks, vs, used, result)

    best = dict(full)
    j, inputs = judged(best)
    if j is None or j.verdict != "fail":
        raise ValueError("the kernel " + ("raises" if j is None else f"does not fail ({j.verdict})") +
                         " on the whole input: there is nothing to shrink")
    progress = True
    while progress and calls < max_calls:
        progress = False
        for dim in DIMENSIONS:
            while calls < max_calls:
                lo, hi = best[dim]
                if hi - lo < 2:
                    break
                mid = lo + (hi - lo) // 2
                for half in ((lo, mid), (mid, hi)):
                    trial = dict(best, **{dim: half})
                    tj, tin = judged(trial)
                    if tj is not None and tj.verdict == "fail":
                        best, j, inputs, progress = trial, tj, tin, True
                        break
                else:
                    break  # neither half fails: this dimension is as small as halving makes it
    qs, ks, vs, used, result = inputs
    j = judge_result(qs, ks, vs, used, result, explain=True)  # the smallest slice's judgment, explained
    return Shrunk(qs, ks, vs, j, best, (_numel(q, k, v), _numel(qs, ks, vs)), calls, used, bool(causal), history)
