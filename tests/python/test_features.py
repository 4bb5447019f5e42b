"""Features a Python function declares (window, softcap, ALiBi, sinks, mask) reach it as keyword arguments, in
process and isolated; the features that change the tensors' layout are refused with what to do instead."""
import pytest

import attncheck
import kernels
from conftest import FAST

FEATURE_PROPERTIES = ["window", "softcap", "alibi", "sinks", "attn_mask"]


@pytest.mark.parametrize("isolate", [False, True])
def test_a_function_implementing_its_declared_features_passes_their_properties(isolate):
    report = attncheck.check(kernels.attention_with_features, dtypes=["f32", "bf16"],
                             properties=FEATURE_PROPERTIES + ["accuracy"], contract=kernels.FEATURES,
                             isolate=isolate, **FAST)
    assert report.passed, report.summary()
    assert all(p.cases > 0 for p in report.properties)


def test_a_function_ignoring_its_softcap_fails_the_softcap_property():
    report = attncheck.check(kernels.attention_ignores_softcap, dtypes=["f32"], properties=["softcap"],
                             contract=kernels.FEATURES, **FAST)
    assert report.verdict == "fail", report.summary()


def test_an_approximate_tanh_fails_explained_by_its_declaration_and_passes_when_declared():
    undeclared = attncheck.check(kernels.attention_approximate_tanh, dtypes=["f32"], properties=["softcap"],
                                 contract=kernels.FEATURES, **FAST)
    assert undeclared.verdict == "fail", undeclared.summary()
    # The narrowest first: a looser declaration (a float16 q·k) may cover the small case too.
    assert [e["declaration"] for e in undeclared.counterexamples[0].explained_by][0] == "tanh=approx"
    assert "explained by the declaration tanh=approx" in undeclared.counterexamples[0].describe()
    declared = attncheck.check(kernels.attention_approximate_tanh, dtypes=["f32", "bf16"],
                               properties=["softcap", "accuracy"], contract={**kernels.FEATURES, "tanh": "approx"},
                               **FAST)
    assert declared.passed, declared.summary()


def test_undeclared_features_are_never_sent():
    report = attncheck.check(kernels.attention, dtypes=["f32"], properties=FEATURE_PROPERTIES, **FAST)
    assert all(p.verdict == "unsupported" for p in report.properties)


def test_features_that_change_the_layout_are_refused_with_what_to_do():
    with pytest.raises(ValueError, match="exec protocol"):
        attncheck.check(kernels.attention, contract={"features": ["window", "varlen"]}, **FAST)
