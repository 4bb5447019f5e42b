"""The result of attncheck.check: the same document as the CLI's report.json, with Python accessors."""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from . import _core

_VERDICT_OF_EXIT = {0: "pass", 1: "fail", 3: "undecided", 4: "error"}
_RECORDED = object()  # replay(contract=…) not given: the report's own contract judges


@dataclass
class Replay:
    """A counterexample run again: its verdict now — "pass", "fail", "warn" (it fails a property the contract makes
    advisory), "undecided", or "off" (the contract leaves the property nothing to check) — the ladder step that
    failed and what it found."""
    verdict: str
    step: str
    detail: str
    strict: bool = False  #: the check was strict: a warning fails

    @property
    def passed(self):
        """The gate's view: a pass, nothing to check, or a warning of a check that was not strict."""
        return self.verdict in ("pass", "off") or (self.verdict == "warn" and not self.strict)


@dataclass
class Counterexample:
    """A minimal failing case of one property: `inputs` holds q, k, v (and dout for a gradient property) exactly as
    the kernel got them (float64 arrays of the storage dtype's values, logical shapes), with `scale` and `causal`."""
    number: int          #: N of `attncheck replay report.json --failure N`, and of Report.replay(N)
    kernel: str
    dtype: str
    property: str
    verdict: str         #: "fail", or "warn" for an advisory property (beyond the declared contract)
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
    #: the content hash of the corpus entry it was replayed from (check(corpus=...)); None when this run's search
    #: found it
    corpus_entry: Optional[str] = None
    #: what the failing check found, as data — report.json's `outcome.finding` (spec/REPORT_SCHEMA.md) with `got`,
    #: `exact` and `bound` as floats: {"kind": "value", "tensor": "O", "name": "O", "index": [0, 0, 3, 1], "got": nan,
    #: "exact": 0.25, "bound": 1e-3}; kind is call, wrote_input, wrote_padding, value, changed or aggregate. None in
    #: older reports
    finding: Optional[dict] = None
    _document: object = field(default=None, repr=False, compare=False)  # the core's Document: describe() renders it

    def describe(self):
        """The counterexample as the core renders it (the gate's text): under its root cause's headline and caption,
        its property, shape, failing step and what it found, the declarations that explain it, and its minimal
        inputs in decimal when small (at most 64 elements a tensor)."""
        return self._document.describe(self.number, inputs=True)

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
    #: corpus cases replayed before the search (check(corpus=...)) and how many of them passed
    corpus_replayed: int = 0
    corpus_passed: int = 0
    #: the declared shapes (check(shapes=...)), in order: how this property ran each
    shapes: list = field(default_factory=list)


@dataclass
class ShapeResult:
    """One declared shape as a property ran it: `verdict` pass, fail, undecided, error, or unsupported (the kernel
    declined its case, or the property does not take the shape: `note` says why)."""
    shape: str    #: its name and dimensions: "llama-3-8b prefill: B=1 Hq=32 … causal"
    verdict: str
    ratio: float  #: the case's worst error ÷ bound
    spec: str     #: the drawn case's spec line ("" when none was drawn)
    note: str


class Report:
    """What attncheck.check found. `passed` is the gate's verdict (exit code 0); `verdict` is "pass", "warn" (a
    pass with warnings), "fail" or "undecided"; `counterexamples` are the shrunk failures and warnings with their
    inputs, `failures` and `warnings` each tier's; `replay(n)` runs one again."""

    def __init__(self, report_json, exit_code=None, check_arguments=None):
        self.json = report_json
        self._document = _core.parse(report_json)  # the core's, read once (validated): renders, replays, inputs
        self.document = json.loads(report_json)
        # check()'s kernel arguments (fn, backward, framework, device, name, contract, isolate): replay's defaults
        self._check_arguments = check_arguments
        if exit_code is None:  # a report read back: the gate's exit code of its document
            exit_code = self._document.exit_code()
        self.exit_code = exit_code
        self.properties = []
        self.counterexamples = []
        failures = {(f["run"], f["property"], f["kernel"], f["dtype"]): f["failure"]
                    for f in self.document.get("failures", [])}
        for r, run in enumerate(self.document["runs"]):
            for p in run["properties"]:
                cx = None
                if "counterexample" in p:
                    cx = _counterexample(self._document, run, p, failures[(r, p["id"], run["kernel"], run["dtype"])])
                    self.counterexamples.append(cx)
                self.properties.append(PropertyResult(
                    run["kernel"], run["dtype"], p["id"], p["verdict"], p.get("tier", "required"), p["cases"],
                    p["unsupported"], p["undecided"], _ratio(p["worst_ratio"]), p.get("note", ""), p["formula"], cx,
                    p.get("corpus", {}).get("replayed", 0), p.get("corpus", {}).get("passed", 0),
                    [ShapeResult(x["shape"], x["verdict"], _ratio(x["ratio"]), x["spec"], x["note"])
                     for x in p.get("shapes", [])]))
        self.counterexamples.sort(key=lambda c: c.number)

    @property
    def content(self):
        """report.json without its timing: what the same seed makes byte-identical, whatever the load."""
        return _core.content(self.json)

    @property
    def timing(self):
        """Where the time went (report.json's `timing`): seconds and kernel_seconds of the check, each run and each
        property. The one part of a report that depends on the machine."""
        return self.document.get("timing", {})

    @property
    def verdict(self):
        verdict = _VERDICT_OF_EXIT.get(self.exit_code, "undecided")
        return "warn" if verdict == "pass" and self.warnings else verdict

    @property
    def passed(self):
        return self.exit_code == 0

    @property
    def strict(self):
        """Whether warnings fail the gate (check(strict=True)); they stay in `warnings` either way."""
        return self.document.get("strict", False)

    @property
    def failures(self):
        """The counterexamples of required properties: each fails the gate."""
        return [c for c in self.counterexamples if c.verdict == "fail"]

    @property
    def warnings(self):
        """The counterexamples of advisory properties (behaviour beyond the contract): they fail the gate only when
        the check was strict."""
        return [c for c in self.counterexamples if c.verdict == "warn"]

    def summary_markdown(self):
        """summary.md, as the CLI writes it."""
        return self._document.markdown()

    def summary(self):
        """A plain-text summary, the core's terminal text (the gate's, with one line per run in place of its table):
        one line per (kernel, dtype) with its verdict and counts; each property that did not pass on its planned
        cases or that the function declined (decided / planned, and why); each kernel's contract, each run's
        coverage and time; the failures and warnings counted apart; then the counterexamples grouped by root cause,
        failures first, each with its minimal inputs when small."""
        return self._document.text(run_lines=True, declined=True, totals=True, inputs=True)

    __str__ = summary

    def __repr__(self):
        return f"<attncheck.Report {self.verdict}: {len(self.failures)} failure(s), {len(self.warnings)} warning(s)>"

    def write(self, report_dir):
        """report.json, summary.md and report.html into report_dir, as `attncheck check --report-dir`."""
        self._document.write(os.fspath(report_dir))

    def write_junit(self, path):
        with open(path, "w", encoding="utf-8") as f:
            f.write(self._document.junit())

    def replay(self, failure=1, fn=None, *, contract=_RECORDED, timeout=10.0, **kwargs):
        """Runs counterexample `failure` (1-based) again and returns a Replay: on the checked function, or on `fn` (a
        fixed version); check()'s backward, framework, device, name and isolate arguments replace the check's.
        `contract` judges the case as check(fn, contract=contract) would — its causal alignment, LSE, precision and
        tiers — instead of under the contract the report records."""
        from . import _api
        arguments = dict(self._check_arguments or {})
        if fn is not None:
            arguments["fn"] = fn
        if "fn" not in arguments:
            raise ValueError("this report was loaded from a file: pass fn, the function to replay it on")
        unknown = sorted(set(kwargs) - set(_api.KERNEL_ARGUMENTS))
        if unknown:
            raise TypeError(f"replay() takes fn, contract, timeout and check()'s {', '.join(_api.KERNEL_ARGUMENTS)}, "
                            f"not {', '.join(unknown)}")
        arguments.update(kwargs)
        judged_under = None
        if contract is not _RECORDED:
            arguments["contract"] = contract
            judged_under = _api.contract_text(contract)
            # Under a contract that turns the property off nothing runs: no function is loaded, no process started.
            off = self._document.replay_off(failure, judged_under)
            if off is not None:
                return Replay("off", "", off, self.strict)
        kernel = _api.make_kernel(**arguments)
        return _api.replay(self._document, failure, kernel, timeout=timeout, contract=judged_under,
                           strict=self.strict)

    @classmethod
    def load(cls, path):
        """A report.json written by the CLI or by Report.write."""
        with open(os.path.join(path, "report.json") if os.path.isdir(path) else path, encoding="utf-8") as f:
            text = f.read()
        return cls(text)  # the core validates it, with the CLI's one-line message


def _ratio(x):
    return float(x)  # a number, or "inf" / "nan"


def _finding(finding):
    if finding is None:
        return None
    return {key: float.fromhex(value) if key in ("got", "exact", "bound") else value for key, value in finding.items()}


def _counterexample(document, run, p, number):
    cx = p["counterexample"]
    spec = cx["inputs"]["spec"]
    tensors, scale, causal = document.inputs(number)  # as the kernel got them, shaped by the core
    inputs = {name: np.array(values, dtype=np.float64).reshape(shape) for name, shape, values in tensors}
    out = cx["outcome"]
    # The outcome of a warning's case is a fail; its property's verdict says which tier it counts in.
    verdict = "warn" if p["verdict"] == "warn" else out["verdict"]
    return Counterexample(number, run["kernel"], run["dtype"], p["id"], verdict, cx.get("step"),
                          out.get("detail", ""), spec, inputs, scale, causal,
                          cx.get("shrink_steps", 0), cx.get("found_after", 0), cx.get("explained_by", []),
                          cx.get("corpus_entry"), _finding(out.get("finding")), document)
