"""attncheck.infer: the contract a function satisfies, found by the core's search (gate/include/attncheck/infer.h) —
check it, adopt the declaration that explains its failures, check again — as one line for `contract=`."""
from __future__ import annotations

import json
import os

from . import _core
from ._api import DTYPES, _Isolated, _kernels_and_command, make_kernel, resolve_contract
from ._kernel import Kernel, probe_call


def _returns_lse(fn, framework, device, dtypes):
    """Whether fn returns (out, lse) rather than out alone, on a small problem in its framework (in the first of the
    check's dtypes fn takes): a function without an LSE output cannot be asked for one (the gate's call fails), so
    infer starts it from lse=none — as a kernel that declares it. True when the call raises or declines every dtype:
    the checks will say what is wrong."""
    try:
        result = probe_call(fn, Kernel(fn, None, framework, device).adapter, dtypes)
    except Exception:
        return True
    return isinstance(result, (tuple, list)) and len(result) >= 2 and result[1] is not None


class Inferred:
    """What attncheck.infer found. `contract` is the line to declare (contract=..., attncheck_contracts, the exec
    hello, `attncheck check --contract`); `found` is True when the function passes under it (exit code 0). When no
    contract value fits a failure (a bug: exit code 1), `no_fit` names the property, its dtype, its root cause and
    the counterexample; `contract` is then the best found. `str(inferred)` is the text `attncheck infer` prints."""

    def __init__(self, json_text: str, text: str, exit_code: int):
        self.data = json.loads(json_text)
        self.text = text
        self.exit_code = exit_code

    @property
    def contract(self) -> str:
        return self.data["contract"]

    @property
    def found(self) -> bool:
        return self.exit_code == 0

    @property
    def outcome(self) -> str:
        """"found", "no-fit" or "undecided"."""
        return self.data["outcome"]

    @property
    def no_fit(self):
        return self.data["no_fit"]

    @property
    def dropped(self):
        """A declaration adopted and dropped (a failure it explained persisted under it, unexplained), or None."""
        return self.data["dropped"]

    @property
    def advisory_warnings(self):
        return self.data["advisory_warnings"]

    @property
    def stronger(self):
        """The declarations beyond the defaults that the checks supported: [{"declaration", "evidence"}]."""
        return self.data["stronger"]

    @property
    def declined_dtypes(self):
        """{"declaration": "dtypes=f16+bf16", "evidence": "the kernel declined all … cases of f32"} when the function
        declined every case of a dtype while another ran (the contract then leaves it out), else None."""
        return self.data["declined_dtypes"]

    @property
    def rounds(self):
        return self.data["rounds"]

    def __str__(self):
        return self.text

    def __repr__(self):
        return f"Inferred(outcome={self.outcome!r}, contract={self.contract!r})"


def infer(fn, *, backward=None, dtypes=DTYPES, properties=None, profile="quick", seed=1, contract=None, cases=None,
          time_budget=None, framework=None, device="cpu", isolate=False, timeout=10.0, first_call_timeout=60.0,
          name=None, quiet=None, shape_pool=None) -> Inferred:
    """The contract `fn` (as attncheck.check takes it) satisfies: checked under `contract` (what you know it does;
    default: the defaults, with lse=none when fn returns out alone), then under each declaration that explains its failures, until it passes — or a failure
    no declaration explains, a bug, which Inferred.no_fit names. An advisory property that passed supports a stronger
    declaration (determinism=bitwise, batch-invariant=bitwise, hidden-keys=any), kept when the check under it passes.
    Each check runs `profile` (quick by default), `cases`, `properties` and `seed` as attncheck.check does; the same
    seed gives the same contract."""
    if os.environ.get("ATTNCHECK_SERVING"):
        raise RuntimeError("attncheck.infer was called in the process that isolate=True started to run the function: "
                           "protect your script's entry point with `if __name__ == '__main__':`")
    if isinstance(dtypes, str):
        dtypes = (dtypes,)
    declared, lse, _ = resolve_contract(contract)
    no_lse = lse == "f32" and not _returns_lse(fn, framework, device, dtypes)
    if no_lse:
        contract = f"{declared} lse=none".strip()  # declared: "" for the defaults
    kernel = make_kernel(fn, backward, framework, device, name, contract, isolate)
    rq = _core.CheckRequest()
    rq.dtypes = list(dtypes)
    rq.properties = list(properties) if properties else []
    rq.profile = profile
    rq.cases = cases
    rq.seed = seed
    rq.time_budget = time_budget
    rq.quiet = (not _core.stderr_is_terminal()) if quiet is None else quiet
    rq.timeout = timeout
    rq.first_call_timeout = first_call_timeout
    if shape_pool is None:
        framework_used = kernel.adapter_framework if isinstance(kernel, _Isolated) else kernel[0][1].adapter.framework
        shape_pool = _core.AUTO_SHAPE_POOL if framework_used == "jax" else "auto"
    rq.shape_pool = str(shape_pool)
    specs, command = _kernels_and_command(kernel)
    try:
        json_text, text, exit_code, interrupted = _core.infer(
            specs, command, rq, "fn returns out alone (no LSE): the search starts from lse=none" if no_lse else "")
    finally:
        if isinstance(kernel, _Isolated):
            kernel.close()
    if interrupted:
        raise KeyboardInterrupt("attncheck: interrupted")
    return Inferred(json_text, text, exit_code)
