"""attncheck.check and the kernels behind it: in process (the function called through attncheck._core), or
isolated (a fresh Python process speaking the exec protocol, attncheck._serve, run by the C++ ExecKernel — a crash
or hang there is a failing call, not the end of the caller's process)."""
from __future__ import annotations

import json
import os
import pickle
import shlex
import sys
import tempfile
from dataclasses import dataclass
from typing import Optional

from . import _core
from ._kernel import Kernel
from ._report import Replay, Report

DTYPES = ("f32", "f16", "bf16")


def resolve_contract(contract):
    """A contract dict ({"causal": "top-left", "lse": "none"}) or text ("causal=top-left,lse=none") as the core
    resolves it (spec/SPEC.md §3.1): (its canonical text — the keys that differ from the defaults, space-separated —,
    the LSE output "f32", "storage" or "none", the features it declares). Raises ValueError for a contract the core
    does not accept. Python builds the text; only the core reads it."""
    if contract is None:
        contract = ""
    if isinstance(contract, dict):
        tokens = []
        for key, value in contract.items():
            if isinstance(value, (list, tuple, set)):
                value = "+".join(str(v) for v in value)
            elif isinstance(value, bool):
                value = "true" if value else "false"
            tokens.append(f"{key}={value}")
        contract = " ".join(tokens)
    elif not isinstance(contract, str):
        raise TypeError("contract must be a dict such as {'causal': 'top-left', 'lse': 'none'}")
    return _core.resolve_contract(contract)


def contract_text(contract):
    """The canonical text of a contract dict or text (resolve_contract)."""
    return resolve_contract(contract)[0]


#: The ABI 1.2 features a Python function may declare: they reach it as keyword arguments (window=(left, right),
#: softcap=, alibi_slopes=, sinks=, attn_mask=). varlen, paged, dropout and fp8 change the tensors themselves.
PYTHON_FEATURES = ("window", "softcap", "alibi", "sinks", "mask")


def _check_features(features):
    """`features`: the names a resolved contract declares (resolve_contract)."""
    other = [f for f in features if f not in PYTHON_FEATURES]
    if other:
        raise ValueError(f"contract: a Python function takes the features {', '.join(PYTHON_FEATURES)} as keyword "
                         f"arguments, not {'+'.join(other)}, which change the tensors' layout: check such a kernel "
                         "through the C ABI or the exec protocol (spec/EXEC_PROTOCOL.md)")


@dataclass
class _Isolated:
    """A kernel run in its own process: the exec command and the file holding the pickled function."""
    command: str
    spec_path: str
    name: str
    adapter_framework: str

    def close(self):
        try:
            os.unlink(self.spec_path)
        except OSError:
            pass


#: check()'s arguments that make the kernel (make_kernel's), which Report.replay also takes.
KERNEL_ARGUMENTS = ("backward", "framework", "device", "name", "isolate")


def make_kernel(fn, backward=None, framework=None, device="cpu", name=None, contract=None, isolate=False):
    """The kernel tuple attncheck._core takes, or an _Isolated one."""
    kernel = Kernel(fn, backward, framework, device, name)
    text, lse, features = resolve_contract(contract)
    _check_features(features)
    if not isolate:
        return [(kernel.name, kernel, backward is not None, text, kernel.location)]
    return _isolated(kernel, text, lse)


def _pickle(obj):
    try:
        return pickle.dumps(obj)
    except Exception as first:
        try:
            import cloudpickle
        except ImportError:
            raise ValueError(
                f"isolate=True runs the function in a new Python process, which needs it pickled ({first}): define "
                "it at module level, or pip install cloudpickle for lambdas and closures") from None
        return cloudpickle.dumps(obj)


def _isolated(kernel, contract, lse):
    """`contract`: canonical text, sent in the exec hello; `lse`: its LSE output, which the served process needs."""
    spec = {"fn": kernel.fn, "backward": kernel.backward, "framework": kernel.adapter.framework,
            "device": kernel.device, "name": kernel.name, "contract": contract, "lse": lse}
    main = sys.modules.get("__main__")
    main_path = getattr(main, "__file__", None) if getattr(kernel.fn, "__module__", None) == "__main__" else None
    data = pickle.dumps({"sys_path": list(sys.path), "main_path": main_path and os.path.abspath(main_path),
                         "payload": _pickle(spec)})
    fd, path = tempfile.mkstemp(prefix="attncheck-fn-", suffix=".pickle")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    command = f"exec {shlex.quote(sys.executable)} -m attncheck._serve {shlex.quote(path)}"
    return _Isolated(command, path, kernel.name, kernel.adapter.framework)


def _kernels_and_command(kernel):
    if isinstance(kernel, _Isolated):
        return [], kernel.command
    return kernel, ""


def check(fn, *, backward=None, dtypes=DTYPES, properties=None, profile="default", seed=1, contract=None,
          report_dir=None, junit=None, time_budget=None, framework=None, device="cpu", isolate=False,
          cases=None, strict=False, timeout=10.0, first_call_timeout=60.0, name=None, quiet=None,
          shape_pool=None, corpus=None, shapes=None) -> Report:
    """Checks the attention function `fn(q, k, v, *, scale, causal)` — returning `out` or `(out, lse)` — against
    attncheck's arbitrary-precision reference on generated cases, shrinking each failure to a minimal counterexample.

    fn may be NumPy, PyTorch or JAX (`framework`, default: found from what fn returns) on `device` ("cpu", "cuda",
    "cuda:1": inputs are moved there and results back; the reference stays on the host). `backward` is a function
    `(q, k, v, out, lse, dout, *, scale, causal) -> (dq, dk, dv)`, "autograd" (torch.autograd, jax.vjp) or None.
    `contract` declares what fn promises (spec/SPEC.md §3.1), e.g. {"causal": "top-left", "lse": "none"} for
    torch's scaled_dot_product_attention; {"features": ["window", "softcap"]} declares features, whose settings
    then reach fn (and backward) as keyword arguments on the calls that use them: window=(left, right) (−1:
    unbounded), softcap=c, alibi_slopes= and sinks= ([Hq] float32 arrays), attn_mask= ([Bm, Hm, Lq, Lk], uint8
    boolean or float32 additive). {"dtypes": ["f16", "bf16"]} declares the storage dtypes fn implements
    (FlashAttention has no float32): the runs of the others are off, and fn is not called in them. With
    `isolate=True` fn runs in a separate Python process, so that a crash or hang in native code is a failing call
    and not the end of this process (fn must pickle).

    In process, the time budget holds for fn too: a call still running at the check's end (its budget per dtype,
    plus half a second) is abandoned — the check starts no more calls and returns its report, whose note names the
    call — and Ctrl-C during a call does the same before KeyboardInterrupt is raised. (Each call gets copies of its
    inputs, so that an abandoned one may go on reading them; what it writes into them still reaches the gate.)

    `shape_pool` draws case shapes from a pool of N so that a function compiled per shape (jax.jit, torch.compile,
    Triton autotuning) compiles a few: "auto" (on when a first call of a shape is much slower than a repeat), 0 (off)
    or N; by default "auto", and the CLI's pool size for JAX, which compiles every new shape, eager or jitted. `timeout` (seconds per call; `first_call_timeout` for the first call of each shape, when a JIT compiles)
    applies to isolated functions; `profile` sets the cases and time budget
    per dtype (quick, default, thorough), `cases` and `time_budget` (seconds per dtype) override it.

    `corpus` is a counterexample corpus directory (created when missing; the CLI's `check --corpus`): its entries for
    the function's name and each dtype are replayed before each property's search — a corpus case that fails is that
    property's counterexample (Counterexample.corpus_entry names it) — and every counterexample and warning of this
    check is added to it, one file per case named by its content hash (spec/REPORT_SCHEMA.md). `attncheck corpus DIR`
    lists and prunes it.

    `shapes` adds your production shapes to the plan: every property the fast reference judges runs one case on each
    (values, layout and the other settings drawn as for any case), after its search; a failure there is shrunk like
    any other. Give a preset's name ("llama-3-8b", "llama-3-70b", "qwen3-14b", "qwen3-235b-a22b", "gemma-3-1b",
    "gemma-3-27b", "mistral-7b", "deepseek-v3": `attncheck list --shapes` shows them with their sources), a JSON
    file's path, or a list of preset names and dicts with keys B, Hq, Hkv, Lq, Lk, D, Dv, causal and optionally
    window=(left, right), softcap and name — e.g. [{"B": 1, "Hq": 32, "Hkv": 8, "Lq": 1, "Lk": 32768, "D": 128}].
    Report.properties' lines say how each shape went (`shapes`); summary.md lists them. ValueError for a shape it
    cannot read.

    Returns a Report; writes report.json, summary.md and report.html to `report_dir` and JUnit XML to `junit` when
    given. The same seed gives the same cases, verdicts and report.
    """
    if os.environ.get("ATTNCHECK_SERVING"):
        raise RuntimeError("attncheck.check was called in the process that isolate=True started to run the function: "
                           "protect your script's entry point with `if __name__ == '__main__':`")
    if isinstance(dtypes, str):
        dtypes = (dtypes,)
    kernel = make_kernel(fn, backward, framework, device, name, contract, isolate)
    rq = _core.CheckRequest()
    rq.dtypes = list(dtypes)
    rq.properties = list(properties) if properties else []
    rq.profile = profile
    rq.cases = cases
    rq.seed = seed
    rq.time_budget = time_budget
    rq.strict = strict
    rq.report_dir = os.fspath(report_dir) if report_dir is not None else ""
    rq.junit = os.fspath(junit) if junit is not None else ""
    rq.quiet = (not _core.stderr_is_terminal()) if quiet is None else quiet
    rq.timeout = timeout
    rq.first_call_timeout = first_call_timeout
    if shape_pool is None:
        framework_used = kernel.adapter_framework if isinstance(kernel, _Isolated) else kernel[0][1].adapter.framework
        shape_pool = _core.AUTO_SHAPE_POOL if framework_used == "jax" else "auto"
    rq.shape_pool = str(shape_pool)
    rq.corpus = os.fspath(corpus) if corpus is not None else ""
    rq.shapes = _shapes_argument(shapes)
    specs, command = _kernels_and_command(kernel)
    try:
        text, exit_code, interrupted = _core.check(specs, command, rq)
    finally:
        if isinstance(kernel, _Isolated):
            kernel.close()
    report = Report(text, exit_code, dict(fn=fn, backward=backward, framework=framework, device=device, name=name,
                                          contract=contract, isolate=isolate))
    if interrupted:
        raise KeyboardInterrupt("attncheck: interrupted; the report holds what was decided")
    return report


def _shapes_argument(shapes):
    """check()'s `shapes` as the gate reads them (gate/include/attncheck/shapes.h): a preset's name or a file's path
    as given, a list as JSON text ("" for none)."""
    if shapes is None:
        return ""
    if isinstance(shapes, (str, os.PathLike)):
        return os.fspath(shapes)
    if isinstance(shapes, dict):
        shapes = [shapes]
    try:
        return json.dumps(list(shapes), default=_json_number)
    except TypeError as e:
        raise ValueError(f"shapes: {e}") from None


def _json_number(x):
    """NumPy and torch scalars in a shape dict (Hq=np.int64(32)) as JSON numbers."""
    if hasattr(x, "item"):
        return x.item()
    raise TypeError(f"a shape's values are numbers, booleans and [left, right] lists, not {type(x).__name__}")


def replay(document, failure, kernel, timeout=10.0, contract=None, strict=False) -> Replay:
    """Counterexample `failure` of the report run on `kernel`, judged under `contract` (text; None: the report's)."""
    specs, command = _kernels_and_command(kernel)
    try:
        verdict, step, detail = _core.replay(document, failure, specs, command, timeout, contract)
    finally:
        if isinstance(kernel, _Isolated):
            kernel.close()
    return Replay(verdict, step, detail, strict)


def corpus_entries(corpus):
    """The entries of the counterexample corpus `corpus` (a directory check(corpus=...) wrote), one line each as
    `attncheck corpus DIR` lists them: hash, kernel, dtype, property, verdict, shape. Raises ValueError for a corpus
    that is missing or corrupt."""
    return _core.corpus_list(os.fspath(corpus))


def prune_corpus(corpus, fn, *, backward=None, framework=None, device="cpu", name=None, contract=None,
                 isolate=False, timeout=10.0):
    """`attncheck corpus DIR --prune` for a Python function: replays each entry of the corpus recorded for `fn`'s
    name (`name`, as check() names it) on `fn`, under the contract the entry was recorded with, and deletes those
    that pass now. Returns [(line, dropped)] per entry, the line saying "dropped … (passes now)" or "kept … (why)"."""
    kernel = make_kernel(fn, backward, framework, device, name, contract, isolate)
    kernel_name = kernel.name if isinstance(kernel, _Isolated) else kernel[0][0]
    specs, command = _kernels_and_command(kernel)
    try:
        return _core.corpus_prune(os.fspath(corpus), specs, command, timeout, kernel_name)
    finally:
        if isinstance(kernel, _Isolated):
            kernel.close()


def properties():
    """Every property: (id, formula, summary)."""
    return _core.properties()
