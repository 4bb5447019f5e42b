"""The exec-protocol server behind isolate=True (spec/EXEC_PROTOCOL.md): `python -m attncheck._serve SPEC` loads
the pickled function, says hello and answers forward/backward requests on .npy files, through the same Kernel as an
in-process check. attncheck's C++ ExecKernel runs it: a crash, a hang or a runaway allocation there is a failing
call, and the child is restarted."""
from __future__ import annotations

import os
import pickle
import sys
import types

import numpy as np

PROTOCOL_VERSION = 1
SERVING_ENV = "ATTNCHECK_SERVING"
STORAGE = {"float32": np.float32, "float16": np.float16, "bfloat16": np.uint16}


_protocol = sys.stdout  # main() moves it off fd 1: what the function prints goes to stderr, not into the protocol


def _send(line):
    _protocol.write(line + "\n")
    _protocol.flush()


def _one_line(message):
    """The answer's message is one line: the exception's first line and, after " — ", its last (the full traceback
    goes to error.txt, into the report)."""
    lines = [ln for ln in message.splitlines() if ln.strip()]
    return (lines[0] + (" — " + lines[-1].strip() if len(lines) > 1 else ""))[:2000] if lines else ""


def _serve(kernel, lse):
    """`lse`: the LSE output of the kernel's contract as the core resolved it ("f32", "storage" or "none")."""
    lse_storage = lse == "storage"
    lse_none = lse == "none"
    from ._kernel import OK, UNSUPPORTED
    for raw in sys.stdin:
        line = raw.rstrip("\n")
        if line == "quit":
            return
        try:
            directory = line[line.index(" /") + 1:]
            verb, name, dtype, scale, mask, *tokens = line[:line.index(" /")].split(" ")
            if verb not in ("forward", "backward") or name != kernel.name or dtype not in STORAGE:
                raise ValueError
            scale = float(scale)
            settings = dict(t.split("=", 1) for t in tokens)
        except ValueError:
            _send(f"error malformed request: {line[:200]!r}")
            continue
        st = STORAGE[dtype]

        def load(n):
            path = os.path.join(directory, n + ".npy")
            return np.load(path) if os.path.exists(path) else None

        features = {}  # the keyword arguments of the call's features (EXEC_PROTOCOL.md §4.1)
        if "window" in settings:
            features["window"] = tuple(int(x) for x in settings["window"].split(","))
        if "softcap" in settings:
            features["softcap"] = float(settings["softcap"])
        for file, kw in (("alibi_slopes", "alibi_slopes"), ("sinks", "sinks"), ("attn_mask", "attn_mask")):
            if (a := load(file)) is not None:
                features[kw] = a

        q, k, v = load("q"), load("k"), load("v")
        B, Hq, Lq, _ = q.shape
        Dv = v.shape[3]
        if verb == "forward":
            ins = (q, k, v)
            outs = (types.SimpleNamespace(shape=(B, Hq, Lq, Dv), dtype=np.dtype(st)),
                    None if lse_none else types.SimpleNamespace(shape=(B, Hq, Lq),
                                                                 dtype=np.dtype(st if lse_storage else np.float32)))
            names = ("out", "lse")
        else:
            ins = (q, k, v, load("out"), load("lse"), load("dout"))
            outs = tuple(types.SimpleNamespace(shape=t.shape, dtype=np.dtype(st)) for t in (q, k, v))
            names = ("dq", "dk", "dv")
        status, payload = kernel.call(verb == "backward", scale, mask == "causal", ins, outs, features)
        if status != OK:
            if status != UNSUPPORTED:
                # Quiet on stderr: one line per failing call; the traceback goes into the report (error.txt).
                first = next((ln for ln in payload.splitlines() if ln.strip()), "")
                sys.stderr.write(f"attncheck: {kernel.name} {verb} failed: {first[:500]}\n")
                if len(payload.splitlines()) > 1:
                    with open(os.path.join(directory, "error.txt"), "w", encoding="utf-8") as f:
                        f.write(payload)
            _send(("unsupported " if status == UNSUPPORTED else "error ") + _one_line(payload))
            continue
        missing = [n for n, a, o in zip(names, payload, outs) if o is not None and a is None]
        if missing:
            _send(f"error returned no {missing[0]} (a function without LSE declares contract={{'lse': 'none'}})")
            continue
        for n, a in zip(names, payload):
            if a is not None:
                np.save(os.path.join(directory, n + ".npy"), a)
        _send("ok")


def main(argv):
    if len(argv) != 2:
        sys.stderr.write("usage: python -m attncheck._serve SPEC (attncheck.check(..., isolate=True) runs it)\n")
        return 2
    global _protocol
    _protocol = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    with open(argv[1], "rb") as f:
        outer = pickle.load(f)
    # The caller's import path and main script first, so that the function unpickles by reference (as
    # multiprocessing's spawn start method does).
    sys.path[:0] = [p for p in outer["sys_path"] if p not in sys.path]
    os.environ[SERVING_ENV] = "1"  # a main script without a __name__ guard must not start a check in here
    if outer["main_path"]:
        from multiprocessing import spawn
        spawn._fixup_main_from_path(outer["main_path"])
    spec = pickle.loads(outer["payload"])
    from ._kernel import Kernel
    kernel = Kernel(spec["fn"], spec["backward"], spec["framework"], spec["device"], spec["name"])
    caps = "forward backward" if spec["backward"] is not None else "forward"
    _send(f"attncheck-exec {PROTOCOL_VERSION}")
    _send(f"kernel {kernel.name} {caps} {spec['contract']}".rstrip())
    _send("ready")
    _serve(kernel, spec["lse"])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
