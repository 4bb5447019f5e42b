#!/usr/bin/env python3
"""Time to verdict (issue 10): how long `attncheck check` takes to reach a verdict under real costs, measured as a
user meets them — wall-clock time of the CLI, its exit code, and the verdicts it prints. Standard library only.

    python3 bench/time_to_verdict/run.py [--attncheck build/attncheck] [--only NAME,...] [--cap 900] [--out FILE]

Scenarios (--only takes their names, comma-separated or repeated):
  hang_quick    a correct float32 plugin that hangs above 100 keys (hang_above_100_keys of tests/sandbox/misbehaving_plugin.c), --profile quick    target <= 140 s
  hang_default  the same, --profile default                                                             target <= 120 s
  jit           numpy_kernel.py --compile-seconds 3 (a JIT stand-in) --profile default --dtype f32     every property decided
  jit_bug       the same with --bug missing_scale                                       a counterexample, found and shrunk
  jobs          builtin flash f32 --profile default with --jobs 1 and --jobs 2       jobs 2 <= 0.6 x jobs 1, same bytes
  sigint        the bug plugin (bug:no_rescale) --profile default, SIGINT after --sigint-after s
                                                         report.json written and valid; replay accepts each counterexample
A run longer than --cap seconds is stopped (SIGTERM, then SIGKILL 15 s later) and recorded as "killed at cap".
A missed target is recorded and reported, never an error: the script exits 0 unless it could not run at all.
Prints a Markdown table (load: the 1-minute load average before -> after each run, on a shared machine the
first suspect of a slow run); --out FILE writes every number (and the parsed verdict table of each run) as JSON.
"""
import argparse
import datetime
import hashlib
import json
import os
import platform
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
SCENARIOS = ("hang_quick", "hang_default", "jit", "jit_bug", "jobs", "sigint")
VERDICTS = {"pass", "FAIL", "WARN", "undecided", "unsupported", "-"}
TIERS = {"required", "advisory", "off"}
KILL_GRACE_S = 15.0  # after SIGTERM at the cap, before SIGKILL


# ---- processes ----

def descendants(pid):
    """Every live descendant of pid (by /proc parent links), children first found first."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def kill_pids(pids, sig):
    for p in pids:
        try:
            os.kill(p, sig)
        except ProcessLookupError:
            pass


def loadavg():
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


def run(cmd, cap, workdir, tag, sigint_after=None, sigint_group=True):
    """Runs cmd (a list) with stdout and stderr to files; returns wall time, exit code and what happened.
    sigint_after: send SIGINT after that many seconds (to the process group, as a terminal's Ctrl-C does, or to
    the process alone). At cap seconds: SIGTERM to the process, SIGKILL to it and its descendants 15 s later."""
    out_path = os.path.join(workdir, tag + ".stdout")
    err_path = os.path.join(workdir, tag + ".stderr")
    res = {"cmd": cmd, "cap_s": cap, "killed_at_cap": False, "load_before": loadavg()}
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        t0 = time.monotonic()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL, start_new_session=True)
        sigint_at = None
        term_at = None
        seen = set()
        scanned = -1.0
        while True:
            now = time.monotonic() - t0
            try:
                proc.wait(timeout=0.05)
                break
            except subprocess.TimeoutExpired:
                pass
            if now - scanned >= 1.0:  # what it started, to end it should it leave anything behind
                seen.update(descendants(proc.pid))
                scanned = now
            if sigint_after is not None and sigint_at is None and now >= sigint_after:
                sigint_at = now
                if sigint_group:
                    os.killpg(proc.pid, signal.SIGINT)
                else:
                    proc.send_signal(signal.SIGINT)
            if term_at is None and now >= cap:
                term_at = now
                res["killed_at_cap"] = True
                proc.send_signal(signal.SIGTERM)
            if term_at is not None and now >= term_at + KILL_GRACE_S:
                seen.update(descendants(proc.pid))
                proc.kill()
                proc.wait()
                res["sigkill"] = True
                break
        wall = time.monotonic() - t0
    # Whatever it started and left behind (a hung kernel child in its own process group): end it, by pid.
    kill_pids(sorted(p for p in seen if os.path.exists(f"/proc/{p}")), signal.SIGKILL)
    res.update(wall_s=round(wall, 3), rc=proc.returncode, load_after=loadavg(), stdout_file=out_path,
               stderr_file=err_path)
    if sigint_at is not None:
        res["sigint_at_s"] = round(sigint_at, 3)
        res["exit_after_sigint_s"] = round(wall - sigint_at, 3)
    if term_at is not None:
        res["sigterm_at_s"] = round(term_at, 3)
    with open(out_path, encoding="utf-8", errors="replace") as f:
        res["stdout"] = f.read()
    with open(err_path, encoding="utf-8", errors="replace") as f:
        res["stderr_tail"] = f.read().splitlines()[-15:]
    return res


# ---- what the CLI printed ----

CX_RE = re.compile(r"^\s*counterexample (\d+): (\S+) — (.*) \(step (\S+), found after (\d+) cases, (\d+) shrinks\)")
EXEC_RE = re.compile(r"^exec call time: (\d+) first calls of a shape \(compilation\) ([\d.]+) s, "
                     r"(\d+) other calls ([\d.]+) s")


def parse_stdout(text):
    """The verdict table (kernel dtype property tier verdict cases declined undecided worst), the counterexample
    lines and the exec call-time line."""
    rows, cxs, exec_times = [], [], None
    for line in text.splitlines():
        f = line.split()
        if len(f) == 9 and f[3] in TIERS and f[4] in VERDICTS and f[5].isdigit():
            rows.append({"kernel": f[0], "dtype": f[1], "property": f[2], "tier": f[3], "verdict": f[4],
                         "cases": int(f[5]), "declined": int(f[6]), "undecided": int(f[7]), "worst": f[8]})
            continue
        m = CX_RE.match(line)
        if m:
            cxs.append({"failure": int(m[1]), "property": m[2], "case": m[3], "step": m[4],
                        "found_after": int(m[5]), "shrinks": int(m[6])})
            continue
        m = EXEC_RE.match(line)
        if m:
            exec_times = {"first_calls": int(m[1]), "first_s": float(m[2]), "other_calls": int(m[3]),
                          "other_s": float(m[4])}
    return rows, cxs, exec_times


def counts(rows):
    c = {"properties": len(rows), "decided": 0, "undecided": 0, "failed": 0, "warned": 0, "unsupported": 0,
         "off": 0}
    for r in rows:
        v = r["verdict"]
        if v in ("pass", "FAIL", "WARN"):
            c["decided"] += 1
        c["failed"] += v == "FAIL"
        c["warned"] += v == "WARN"
        c["undecided"] += v == "undecided"
        c["unsupported"] += v == "unsupported"
        c["off"] += v == "-"
    return c


def read_report(path):
    """report.json: whether it exists and parses as an attncheck report, its content's sha256, and per property the fields
    that say how a verdict was reached (budget_exhausted, skipped, interrupted)."""
    info = {"path": path, "exists": os.path.exists(path)}
    if not info["exists"]:
        return info
    with open(path, "rb") as f:
        data = f.read()
    info["bytes"] = len(data)
    try:
        doc = json.loads(data)
    except ValueError as e:
        info["valid"] = False
        info["error"] = str(e)
        info["sha256"] = hashlib.sha256(data).hexdigest()
        return info
    info["valid"] = isinstance(doc, dict) and doc.get("format") == "attncheck-report"
    # The hash of the content: report.json less its timing object, the last key (the part that depends on the machine).
    timing = data.rfind(b',\n  "timing": ')
    info["sha256"] = hashlib.sha256(data[:timing] if timing >= 0 else data).hexdigest()
    if not info["valid"]:
        return info
    info["verdict"] = doc.get("verdict")
    info["failures"] = len(doc.get("failures", []))
    props = []
    for r in doc.get("runs", []):
        for p in r.get("properties", []):
            props.append({"kernel": r.get("kernel"), "dtype": r.get("dtype"), "property": p.get("id"),
                          "verdict": p.get("verdict"), "cases": p.get("cases"),
                          "budget_exhausted": p.get("budget_exhausted", False), "skipped": p.get("skipped", 0),
                          "interrupted": p.get("interrupted", False)})
    info["properties"] = props
    info["budget_exhausted"] = sum(1 for p in props if p["budget_exhausted"])
    info["interrupted"] = sum(1 for p in props if p["interrupted"])
    info["skipped_cases"] = sum(p["skipped"] or 0 for p in props)
    return info


# ---- scenarios ----

class Bench:
    def __init__(self, args):
        self.a = args
        self.results = []

    def check(self, tag, extra, cap=None, **kw):
        """One `attncheck check` run with its own report directory; the parsed verdicts attached."""
        report_dir = os.path.join(self.a.workdir, tag)
        cmd = [self.a.attncheck, "check"] + extra + ["--report-dir", report_dir]
        print(f"[{tag}] {' '.join(shlex.quote(c) for c in cmd)}", file=sys.stderr, flush=True)
        r = run(cmd, self.a.cap if cap is None else cap, self.a.workdir, tag, **kw)
        rows, cxs, exec_times = parse_stdout(r["stdout"])
        r.update(scenario=tag, rows=rows, counterexamples=cxs, exec_call_time=exec_times,
                 report=read_report(os.path.join(report_dir, "report.json")))
        r["counts"] = counts(rows)
        r["counts_from"] = "stdout table" if rows else "none (no table printed)"
        if not rows and r["report"].get("valid"):  # killed before the table: what report.json holds
            rows2 = [{"verdict": {"fail": "FAIL", "warn": "WARN"}.get(p["verdict"], p["verdict"])}
                     for p in r["report"]["properties"]]
            r["counts"] = counts(rows2)
            r["counts_from"] = "report.json"
        print(f"[{tag}] {r['wall_s']:.1f} s, exit {r['rc']}" + (" (killed at cap)" if r["killed_at_cap"] else ""),
              file=sys.stderr, flush=True)
        return r

    def add(self, r, target, met, note=""):
        r.update(target=target, met=met, note=note)
        self.results.append(r)

    def hang(self, profile, limit):
        r = self.check(f"hang_{profile}", ["--plugin", self.a.hang_plugin, "--kernel", "hang_above_100_keys",
                                           "--dtype", "f32", "--profile", profile, "--seed", str(self.a.seed)])
        found = [c for c in r["counterexamples"] if c["step"] == "shape"]
        note = ("killed at cap" if r["killed_at_cap"] else
                f"{len(r['counterexamples'])} counterexample(s)" +
                (f", e.g. {found[0]['case']}" if found else ""))
        if r["report"].get("skipped_cases"):
            note += f"; {r['report']['skipped_cases']} cases skipped at/above the hung shape"
        if r["report"].get("budget_exhausted"):
            note += f"; budget exhausted in {r['report']['budget_exhausted']} properties"
        c = r["counts"]
        if c["properties"]:
            note = f"{c['undecided']} of {c['properties']} properties undecided; " + note
        met = not r["killed_at_cap"] and r["wall_s"] <= limit and r["rc"] == 1
        self.add(r, f"<= {limit} s, the hang found (exit 1)", met, note)

    def jit(self, bug):
        kernel = [self.a.python, os.path.join(ROOT, "examples", "exec", "numpy_kernel.py"), "--name", "jit",
                  "--compile-seconds", str(self.a.compile_seconds)]
        if bug:
            kernel += ["--bug", bug]
        tag = "jit_bug" if bug else "jit"
        r = self.check(tag, ["--exec", " ".join(shlex.quote(c) for c in kernel), "--profile", "default",
                             "--dtype", "f32", "--seed", str(self.a.seed)])
        c = r["counts"]
        et = r["exec_call_time"]
        note = "killed at cap; " if r["killed_at_cap"] else ""
        if et:
            note += (f"{et['first_calls']} first calls {et['first_s']:.1f} s, "
                     f"{et['other_calls']} other calls {et['other_s']:.1f} s")
        if r["report"].get("budget_exhausted"):
            note += f"; budget exhausted in {r['report']['budget_exhausted']} properties"
        if bug:
            cx = r["counterexamples"]
            shrunk = [x for x in cx if x["shrinks"] > 0]
            if cx:
                note += f"; {len(cx)} counterexample(s), {len(shrunk)} shrunk, e.g. {cx[0]['property']}: " \
                        f"{cx[0]['case']} ({cx[0]['shrinks']} shrinks)"
            met = not r["killed_at_cap"] and r["rc"] == 1 and bool(shrunk)
            self.add(r, "a counterexample, found and shrunk", met, note)
        else:
            wanted = c["properties"] - c["off"] - c["unsupported"]
            met = not r["killed_at_cap"] and c["properties"] > 0 and c["undecided"] == 0 and c["decided"] == wanted
            self.add(r, "every property decided", met, note)

    def jobs(self):
        with subprocess.Popen([self.a.attncheck, "check", "--help"], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT) as p:
            helptext = p.communicate()[0].decode(errors="replace")
        supported = "--jobs" in helptext
        base = ["--plugin", "builtin", "--kernel", "flash", "--dtype", "f32", "--profile", "default",
                "--seed", str(self.a.seed)]
        runs = {}
        for n in (1, 2):
            if not supported and n == 2:
                break
            tag = f"jobs{n}" if supported else "jobs1_serial"
            r = self.check(tag, base + (["--jobs", str(n)] if supported else []))
            if supported and r["rc"] == 2 and "jobs" in " ".join(r["stderr_tail"]):
                supported = False
                r["note_jobs"] = "the CLI rejected --jobs"
            runs[n] = r
        if not supported:
            # No --jobs: the serial run is the jobs-1 baseline; a second serial run says whether report.json is
            # reproducible at all (the premise of comparing bytes).
            r1 = runs[1]
            r1b = self.check("jobs1_serial_repeat", base)
            same = r1["report"].get("sha256") is not None and r1["report"].get("sha256") == r1b["report"].get("sha256")
            self.add(r1, "jobs 2 <= 0.6 x jobs 1", False,
                     "--jobs not supported by this CLI: serial run (no --jobs) as the jobs-1 time")
            self.add(r1b, "identical report.json", same,
                     f"serial repeat: report.json {'identical to' if same else 'DIFFERS from'} the first serial run")
            self.results.append({"scenario": "jobs2", "cmd": [self.a.attncheck, "check"] + base + ["--jobs", "2"],
                                 "wall_s": None, "rc": None, "counts": None, "target": "jobs 2 <= 0.6 x jobs 1",
                                 "met": False, "note": "not supported (the CLI has no --jobs option)",
                                 "killed_at_cap": False})
            return
        r1, r2 = runs[1], runs[2]
        same = r1["report"].get("sha256") is not None and r1["report"].get("sha256") == r2["report"].get("sha256")
        ratio = r2["wall_s"] / r1["wall_s"] if r1["wall_s"] else None
        self.add(r1, "reference for jobs 2", True, "")
        self.add(r2, "jobs 2 <= 0.6 x jobs 1, identical report.json",
                 bool(ratio is not None and ratio <= 0.6 and same and not r2["killed_at_cap"]),
                 f"jobs2/jobs1 = {ratio:.2f}; report.json {'identical' if same else 'DIFFERS'}"
                 if ratio is not None else "")

    def sigint(self):
        r = self.check("sigint", ["--plugin", self.a.bug_plugin, "--kernel", "bug:no_rescale", "--profile",
                                  "default", "--seed", str(self.a.seed)],
                       sigint_after=self.a.sigint_after, sigint_group=not self.a.sigint_process_only)
        rep = r["report"]
        replays = []
        if rep.get("valid"):
            for k in range(1, rep.get("failures", 0) + 1):
                cmd = [self.a.attncheck, "replay", rep["path"], "--failure", str(k)]
                rr = run(cmd, min(self.a.cap, 300), self.a.workdir, f"sigint_replay{k}")
                first = next((ln for ln in rr["stdout"].splitlines() if ln.strip()), "")
                replays.append({"failure": k, "rc": rr["rc"], "wall_s": rr["wall_s"],
                                "killed_at_cap": rr["killed_at_cap"], "accepted": rr["rc"] in (0, 1, 3),
                                "first_line": first[:200], "stderr_tail": rr["stderr_tail"][-3:]})
        r["replays"] = replays
        accepted = sum(1 for x in replays if x["accepted"])
        if "sigint_at_s" not in r:
            note = f"finished before the SIGINT ({r['wall_s']:.1f} s)"
        else:
            note = f"SIGINT at {r['sigint_at_s']:.1f} s, exited {r['exit_after_sigint_s']:.1f} s later"
        note += "; report.json " + ("missing" if not rep["exists"] else "valid" if rep.get("valid") else "INVALID")
        if rep.get("valid"):
            note += (f", {rep['failures']} counterexample(s), replay accepted {accepted}/{len(replays)}"
                     f" (exit codes {[x['rc'] for x in replays]}); {rep['interrupted']} properties interrupted")
        met = bool(rep.get("valid")) and accepted == len(replays) and "sigint_at_s" in r
        self.add(r, "valid report.json, replay accepts each counterexample", met, note)


# ---- output ----

def short_cmd(cmd, workdir):
    parts = []
    skip = False
    for c in cmd:
        if skip:
            skip = False
            continue
        if c == "--report-dir":  # every check has its own; the JSON has the paths
            parts.append("--report-dir DIR")
            skip = True
            continue
        parts.append(shlex.quote(c.replace(ROOT + os.sep, "").replace(workdir + os.sep, "DIR/")))
    return " ".join(parts)


def markdown(results, workdir):
    lines = ["| scenario | command | wall s | exit | decided / undecided / failed | target | met | load | notes |",
             "| --- | --- | ---: | ---: | --- | --- | --- | --- | --- |"]
    for r in results:
        c = r.get("counts")
        dec = f"{c['decided']} / {c['undecided']} / {c['failed']}" if c else "—"
        if c and c.get("properties") == 0:
            dec = "— (no table)"
        wall = "—" if r.get("wall_s") is None else f"{r['wall_s']:.1f}"
        if r.get("killed_at_cap"):
            wall += f" (killed at cap {r['cap_s']:g} s)"
        rc = "—" if r.get("rc") is None else str(r["rc"])
        cmd = "`" + short_cmd(r["cmd"], workdir).replace("|", "\\|") + "`"
        lb, la = r.get("load_before"), r.get("load_after")
        load = f"{lb:.1f} → {la:.1f}" if lb is not None and la is not None else "—"
        lines.append(f"| {r['scenario']} | {cmd} | {wall} | {rc} | {dec} | {r['target']} | "
                     f"{'yes' if r['met'] else 'no'} | {load} | {r.get('note', '').replace('|', '/')} |")
    return "\n".join(lines)


def python_with_numpy():
    for py in (sys.executable, "/usr/bin/python3", "python3"):
        try:
            if subprocess.run([py, "-c", "import numpy"], capture_output=True).returncode == 0:
                return py
        except OSError:
            pass
    return "python3"


def sha256_file(path):
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--attncheck", default=os.path.join(ROOT, "build", "attncheck"))
    ap.add_argument("--hang-plugin",
                    default=os.path.join(ROOT, "build", "tests", "sandbox", "libattncheck_misbehaving_plugin.so"))
    ap.add_argument("--bug-plugin", default=os.path.join(ROOT, "build", "tests", "support", "libattncheck_bug_plugin.so"))
    ap.add_argument("--python", default=None, help="python3 with NumPy for the JIT stand-in (default: the first found)")
    ap.add_argument("--only", action="append", default=[], help=f"scenarios, of {', '.join(SCENARIOS)}")
    ap.add_argument("--cap", type=float, default=900.0, help="seconds before a run is killed (default 900)")
    ap.add_argument("--sigint-after", type=float, default=2.0, help="seconds before the SIGINT (default 2)")
    ap.add_argument("--sigint-process-only", action="store_true",
                    help="SIGINT to attncheck alone (default: its process group, as Ctrl-C in a terminal)")
    ap.add_argument("--compile-seconds", type=float, default=3.0, help="the JIT stand-in's compile time per shape (default 3)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workdir", help="where reports and outputs go (default: a new temporary directory)")
    ap.add_argument("--out", help="write every number as JSON here")
    a = ap.parse_args()

    only = [s for o in a.only for s in o.split(",") if s] or list(SCENARIOS)
    unknown = [s for s in only if s not in SCENARIOS]
    if unknown:
        ap.error(f"unknown scenario {', '.join(unknown)}; the scenarios are {', '.join(SCENARIOS)}")
    a.attncheck = os.path.abspath(a.attncheck)
    a.hang_plugin = os.path.abspath(a.hang_plugin)
    a.bug_plugin = os.path.abspath(a.bug_plugin)
    if not os.access(a.attncheck, os.X_OK):
        sys.exit(f"run.py: {a.attncheck} is not an executable: build it (make attncheck) or pass --attncheck")
    a.python = a.python or python_with_numpy()
    a.workdir = os.path.abspath(a.workdir or tempfile.mkdtemp(prefix="attncheck-ttv-"))
    os.makedirs(a.workdir, exist_ok=True)

    b = Bench(a)
    started = datetime.datetime.now().astimezone()
    for s in only:
        try:
            if s == "hang_quick":
                # The quick guard is 120 s (issue 22: 4x its plan on the slowest bundled run; 20 s when issue 10
                # set 60 s): a hang may cost the guard plus a call timeout and the shrunk hang's confirmation.
                b.hang("quick", 140)
            elif s == "hang_default":
                b.hang("default", 120)
            elif s in ("jit", "jit_bug"):
                b.jit("missing_scale" if s == "jit_bug" else None)
            elif s == "jobs":
                b.jobs()
            elif s == "sigint":
                b.sigint()
        except Exception as e:  # a scenario that cannot run is recorded, the others go on
            b.results.append({"scenario": s, "cmd": [], "wall_s": None, "rc": None, "counts": None,
                              "target": "", "met": False, "note": f"could not run: {type(e).__name__}: {e}",
                              "killed_at_cap": False})

    table = markdown(b.results, a.workdir)
    print(table)
    if a.out:
        meta = {"date": started.isoformat(timespec="seconds"), "machine": platform.node(),
                "cpus": os.cpu_count(), "cpu": next((ln.split(":", 1)[1].strip() for ln in
                                                     open("/proc/cpuinfo") if ln.startswith("model name")), None),
                "attncheck": a.attncheck, "attncheck_sha256": sha256_file(a.attncheck),
                "attncheck_mtime": datetime.datetime.fromtimestamp(os.path.getmtime(a.attncheck)).isoformat(
                    timespec="seconds"),
                "hang_plugin": a.hang_plugin, "bug_plugin": a.bug_plugin, "python": a.python,
                "cap_s": a.cap, "sigint_after_s": a.sigint_after, "compile_seconds": a.compile_seconds,
                "seed": a.seed, "workdir": a.workdir}
        results = []
        for r in b.results:
            r = dict(r)
            r.pop("stdout", None)
            results.append(r)
        with open(a.out, "w") as f:
            json.dump({"meta": meta, "results": results, "markdown": table}, f, indent=2)
            f.write("\n")
        print(f"\nJSON: {a.out}; outputs and reports under {a.workdir}", file=sys.stderr)


if __name__ == "__main__":
    main()
