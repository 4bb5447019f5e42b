#!/usr/bin/env python3
"""Misbehaving exec-protocol peers for the adapter's tests (no NumPy needed). Usage: peer.py MODE [ARG]

  no_hello        prints nothing on stdout, only a stderr line, and waits
  wrong_version   says 'attncheck-exec 2'
  no_ready        says 'attncheck-exec 1' and a kernel line, then waits
  garbled         answers 'okay' to every request
  missing_out     answers 'ok' without writing anything
  wrong_shape     writes out.npy of shape ARG (e.g. 1,2,3,5) and lse.npy [1,2,3] float32, answers 'ok'
  hang            never answers a request
  crash           on a request: a stderr line, then exit status 3
  crash_once      like crash when the file ARG does not exist (and creates it); else answers 'unsupported again'
  answers         answers 'unsupported no float16 here' to float16 requests, else 'error kernel exploded'
  chatty          per request: 1 MiB on stderr, a file left in $TMPDIR, answers 'unsupported TMPDIR=<its $TMPDIR>'
  poke_gate       answers 'unsupported mem=allowed|denied signal=allowed|denied': whether it could open the memory of
                  the gate (the parent of its process group's leader, the shell) for writing, and signal it
  features        declares every feature (ABI 1.2); logs each request (its directory as DIR) and the .npy files it
                  finds there ('name descr shape') to the file ARG; forward copies q.npy to out.npy (D = Dv) and
                  writes dropout_mask.npy [B,Hq,Lq,Lk] (element n: n % 3 == 0) when dropout is on; backward copies
                  q, k, v to dq, dk, dv
"""
import ast
import mmap
import shutil
import os
import struct
import sys
import time

LONG = 3600


def send(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def hello(contract=""):
    send("attncheck-exec 1")
    send("kernel peer forward backward" + contract)
    send("ready")


def npy_header(path):
    """descr and shape of a .npy file (version 1.0, as attncheck writes it)."""
    with open(path, "rb") as f:
        head = f.read(10)
        h = ast.literal_eval(f.read(struct.unpack("<H", head[8:10])[0]).decode())
    return h["descr"], tuple(h["shape"])


def features(line, log):
    """The features mode: log the request and its files, write the outputs."""
    d = line[line.index(" /") + 1:]
    verb = line.split(" ")[0]
    files = sorted(n for n in os.listdir(d) if n.endswith(".npy"))
    with open(log, "a") as f:
        f.write(line.replace(d, "DIR") + "\n")
        for n in files:
            descr, shape = npy_header(os.path.join(d, n))
            f.write("%s %s %s\n" % (n, descr, shape))
    if verb == "forward":
        shutil.copy(os.path.join(d, "q.npy"), os.path.join(d, "out.npy"))
        if "dropout_p=" in line:
            B, Hq, Lq, _ = npy_header(os.path.join(d, "q.npy"))[1]
            Lk = npy_header(os.path.join(d, "k.npy"))[1][2]
            write_npy(os.path.join(d, "dropout_mask.npy"), "|u1", (B, Hq, Lq, Lk),
                      bytes(int(n % 3 == 0) for n in range(B * Hq * Lq * Lk)))
    else:
        for a, b in (("q", "dq"), ("k", "dk"), ("v", "dv")):
            shutil.copy(os.path.join(d, a + ".npy"), os.path.join(d, b + ".npy"))
    send("ok")


def write_npy(path, descr, shape, data=None):
    """A .npy 1.0 written by hand, zero-filled (4-byte elements) unless `data` is given."""
    n = 1
    for d in shape:
        n *= d
    dims = ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "")
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (descr, dims)
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
        f.write(b"\x00" * (n * 4) if data is None else data)


def poke_gate():
    """Whether this process may open the gate's memory for writing, and signal it (signal 0 only asks)."""
    with open("/proc/%d/stat" % os.getpgid(0)) as f:
        gate = int(f.read().rsplit(")", 1)[1].split()[1])
    try:
        os.close(os.open("/proc/%d/mem" % gate, os.O_RDWR))
        mem = "allowed"
    except OSError:
        mem = "denied"
    try:
        os.kill(gate, 0)
        signal = "allowed"
    except OSError:
        signal = "denied"
    return "mem=%s signal=%s" % (mem, signal)


def main():
    mode = sys.argv[1]
    arg = sys.argv[2] if len(sys.argv) > 2 else ""
    if mode == "no_hello":
        sys.stderr.write("peer: thinking about it\n")
        sys.stderr.flush()
        time.sleep(LONG)
        return
    if mode == "wrong_version":
        send("attncheck-exec 2")
        sys.stdin.read()
        return
    if mode == "no_ready":
        send("attncheck-exec 1")
        send("kernel peer forward")
        time.sleep(LONG)
        return
    if mode == "crash_once" and os.path.exists(arg):
        mode = "again"
    hello(" features=window+softcap+alibi+sinks+mask+varlen+paged+dropout+fp8" if mode == "features" else "")
    reserved = []  # mode reserve: the mappings it keeps
    for raw in sys.stdin:
        fields = raw.rstrip("\n").split(" ", 5)
        if fields[0] == "quit":
            return
        d = fields[5] if len(fields) == 6 else ""
        if mode == "features":
            features(raw.rstrip("\n"), arg)
        elif mode == "garbled":
            send("okay")
        elif mode == "missing_out":
            send("ok")
        elif mode == "wrong_shape":
            shape = [int(x) for x in arg.split(",")]
            write_npy(os.path.join(d, "out.npy"), "<f4", shape)
            write_npy(os.path.join(d, "lse.npy"), "<f4", shape[:3])
            send("ok")
        elif mode == "hang":
            time.sleep(LONG)
        elif mode == "slow":  # answers after `arg` seconds
            time.sleep(float(arg))
            send("unsupported slow")
        elif mode in ("crash", "crash_once"):
            if mode == "crash_once":
                open(arg, "w").close()
            sys.stderr.write("peer: segfault in my_kernel.cu:42\n")
            sys.stderr.flush()
            sys.exit(3)
        elif mode == "hog":
            # Touches `arg` MiB: under a lower memory limit the allocation fails and the kernel says so.
            try:
                block = bytearray(int(arg) * 1024 * 1024)
                send("error hog: allocated %d bytes" % len(block))
            except MemoryError:
                send("error hog: out of memory")
        elif mode == "reserve":
            # Reserves `arg` MiB of address space it never writes (PROT_NONE), as CUDA builds of frameworks do: no
            # memory, so no limit should see it.
            try:
                reserved.append(mmap.mmap(-1, int(arg) << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, prot=0))
                send("unsupported reserved %d MiB" % (len(reserved) * int(arg)))
            except OSError as e:
                send("error reserve: %s" % e)
        elif mode == "oom_death":  # dies as a Python kernel does when an allocation fails outside a try
            sys.stderr.write("MemoryError: Unable to allocate 8.00 GiB for an array\n")
            sys.stderr.flush()
            sys.exit(1)
        elif mode == "crash_every_other":  # crashes on every other call, across restarts (`arg`: a marker file)
            if os.path.exists(arg):
                os.remove(arg)
                send("unsupported survived")
            else:
                open(arg, "w").close()
                sys.exit(3)
        elif mode == "again":
            send("unsupported again")
        elif mode == "chatty":  # 1 MiB of stderr and a file in $TMPDIR per call; answers with $TMPDIR
            for _ in range(1024):
                sys.stderr.write("x" * 1023 + "\n")
            sys.stderr.flush()
            with open(os.path.join(os.environ.get("TMPDIR", "/tmp"), "left-behind-%d" % os.getpid()), "w") as f:
                f.write("x" * 4096)
            send("unsupported TMPDIR=" + os.environ.get("TMPDIR", ""))
        elif mode == "poke_gate":
            send("unsupported " + poke_gate())
        elif mode == "answers":
            send("unsupported no float16 here" if fields[2] == "float16" else "error kernel exploded")


if __name__ == "__main__":
    main()
