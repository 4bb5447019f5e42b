"""A crash in process leaves a trace: a function that segfaults or aborts in native code ends the Python process, but
first attncheck writes the case it was on (property, dtype, spec, the replay line) to stderr and to the report
directory's crash.txt; the next check with that report directory reports that property as failed, naming the case,
without calling it again."""
import json
import os
import signal
import subprocess
import sys

import pytest

from conftest import EXAMPLES

HERE = os.path.dirname(os.path.abspath(__file__))

SCRIPT = """
import sys
sys.path[:0] = [{here!r}, {examples!r}]
import attncheck, kernels
report = attncheck.check(kernels.{fn}, dtypes=["f32"], properties=["accuracy"], cases=15,
                         time_budget=60, report_dir={report_dir!r})
print("verdict", report.verdict)
"""


def run(fn, report_dir):
    code = SCRIPT.format(here=HERE, examples=EXAMPLES, fn=fn, report_dir=str(report_dir))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("fn, sig", [("attention_segfaults_on_long_rows", signal.SIGSEGV),
                                     ("attention_aborts_on_long_rows", signal.SIGABRT)])
def test_a_native_crash_in_process_names_its_case_and_the_next_check_reports_it(tmp_path, fn, sig):
    died = run(fn, tmp_path)
    assert died.returncode == -sig, (died.returncode, died.stderr[-2000:])
    line = next((ln for ln in died.stderr.splitlines() if ln.startswith("attncheck: the process died of signal")), None)
    assert line, died.stderr[-2000:]
    assert f"signal {int(sig)} in a call of kernel '{fn}' (forward) — property accuracy, f32" in line, line
    assert "Lk=" in line and "Replay: attncheck.check(fn, properties=['accuracy'], dtypes=['f32'], seed=1)" in line
    crumb = (tmp_path / "crash.txt").read_text()
    assert crumb.splitlines()[0] == line

    again = run(fn, tmp_path)  # the same report directory: accuracy is not called again
    assert again.returncode == 0, again.stderr[-2000:]
    assert "verdict fail" in again.stdout
    assert not (tmp_path / "crash.txt").exists()
    doc = json.loads((tmp_path / "report.json").read_text())
    props = {p["id"]: p for p in doc["runs"][0]["properties"]}
    assert props["accuracy"]["verdict"] == "fail"
    assert "the previous check with this report directory died in it" in props["accuracy"]["note"]
    assert f"signal {int(sig)}" in props["accuracy"]["note"] and "Lk=" in props["accuracy"]["note"]


def test_a_check_that_ends_leaves_no_crash_record(tmp_path):
    done = run("attention", tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "verdict pass" in done.stdout
    assert not (tmp_path / "crash.txt").exists()
