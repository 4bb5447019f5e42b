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
"""
import os
import struct
import sys
import time

LONG = 3600


def send(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def hello():
    send("attncheck-exec 1")
    send("kernel peer forward backward")
    send("ready")


def write_npy(path, descr, shape):
    """A zero-filled .npy 1.0 written by hand."""
    n = 1
    for d in shape:
        n *= d
    dims = ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "")
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (descr, dims)
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
        f.write(b"\x00" * (n * 4))


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
    hello()
    for raw in sys.stdin:
        fields = raw.rstrip("\n").split(" ", 5)
        if fields[0] == "quit":
            return
        d = fields[5] if len(fields) == 6 else ""
        if mode == "garbled":
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
        elif mode == "answers":
            send("unsupported no float16 here" if fields[2] == "float16" else "error kernel exploded")


if __name__ == "__main__":
    main()
