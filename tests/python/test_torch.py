"""PyTorch functions: torch tensors in and out, autograd backward, the same verdicts as the exec protocol's
examples/exec/torch_sdpa_kernel.py, and the CUDA path where a device exists."""
import json
import os
import subprocess
import sys
import time

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (ATTNCHECK_PYTHON_FRAMEWORKS)")
import torch.nn.functional as F  # noqa: E402

import attncheck  # noqa: E402
from conftest import FAST, SOURCE_DIR  # noqa: E402
from torch_sdpa import CONTRACT, sdpa  # noqa: E402

PROPERTIES = ["accuracy", "lse", "causal", "sum_to_one", "gradient_accuracy", "gradient_identities",
              "input_integrity"]


def sdpa_unscaled(q, k, v, *, scale, causal):
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=1.0, enable_gqa=q.shape[1] != k.shape[1])


def test_the_function_gets_torch_tensors_in_its_dtype():
    seen = []

    def spy(q, k, v, *, scale, causal):
        seen.append((type(q), q.dtype, k.dtype, v.device.type))
        return sdpa(q, k, v, scale=scale, causal=causal)

    attncheck.check(spy, dtypes=["f32", "f16", "bf16"], properties=["accuracy"], contract=CONTRACT, cases=3,
                    quiet=True, framework="torch")
    assert {s[1] for s in seen} == {torch.float32, torch.float16, torch.bfloat16}
    assert all(s[0] is torch.Tensor and s[3] == "cpu" for s in seen)


def test_torch_sdpa_passes_forward_and_autograd_backward_and_without_scale_fails():
    report = attncheck.check(sdpa, backward="autograd", contract=CONTRACT, properties=PROPERTIES, **FAST)
    assert report.passed, report.summary()
    bad = attncheck.check(sdpa_unscaled, backward="autograd", contract=CONTRACT, dtypes=["f32"],
                          properties=["accuracy"], **FAST)
    assert bad.verdict == "fail" and bad.counterexamples[0].spec["D"] >= 2


def _exec_verdicts(dtype, seed, with_reports):
    """`attncheck check --exec examples/exec/torch_sdpa_kernel.py`: per property (verdict, cases), and its time; the
    reports go to the folder `with_reports`."""
    cli = os.environ.get("ATTNCHECK_CLI")
    if not cli:
        pytest.skip("ATTNCHECK_CLI (the attncheck executable) is not set: run through ctest")
    kernel = os.path.join(SOURCE_DIR, "examples", "exec", "torch_sdpa_kernel.py")
    start = time.monotonic()
    proc = subprocess.run([cli, "check", "--exec", f"{sys.executable} {kernel}", "--dtype", dtype, "--properties",
                           ",".join(PROPERTIES), "--cases", str(FAST["cases"]), "--profile", "quick",
                           "--time-budget", str(FAST["time_budget"]), "--seed",
                           str(seed), "--jobs", "1", "--quiet", "--report-dir", with_reports],
                          capture_output=True, text=True)
    elapsed = time.monotonic() - start
    assert proc.returncode in (0, 1, 3), proc.stderr  # a verdict (pass, fail, undecided), not an error
    with open(os.path.join(with_reports, "report.json")) as f:
        doc = json.load(f)
    return [(p["id"], p["verdict"], p["cases"]) for p in doc["runs"][0]["properties"]], elapsed


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_in_process_autograd_gives_the_exec_protocols_verdicts(dtype, tmp_path):
    start = time.monotonic()
    report = attncheck.check(sdpa, backward="autograd", contract=CONTRACT, dtypes=[dtype], properties=PROPERTIES,
                             seed=3, **FAST)
    in_process = time.monotonic() - start
    exec_verdicts, exec_time = _exec_verdicts(dtype, 3, str(tmp_path))
    assert [(p.id, p.verdict, p.cases) for p in report.properties] == exec_verdicts
    print(f"\ntorch SDPA {dtype}, {len(PROPERTIES)} properties × {FAST['cases']} cases: in process {in_process:.1f} s, "
          f"exec protocol {exec_time:.1f} s")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device: the GPU path is not exercised here")
def test_on_a_cuda_device_tensors_go_there_and_results_come_back():
    devices = []

    def spy(q, k, v, *, scale, causal):
        devices.append(q.device.type)
        return sdpa(q, k, v, scale=scale, causal=causal)

    report = attncheck.check(spy, backward="autograd", contract=CONTRACT, device="cuda", properties=PROPERTIES,
                             **FAST)
    assert report.passed, report.summary()
    assert set(devices) == {"cuda"}
