#!/usr/bin/env python3
"""Markdown table of an attncheck_bench run: GFLOP/s, % of the measured FMA peak, peak extra heap, and the
project's performance targets. Python standard library only.

  python3 bench/run_table.py [--binary PATH] [--save run.json] [-- <benchmark flags, e.g. --benchmark_filter=...>]
  python3 bench/run_table.py --json run.json      # table of a saved run (--benchmark_format=json output)
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_BINARY = os.path.join(HERE, os.pardir, "build-bench", "bench", "attncheck_bench")
GIGA = 1e9

# The shape the targets are stated at, and the targets themselves.
TARGET_SHAPE = ("2048", "128", "full")
MIN_FWD_OF_PEAK = 0.50
MIN_FWD_OVER_EIGEN = 1.5
MIN_HALF_OVER_F32 = 0.85  # f16/bf16 forward within 15% of f32
MIN_BWD_OF_PEAK = 0.30
MAX_MEM_MB = 100.0
MEM_ROW, MEM_L = "flash_f32_fwd_mem", "16384"


def parse_name(run_name):
    """'flash_f32_fwd/L:2048/D:128/full/min_time:0.200/real_time' -> ('flash_f32_fwd', L, D, mask)."""
    parts = run_name.split("/")
    fields = dict(p.split(":", 1) for p in parts[1:] if ":" in p)
    mask = next((p for p in parts[1:] if p in ("full", "causal")), "")
    if parts[0] == "fma_peak":  # fma_peak/<isa>: the ISA stands in the shape column
        return parts[0], parts[1], "", ""
    return parts[0], fields.get("L", ""), fields.get("D", ""), mask


def load_rows(doc):
    """One entry per benchmark: the 'max' aggregate (FMA peak: best of repetitions), else the median of user
    repetitions, else the fastest iteration run."""
    by_key, order = {}, []
    for b in doc.get("benchmarks", []):
        key = b.get("run_name", b["name"])
        if key not in by_key:
            by_key[key] = []
            order.append(key)
        by_key[key].append(b)
    rows = []
    for key in order:
        cands = by_key[key]
        pick = None
        for agg in ("max", "median"):
            pick = pick or next((b for b in cands if b.get("aggregate_name") == agg), None)
        if pick is None:
            runs = [b for b in cands if b.get("run_type", "iteration") == "iteration"] or cands
            pick = max(runs, key=lambda b: b.get("FLOPS", 0.0))
        row, L, D, mask = parse_name(key)
        rows.append({
            "row": row, "L": L, "D": D, "mask": mask,
            "flops": None if pick.get("error_occurred") else pick.get("FLOPS"),
            "mb": None if pick.get("error_occurred") else pick.get("peak_extra_MB"),
            "note": pick.get("error_message") if pick.get("error_occurred") else pick.get("label", ""),
        })
    return rows


ROW_ORDER = ["fma_peak", "flash_f32_fwd", "flash_f16_fwd", "flash_bf16_fwd", "eigen_f32_fwd", "naive_f32_fwd",
             "flash_f32_bwd", "flash_f16_bwd", "flash_bf16_bwd", "flash_f32_fwd_mem"]


def row_order(r):
    """Registration order (repetitions run interleaved, so the JSON order is random): the peak, then by shape."""
    def num(x):
        return int(x) if x.isdigit() else 0
    rank = ROW_ORDER.index(r["row"]) if r["row"] in ROW_ORDER else len(ROW_ORDER)
    return (r["row"] == MEM_ROW, r["row"] != "fma_peak", num(r["L"]), num(r["D"]), r["mask"] != "full", rank, r["L"])


def run_binary(binary, extra, save):
    with tempfile.TemporaryDirectory() as tmp:
        out = save or os.path.join(tmp, "run.json")
        cmd = [binary, "--benchmark_out=" + out, "--benchmark_out_format=json", *extra]
        # Repetitions of different rows run in random order: a neighbour's burst on a shared machine then lowers
        # one repetition of several rows instead of every repetition of one row (each row reports its best).
        if not any(a.startswith("--benchmark_enable_random_interleaving") for a in extra):
            cmd.append("--benchmark_enable_random_interleaving=true")
        # The console report goes to stderr as progress; stdout carries only the table.
        subprocess.run(cmd, stdout=sys.stderr, check=True)
        with open(out) as f:
            return json.load(f)


def fmt(x, spec):
    return "—" if x is None else format(x, spec)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", help="read a saved JSON run instead of running the binary")
    ap.add_argument("--binary", default=DEFAULT_BINARY, help="attncheck_bench (default: build-bench/bench/...)")
    ap.add_argument("--save", help="also keep the JSON of the run here")
    ap.add_argument("--strict", action="store_true", help="exit 1 when a measured target is missed")
    ap.add_argument("extra", nargs="*", help="flags passed to the binary (after --)")
    args = ap.parse_args()

    if args.json:
        with open(args.json) as f:
            doc = json.load(f)
    else:
        doc = run_binary(args.binary, args.extra, args.save)
    ctx = doc.get("context", {})
    rows = sorted(load_rows(doc), key=row_order)

    peaks = [r for r in rows if r["row"] == "fma_peak" and r["flops"]]
    peak = max(peaks, key=lambda r: r["flops"]) if peaks else None
    peak_flops = peak["flops"] if peak else None

    print(f"Threads: {ctx.get('attncheck_threads', '?')}, B·H = {ctx.get('attncheck_heads', '?')}, "
          f"host: {ctx.get('host_name', '?')}, {ctx.get('num_cpus', '?')} CPUs @ {ctx.get('mhz_per_cpu', '?')} MHz; "
          f"kernels: {ctx.get('attncheck_builtin', '?')}")
    if peak:
        print(f"Measured FMA peak: {peak['flops'] / GIGA:.1f} GFLOP/s ({peak['L']}, best of repetitions)")
    print()
    print("| row | shape | GFLOP/s | % of peak | peak extra MB | note |")
    print("|---|---|---:|---:|---:|---|")
    for r in rows:
        shape = r["L"] if r["row"] == "fma_peak" else f"L={r['L']} D={r['D']} {r['mask']}"
        gf = r["flops"] / GIGA if r["flops"] is not None else None
        pct = 100.0 * r["flops"] / peak_flops if r["flops"] is not None and peak_flops else None
        print(f"| {r['row']} | {shape} | {fmt(gf, '.1f')} | {fmt(pct, '.1f')} | {fmt(r['mb'], '.1f')} | "
              f"{r['note'] or ''} |")

    def get(row, L=TARGET_SHAPE[0], D=TARGET_SHAPE[1], mask=TARGET_SHAPE[2], field="flops"):
        for r in rows:
            if (r["row"], r["L"], r["D"], r["mask"]) == (row, L, D, mask):
                return r[field]
        return None

    def ratio(a, b):
        return a / b if a is not None and b else None

    checks = []  # (what, value, shown as, target text, passed)
    f32 = get("flash_f32_fwd")
    checks.append(("flash f32 fwd / FMA peak", ratio(f32, peak_flops), "%", f"≥ {MIN_FWD_OF_PEAK:.0%}",
                   lambda v: v >= MIN_FWD_OF_PEAK))
    checks.append(("flash f32 fwd / Eigen", ratio(f32, get("eigen_f32_fwd")), "x", f"≥ {MIN_FWD_OVER_EIGEN}×",
                   lambda v: v >= MIN_FWD_OVER_EIGEN))
    for dt in ("f16", "bf16"):
        checks.append((f"flash {dt} fwd / f32 fwd", ratio(get(f"flash_{dt}_fwd"), f32), "x",
                       f"≥ {MIN_HALF_OVER_F32} (within 15%)", lambda v: v >= MIN_HALF_OVER_F32))
    for dt in ("f32", "f16", "bf16"):
        checks.append((f"flash {dt} bwd / FMA peak", ratio(get(f"flash_{dt}_bwd"), peak_flops), "%",
                       f"≥ {MIN_BWD_OF_PEAK:.0%}", lambda v: v >= MIN_BWD_OF_PEAK))
    for D in ("64", "128"):
        checks.append((f"flash f32 fwd L={MEM_L} D={D} peak extra", get(MEM_ROW, MEM_L, D, "full", "mb"), "MB",
                       f"< {MAX_MEM_MB:.0f} MB", lambda v: v < MAX_MEM_MB))

    print()
    print(f"Targets (L={TARGET_SHAPE[0]} D={TARGET_SHAPE[1]} non-causal unless stated):")
    print()
    print("| target | measured | goal | met |")
    print("|---|---:|---|---|")
    missed = False
    for what, v, unit, goal, ok in checks:
        if v is None:
            shown, met = "—", "n/a (not measured)"
        else:
            shown = f"{100 * v:.1f}%" if unit == "%" else (f"{v:.2f}×" if unit == "x" else f"{v:.1f} MB")
            met = "yes" if ok(v) else "**no**"
            missed |= not ok(v)
        print(f"| {what} | {shown} | {goal} | {met} |")
    return 1 if args.strict and missed else 0


if __name__ == "__main__":
    sys.exit(main())
