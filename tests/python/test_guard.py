"""The guard in process: the time budget holds for an in-process function too — a call still running at its end is
abandoned, the check returns with what it decided, and the report names the call."""
import os
import signal
import threading
import time

import pytest

import attncheck
import kernels

BUDGET = 2.0  # seconds: the check's, which the blocked call outlasts on purpose
#: What "within the budget" allows past it: the guard's grace (0.5 s), and the reports written after it.
LATE = 1.0


def blocking_on_call(n, release):
    """attention, except that its n-th call waits for `release` (up to a minute): a call that outlasts the budget."""
    calls = [0]

    def attention_blocks(q, k, v, *, scale, causal):
        calls[0] += 1
        if calls[0] == n:
            release.wait(60)
        return kernels.attention(q, k, v, scale=scale, causal=causal)

    return attention_blocks


def test_a_call_that_blocks_past_the_budget_is_abandoned_and_the_report_names_it():
    release = threading.Event()
    start = time.monotonic()
    try:
        report = attncheck.check(blocking_on_call(5, release), dtypes=["f32"], properties=["accuracy"],
                                 time_budget=BUDGET, framework="numpy", shape_pool=0, quiet=True)
    finally:
        release.set()
    elapsed = time.monotonic() - start
    assert elapsed < BUDGET + LATE, f"returned after {elapsed:.1f} s"
    assert report.verdict == "undecided" and not report.passed
    [accuracy] = report.properties
    assert accuracy.verdict == "undecided"
    assert "a call was left running: forward (call 5) on B=" in accuracy.note, accuracy.note
    assert "the time budget ran out while it was still running" in accuracy.note
    assert accuracy.note in report.summary()


def test_a_function_whose_calls_all_return_is_not_cut_by_the_guard(fast):
    report = attncheck.check(kernels.attention, dtypes=["f32"], properties=["accuracy"], framework="numpy", **fast)
    [accuracy] = report.properties
    assert "left running" not in accuracy.note
    assert accuracy.verdict == "pass", report.summary()


def test_ctrl_c_during_a_blocked_call_leaves_the_report(tmp_path):
    release = threading.Event()
    threading.Timer(1.0, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
    try:
        with pytest.raises(KeyboardInterrupt):
            attncheck.check(blocking_on_call(5, release), dtypes=["f32"], properties=["accuracy"], time_budget=60,
                            framework="numpy", shape_pool=0, quiet=True, report_dir=tmp_path / "r")
    finally:
        release.set()
    report = attncheck.Report.load(tmp_path / "r")
    [accuracy] = report.properties
    assert accuracy.verdict == "undecided"
    assert "forward (call 5)" in accuracy.note and "interrupted (Ctrl-C) while it was still running" in accuracy.note


#: A script whose check abandons a call that keeps running Python code (a busy loop, which asks for the GIL again
#: and again) while the interpreter exits right after the check: the exit must stay clean.
EXIT_WHILE_ABANDONED = """
import time, attncheck, kernels
calls = [0]
def busy_on_call_5(q, k, v, *, scale, causal):
    calls[0] += 1
    if calls[0] == 5:
        end = time.monotonic() + 4
        while time.monotonic() < end:
            pass
    return kernels.attention(q, k, v, scale=scale, causal=causal)
report = attncheck.check(busy_on_call_5, dtypes=["f32"], properties=["accuracy"], time_budget=1.0,
                         framework="numpy", shape_pool=0, quiet=True)
print(report.verdict)
"""


def test_the_interpreter_exits_cleanly_while_an_abandoned_call_still_runs_python_code():
    import subprocess
    import sys
    from conftest import EXAMPLES
    here = os.path.dirname(os.path.abspath(__file__))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([here, EXAMPLES, os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", EXIT_WHILE_ABANDONED], capture_output=True, text=True, timeout=60,
                          env=env)
    assert "Fatal Python error" not in done.stderr, done.stderr[-2000:]
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "undecided"
