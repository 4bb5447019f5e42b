"""No vacuous passes: under a shape pool (JAX's default) a function that declines shapes gets shapes it accepts,
and a pass needs decided cases on at least three distinct shapes — else the verdict is undecided, with the reason."""
import attncheck
import kernels
from attncheck import _core


def check_pooled(fn):
    return attncheck.check(fn, dtypes=["f32"], properties=["accuracy"], profile="quick", cases=20, quiet=True,
                           shape_pool=_core.AUTO_SHAPE_POOL, framework="numpy")


def test_a_function_that_declines_dv_other_than_d_passes_on_at_least_three_accepted_shapes():
    kernels.RAN_SHAPES.clear()
    report = check_pooled(kernels.attention_declines_dv)
    assert report.passed, report.summary()
    assert len(kernels.RAN_SHAPES) >= 3
    assert all(s[5] == s[6] for s in kernels.RAN_SHAPES)


def test_a_function_whose_declines_leave_two_shapes_is_undecided_with_the_reason():
    report = check_pooled(kernels.attention_one_key_only)
    assert report.verdict == "undecided" and not report.passed
    [accuracy] = report.properties
    assert accuracy.verdict == "undecided"
    assert "distinct shapes (at least 3 needed)" in accuracy.note and "declined" in accuracy.note
    assert "raise the shape pool" in accuracy.note
    assert accuracy.note in report.summary()
