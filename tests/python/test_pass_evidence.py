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


def test_properties_that_set_dv_equal_to_lk_decide_their_cases_on_a_function_that_declines_dv_other_than_d():
    # variance_normalization and sum_to_one set v = I (Dv = Lk): without D = Lk too, every case would be declined.
    report = attncheck.check(kernels.attention_declines_dv, dtypes=["f32"], profile="quick", quiet=True,
                             properties=["accuracy", "variance_normalization", "sum_to_one"],
                             shape_pool=_core.AUTO_SHAPE_POOL, framework="numpy")
    assert report.passed, report.summary()
    for p in report.properties:
        assert p.verdict == "pass" and p.cases - p.undecided >= 10, report.summary()


def test_the_summary_says_why_a_property_the_function_declined_entirely_was_not_checked():
    def no_causal(q, k, v, *, scale, causal):
        if causal:
            raise attncheck.Unsupported("causal masking is not implemented")
        return kernels.attention(q, k, v, scale=scale, causal=causal)

    report = attncheck.check(no_causal, dtypes=["f32"], profile="quick", quiet=True,
                             properties=["accuracy", "causal"], framework="numpy")
    [causal] = [p for p in report.properties if p.id == "causal"]
    assert causal.verdict == "unsupported" and "declined all" in causal.note, report.summary()
    assert f"causal: unsupported — {causal.note}" in report.summary()
