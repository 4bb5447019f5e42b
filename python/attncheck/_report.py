"""The result of attncheck.check: the same document as the CLI's report.json, with Python accessors."""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from . import _core

_VERDICT_OF_EXIT = {0: "pass", 1: "fail", 3: "undecided"}


def _hex_array(values, shape):
    return np.array([float.fromhex(x) if x.startswith(("0x", "-0x")) else float(x) for x in values],
                    dtype=np.float64).reshape(shape)


@dataclass
class Replay:
    """A counterexample run again: its verdict now, the ladder step that failed and what it found."""
    verdict: str
    step: str
    detail: str

    @property
    def passed(self):
        return self.verdict == "pass"


@dataclass
class Counterexample:
    """A minimal failing case of one property: `inputs` holds q, k, v (and dout for a gradient property) exactly as
    the kernel got them (float64 arrays of the storage dtype's values, logical shapes), with `scale` and `causal`."""
    number: int          #: N of `attncheck replay report.json --failure N`, and of Report.replay(N)
    kernel: str
    dtype: str
    property: str
    verdict: str         #: "fail", or "warn" for a property beyond the declared contract
    step: Optional[str]  #: the ladder step that failed: shape, finite, mask, sums or values
    detail: str          #: what and where (for an exception of the function: its traceback)
    spec: dict           #: shape, mask, layout, value family (report.json's Spec)
    inputs: dict = field(repr=False)
    scale: float = 0.0
    causal: bool = False
    shrink_steps: int = 0
    found_after: int = 0
    #: declarations under which the case passes ([{"declaration": "tanh=approx", "meaning": ...}]): a practice the
    #: function may follow, to declare in `contract=` if it does
    explained_by: list = field(default_factory=list)

    def describe(self):
        s = self.spec
        shape = f"B={s['B']} Hq={s['Hq']} Hkv={s['Hkv']} Lq={s['Lq']} Lk={s['Lk']} D={s['D']} Dv={s['Dv']}"
        lines = [f"counterexample {self.number}: {self.kernel} {self.dtype} {self.property} "
                 f"({'warning' if self.verdict == 'warn' else 'failure'} at step {self.step})",
                 f"  case: {shape} mask={s['mask']} layout={s['layout']} family={s['family']} "
                 f"(found after {self.found_after} cases, {self.shrink_steps} shrinks)",
                 "  " + self.detail.replace("\n", "\n  ")]
        lines += [f"  explained by the declaration {e['declaration']}: if {e['meaning']}, declare it"
                  for e in self.explained_by]
        for name in ("q", "k", "v", "dout"):
            if name in self.inputs and self.inputs[name].size <= 64:
                body = np.array2string(self.inputs[name], precision=6, separator=", ", threshold=64)
                lines.append(f"  {name} = " + body.replace("\n", "\n" + " " * (len(name) + 5)))
        return "\n".join(lines)

    __str__ = describe


@dataclass
class PropertyResult:
    kernel: str
    dtype: str
    id: str
    verdict: str  #: pass, fail, warn, undecided or unsupported
    tier: str     #: required, advisory or off (how the contract makes it count)
    cases: int
    declined: int
    undecided: int
    worst_ratio: float
    note: str
    formula: str
    counterexample: Optional[Counterexample] = None


class Report:
    """What attncheck.check found. `passed` is the gate's verdict (exit code 0); `verdict` is "pass", "fail" or
    "undecided"; `counterexamples` are the shrunk failures with their inputs; `replay(n)` runs one again."""

    def __init__(self, report_json, exit_code=None, kernel_factory=None):
        self.json = report_json
        self.document = json.loads(report_json)
        self._kernel_factory = kernel_factory  # how to reach the checked function again (replay)
        if exit_code is None:
            exit_code = _exit_code_of(self.document)
        self.exit_code = exit_code
        self.properties = []
        self.counterexamples = []
        failures = {(f["run"], f["property"], f["kernel"], f["dtype"]): f["failure"]
                    for f in self.document.get("failures", [])}
        for r, run in enumerate(self.document["runs"]):
            for p in run["properties"]:
                cx = None
                if "counterexample" in p:
                    cx = _counterexample(run, p, failures[(r, p["id"], run["kernel"], run["dtype"])])
                    self.counterexamples.append(cx)
                self.properties.append(PropertyResult(
                    run["kernel"], run["dtype"], p["id"], p["verdict"], p.get("tier", "required"), p["cases"],
                    p["unsupported"], p["undecided"], _ratio(p["worst_ratio"]), p.get("note", ""), p["formula"], cx))
        self.counterexamples.sort(key=lambda c: c.number)

    @property
    def verdict(self):
        return _VERDICT_OF_EXIT.get(self.exit_code, "undecided")

    @property
    def passed(self):
        return self.exit_code == 0

    @property
    def failures(self):
        """The counterexamples that fail the gate (warnings left out, unless the check was strict)."""
        strict = self.document.get("strict", False)
        return [c for c in self.counterexamples if c.verdict == "fail" or strict]

    @property
    def warnings(self):
        return [c for c in self.counterexamples if c.verdict == "warn"]

    def summary_markdown(self):
        """summary.md, as the CLI writes it."""
        return _core.markdown(self.json)

    def summary(self):
        """A plain-text summary: one line per (kernel, dtype), then each counterexample with its minimal inputs."""
        lines = []
        for run in self.document["runs"]:
            counts = {}
            for p in run["properties"]:
                counts[p["verdict"]] = counts.get(p["verdict"], 0) + 1
            lines.append(f"{run['kernel']} {run['dtype']}: {run['verdict']} — " +
                         ", ".join(f"{n} {v}" for v, n in sorted(counts.items())))
        for c in self.counterexamples:
            lines.append("")
            lines.append(c.describe())
        return "\n".join(lines)

    __str__ = summary

    def __repr__(self):
        return f"<attncheck.Report {self.verdict}: {len(self.failures)} failure(s), {len(self.warnings)} warning(s)>"

    def write(self, report_dir):
        """report.json, summary.md and report.html into report_dir, as `attncheck check --report-dir`."""
        _core.write_reports(self.json, os.fspath(report_dir))

    def write_junit(self, path):
        with open(path, "w", encoding="utf-8") as f:
            f.write(_core.junit(self.json))

    def replay(self, failure=1, fn=None, **kwargs):
        """Runs counterexample `failure` (1-based) again on the checked function — or on `fn` (a fixed version,
        with check()'s backward, framework, device arguments) — and returns a Replay."""
        from . import _api
        if fn is not None:
            kernel = _api.make_kernel(fn, **kwargs)
        elif self._kernel_factory is not None:
            kernel = self._kernel_factory()
        else:
            raise ValueError("this report was loaded from a file: pass fn, the function to replay it on")
        return _api.replay(self.json, failure, kernel)

    @classmethod
    def load(cls, path):
        """A report.json written by the CLI or by Report.write."""
        with open(os.path.join(path, "report.json") if os.path.isdir(path) else path, encoding="utf-8") as f:
            text = f.read()
        _core.failures(text)  # validates, with the CLI's one-line message
        return cls(text)


def _ratio(x):
    return float(x)  # a number, or "inf" / "nan"


def _exit_code_of(doc):
    v = doc.get("verdict")
    return {"pass": 0, "warn": 0, "fail": 1}.get(v, 3)


def _counterexample(run, p, number):
    cx = p["counterexample"]
    case = cx["inputs"]
    spec = case["spec"]
    shapes = {"q": (spec["B"], spec["Hq"], spec["Lq"], spec["D"]), "k": (spec["B"], spec["Hkv"], spec["Lk"], spec["D"]),
              "v": (spec["B"], spec["Hkv"], spec["Lk"], spec["Dv"]),
              "dout": (spec["B"], spec["Hq"], spec["Lq"], spec["Dv"])}
    inputs = {n: _hex_array(case[n], shapes[n]) for n in ("q", "k", "v", "dout") if case.get(n)}
    out = cx["outcome"]
    scale = case.get("scale", "0x0p+0")
    return Counterexample(number, run["kernel"], run["dtype"], p["id"], out["verdict"], cx.get("step"),
                          out.get("detail", ""), spec, inputs, float.fromhex(scale), spec["mask"] != "none",
                          cx.get("shrink_steps", 0), cx.get("found_after", 0), cx.get("explained_by", []))
