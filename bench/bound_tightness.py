#!/usr/bin/env python3
"""Compares two dumps of attncheck_bound_dump (the same problems' bounds from two builds) element by element and
prints the distribution of new/old: how much looser (> 1) or tighter (< 1) the new error model is.

Usage: bench/bound_tightness.py OLD.bin NEW.bin
Prints one line of quantiles, then `looser_than_1pct=N max_ratio=… min_ratio=…`; elements whose bounds are 0 or
infinite in either are counted apart (they must agree: both 0, or both infinite).
"""
import array
import math
import sys


def read(path):
    a = array.array("d")
    with open(path, "rb") as f:
        a.frombytes(f.read())
    return a


def main(argv):
    if len(argv) != 2:
        sys.exit(__doc__)
    old, new = read(argv[0]), read(argv[1])
    if len(old) != len(new):
        sys.exit(f"bound_tightness: the dumps differ in length ({len(old)} and {len(new)}): not the same problems")
    ratios, disagree, special = [], 0, 0
    for o, n in zip(old, new):
        if o == 0 or n == 0 or math.isinf(o) or math.isinf(n):
            special += 1
            disagree += (o == 0) != (n == 0) or math.isinf(o) != math.isinf(n)
            continue
        ratios.append(n / o)
    ratios.sort()
    if not ratios:
        sys.exit("bound_tightness: no finite positive bound to compare")
    q = lambda f: ratios[min(len(ratios) - 1, int(f * len(ratios)))]
    print(" ".join(f"q{int(f * 1000) / 10:g}={q(f):.9f}" for f in (0, 0.01, 0.1, 0.5, 0.9, 0.99, 0.999)) +
          f" q100={ratios[-1]:.9f}")
    looser = sum(r > 1.01 for r in ratios)
    print(f"compared={len(ratios)} zero_or_inf={special} disagree={disagree} looser_than_1pct={looser} "
          f"max_ratio={ratios[-1]:.9f} min_ratio={ratios[0]:.9f}")


if __name__ == "__main__":
    main(sys.argv[1:])
