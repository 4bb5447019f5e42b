#!/usr/bin/env python3
"""npy_roundtrip.py IN OUT_V1 OUT_V2: loads IN with numpy (checks C order), saves it with numpy.save as OUT_V1 and
as a version 2.0 file OUT_V2 — files attncheck must read."""
import sys

import numpy as np

a = np.load(sys.argv[1])
assert a.flags["C_CONTIGUOUS"], "attncheck wrote a non-C-order array"
np.save(sys.argv[2], a)
with open(sys.argv[3], "wb") as f:
    np.lib.format.write_array(f, a, version=(2, 0))
print(a.dtype.str, a.shape)
