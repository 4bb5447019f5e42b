"""attncheck from Python in ten lines: a correct NumPy attention passes, one without the 1/√d scale fails.

    pip install .            # from the attncheck repository (scripts/run build installs the C++ dependencies)
    python examples/python/quickstart.py
"""
import attncheck
from numpy_attention import attention, attention_unscaled

good = attncheck.check(attention, dtypes=["f32"], profile="quick")
bad = attncheck.check(attention_unscaled, dtypes=["f32"], profile="quick")
print(f"correct attention: {good.verdict}\nunscaled attention: {bad.verdict}\n")
print(bad.counterexamples[0])  # the shrunk counterexample, with its inputs
assert good.passed and not bad.passed
