"""attncheck: property-based verification of scaled dot-product attention kernels.

    import attncheck, numpy as np

    def attention(q, k, v, *, scale, causal):          # q [B,Hq,Lq,D], k [B,Hkv,Lk,D], v [B,Hkv,Lk,Dv]
        ...
        return out                                      # or (out, lse)

    report = attncheck.check(attention, dtypes=["f32"], profile="quick")
    assert report.passed, report.summary()

The checks, the arbitrary-precision reference, the error bounds and the shrinking are attncheck's C++ core — the same
as the `attncheck check` command; this package hands it a NumPy, PyTorch or JAX function.
"""
from ._core import __version__
from ._api import check, corpus_entries, properties, prune_corpus
from ._infer import Inferred, infer
from ._judge import Judgment, TensorJudgment, judge
from ._shrink import Shrunk, shrink
from ._kernel import Unsupported
from ._report import Counterexample, PropertyResult, Replay, Report, ShapeResult
from . import testing  # attncheck.testing.assert_attention after a plain `import attncheck`

__all__ = ["check", "corpus_entries", "prune_corpus", "infer", "Inferred", "judge", "Judgment", "TensorJudgment",
           "shrink", "Shrunk", "properties", "Report", "PropertyResult", "ShapeResult", "Counterexample", "Replay",
           "Unsupported", "testing", "__version__"]
