#!/usr/bin/env python3
"""Cases per second per property (issue 21): what `attncheck check` judges per second of its own wall time, and the
row lengths and head dims of the cases it judged. Standard library only.

    python3 bench/cases_per_second.py [--attncheck build/attncheck] [--baseline OLD/attncheck] [--repeat N]
                                      [-- CHECK ARGS...]
    python3 bench/cases_per_second.py --report report.json [--baseline-report old/report.json]

Runs `check --plugin builtin --profile default --jobs 1 --seed 1` (or the CHECK ARGS given after `--`) with each binary,
one after the other in this run, and prints per (kernel, dtype, property): cases judged (search and targeted mutants),
seconds, cases per second, and with a baseline the ratio after ÷ before and its ceiling; the same for attncheck's own
time (the property's seconds less its kernel calls'). The ceiling is the baseline's seconds ÷ its kernel calls' seconds:
how far cases per second could rise on the baseline's cases if attncheck's own work took no time at all and the kernel's
calls took what they took (Amdahl's law); "own needed" is how far attncheck's own cases per second must rise for after ÷
before to reach 10 on those cases (∞ where the ceiling is under 10). Then, per (kernel, dtype), the run's seconds, the
geometric mean and range of those ratios and how many ceilings lie under 10×, and the whole check's seconds; where the
exact values came from (report.json's `reference` counts: elements the fast path decided, elements MPFR judged,
confirmations) and how many cases were undecided; and how the decided cases spread over row lengths (Lk) and head dims
(D): the coverage corners of report.json (SPEC.md §7), summed over the properties. With --report, reads saved reports
instead of running anything.

--repeat N runs each binary N times, alternating (before, after, before, …), and takes every time's median: on a
machine whose speed drifts, a single run's ratio can be off by 15 %. The seed fixes the cases, so the runs must judge
the same cases; the script stops if they do not.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
from statistics import median

# Coverage corners (properties/src/coverage.cpp) that bucket Lk and D, in order.
LK_CORNERS = ["lk0", "lk1", "lk-short", "lk-tile", "lk-multi", "lk-long", "lk-16k"]
D_CORNERS = ["d-small", "d64", "d80", "d96", "d128", "d192", "d256", "d-odd"]
TARGET = 10  # issue 21's goal for cases per second, after ÷ before
DEFAULT_CHECK = ["check", "--plugin", "builtin", "--profile", "default", "--jobs", "1", "--seed", "1", "--quiet"]


def run_check(binary, args):
    """report.json of `binary args --report-dir TMP`, parsed."""
    with tempfile.TemporaryDirectory(prefix="attncheck-cps-") as d:
        proc = subprocess.run([binary] + args + ["--report-dir", d], capture_output=True, text=True)
        if proc.returncode not in (0, 1, 3):
            sys.exit(f"cases_per_second: {binary} exited {proc.returncode}: {proc.stderr.strip()[-500:]}")
        with open(os.path.join(d, "report.json")) as f:
            return json.load(f)


def median_report(reports):
    """The first report with every time of its timing object replaced by the median over `reports` (runs of the same
    seed: the same cases, checked)."""
    first = reports[0]
    cases = [[(p["id"], p.get("cases", 0), p.get("targeted", {}).get("cases", 0)) for run in r["runs"]
              for p in run["properties"]] for r in reports]
    if any(c != cases[0] for c in cases):
        sys.exit("cases_per_second: the repeated runs judged different cases (a time limit bound?); "
                 "run them on an idle machine or with --repeat 1")
    timing = first.get("timing", {})
    runs = [r.get("timing", {}).get("runs", []) for r in reports]
    for n, run in enumerate(timing.get("runs", [])):
        run["seconds"] = median([rs[n]["seconds"] for rs in runs])
        for m, p in enumerate(run["properties"]):
            for field in ("seconds", "kernel_seconds"):
                if field in p:
                    p[field] = median([rs[n]["properties"][m][field] for rs in runs])
    if "seconds" in timing:
        timing["seconds"] = median([r["timing"]["seconds"] for r in reports])
    return first


def rates(report):
    """{(kernel, dtype, property): (cases, seconds, own seconds)} from a report's runs and its timing object; own
    seconds are attncheck's alone: the property's seconds less the kernel's (its calls' wall time)."""
    seconds = {}
    for run in report.get("timing", {}).get("runs", []):
        for p in run["properties"]:
            seconds[(run["kernel"], run["dtype"], p["property"])] = (p["seconds"], p.get("kernel_seconds", 0.0))
    out = {}
    for run in report["runs"]:
        for p in run["properties"]:
            key = (run["kernel"], run["dtype"], p["id"])
            cases = p.get("cases", 0) + p.get("targeted", {}).get("cases", 0)
            total, kernel = seconds.get(key, (0, 0))
            if cases and total and total > kernel:
                out[key] = (cases, total, total - kernel)
    return out


def ceiling(rate):
    """A baseline's (cases, seconds, own seconds) → seconds ÷ kernel seconds: the most its cases per second can grow
    with the kernel's calls as they were and attncheck's own time at zero (∞ when the kernel took no time)."""
    _, seconds, own = rate
    return seconds / (seconds - own) if seconds > own else math.inf


def own_needed(rate):
    """A baseline's (cases, seconds, own seconds) → the factor its own time must shrink by for its cases per second to
    grow TARGET-fold with the kernel's calls as they were (∞ when the kernel's calls alone take longer than that)."""
    _, seconds, own = rate
    left = seconds / TARGET - (seconds - own)  # own seconds allowed at TARGET× the speed
    return own / left if left > 0 else math.inf


def geometric_mean(values):
    return math.prod(values) ** (1 / len(values))


def run_seconds(report):
    """{(kernel, dtype): seconds} of each kernel and dtype's run, and the whole check's seconds."""
    timing = report.get("timing", {})
    return {(r["kernel"], r["dtype"]): r["seconds"] for r in timing.get("runs", [])}, timing.get("seconds", 0)


def reference_counts(report):
    """{(kernel, dtype): (fast elements, MPFR elements, confirmations, undecided cases)} summed over properties."""
    out = {}
    for run in report["runs"]:
        fast = mpfr = confirmations = undecided = 0
        for p in run["properties"]:
            ref = p.get("reference", {})
            fast += ref.get("fast_elements", 0)
            mpfr += ref.get("mpfr_elements", 0)
            confirmations += ref.get("confirmations", 0)
            undecided += p.get("undecided", 0)
        out[(run["kernel"], run["dtype"])] = (fast, mpfr, confirmations, undecided)
    return out


def spread(report):
    """{(kernel, dtype): {corner: decided cases}} summed over properties."""
    out = {}
    for run in report["runs"]:
        total = out.setdefault((run["kernel"], run["dtype"]), {})
        for p in run["properties"]:
            for corner, n in p.get("coverage", {}).get("decided", {}).items():
                total[corner] = total.get(corner, 0) + n
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--attncheck", default="build/attncheck")
    ap.add_argument("--baseline", help="an older attncheck binary to run first, for the ratio")
    ap.add_argument("--report", help="read this report.json instead of running")
    ap.add_argument("--baseline-report", help="read this report.json as the baseline")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each binary, alternating; times are medians")
    ap.add_argument("check_args", nargs="*", help="after --: the check's arguments")
    a = ap.parse_args()
    args = a.check_args or DEFAULT_CHECK
    if a.repeat < 1:
        sys.exit("cases_per_second: --repeat takes a count of at least 1")
    before, befores, afters = None, [], []
    if a.baseline_report:
        with open(a.baseline_report) as f:
            before = json.load(f)
    if a.report:
        with open(a.report) as f:
            after = json.load(f)
    for _ in range(a.repeat):  # alternating, so that a drift of the machine's speed reaches both alike
        if a.baseline and not a.baseline_report:
            befores.append(run_check(a.baseline, args))
        if not a.report:
            afters.append(run_check(a.attncheck, args))
    if befores:
        before = median_report(befores)
    if afters:
        after = median_report(afters)

    now, then = rates(after), rates(before) if before else {}
    # cases/s counts the whole time; own cases/s only attncheck's (what the reference, bounds and staging cost).
    print("| kernel | dtype | property | cases | seconds | cases/s | before cases/s | after ÷ before | ceiling "
          "| own cases/s | before own | own after ÷ before | own needed |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for key in sorted(now, key=lambda k: (k[0], k[1])):
        cases, s, own = now[key]
        line = f"| {key[0]} | {key[1]} | {key[2]} | {cases} | {s:.3f} | {cases / s:.0f} |"
        if key in then:
            bc, bs, bown = then[key]
            line += f" {bc / bs:.0f} | {(cases / s) / (bc / bs):.2f} | {ceiling(then[key]):.2f} | {cases / own:.0f} " \
                    f"| {bc / bown:.0f} | {(cases / own) / (bc / bown):.2f} | {own_needed(then[key]):.1f} |"
        else:
            line += f" | | | {cases / own:.0f} | | | |"
        print(line)
    print()
    # Per kernel and dtype: the run's seconds, and the geometric mean of after ÷ before over the properties both judged.
    runs, whole = run_seconds(after)
    before_runs, before_whole = run_seconds(before) if before else ({}, 0)
    for key in sorted(runs):
        line = f"{key[0]} {key[1]}: {runs[key]:.1f} s"
        both = [k for k in now if k[:2] == key and k in then]
        if key in before_runs:
            line += f" (before {before_runs[key]:.1f} s)"
        if both:
            ratios = [(now[k][0] / now[k][1]) / (then[k][0] / then[k][1]) for k in both]
            own = [(now[k][0] / now[k][2]) / (then[k][0] / then[k][2]) for k in both]
            capped = sum(ceiling(then[k]) < TARGET for k in both)
            line += f", cases/s after ÷ before: geometric mean {geometric_mean(ratios):.2f} over {len(ratios)} " \
                    f"properties, {min(ratios):.2f}–{max(ratios):.2f} ({capped} with a ceiling under {TARGET:g}×); " \
                    f"own cases/s: {geometric_mean(own):.2f}, {min(own):.2f}–{max(own):.2f}"
        print(line)
    print(f"the whole check: {whole:.1f} s" + (f" (before {before_whole:.1f} s)" if before else ""))
    print()
    for (kernel, dtype), (fast, mpfr, confirmations, undecided) in sorted(reference_counts(after).items()):
        if fast + mpfr:
            print(f"{kernel} {dtype} exact values: {fast} elements by the fast path, {mpfr} by MPFR "
                  f"({100 * mpfr / (fast + mpfr):.1f} %), {confirmations} confirmations; {undecided} undecided cases")
    print()
    for (kernel, dtype), corners in sorted(spread(after).items()):
        if not any(corners.values()):  # nothing decided: a run its contract turned off, or one declined entirely
            continue
        for name, wanted in (("Lk", LK_CORNERS), ("D", D_CORNERS)):
            counts = ", ".join(f"{c} {corners.get(c, 0)}" for c in wanted)
            print(f"{kernel} {dtype} decided cases by {name}: {counts}")


if __name__ == "__main__":
    main()
