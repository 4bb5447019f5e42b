"""check(fn, shapes=...): the user's production shapes in the search — a bug that lives only past 4,096 keys of a
GQA decode row is missed by the generated cases and caught on the declared shape, shrunk; a correct function passes
every shape; presets by name; each shape that does not read is one ValueError line."""
import numpy as np
import pytest

import attncheck
import kernels
from kernels import attention

#: A GQA decode row of a 4:1 model past 4,096 keys, and a windowed prefill (the window reaches fn as window=).
DECODE = {"name": "long decode", "B": 1, "Hq": 8, "Hkv": 2, "Lq": 1, "Lk": 4133, "D": 64}
LOCAL = {"name": "local prefill", "B": 1, "Hq": 4, "Hkv": np.int64(2), "Lq": 48, "Lk": 48, "D": 32, "causal": True,
         "window": (15, 0)}
QUICK = dict(dtypes="f32", cases=15, quiet=True)


def test_a_bug_past_4096_keys_is_missed_by_the_search_and_caught_on_a_declared_shape_then_shrunk():
    fn = kernels.split_kv_past(4096)
    assert attncheck.check(fn, properties=["accuracy"], **QUICK).passed
    r = attncheck.check(fn, properties=["accuracy"], shapes=[DECODE], **QUICK)
    assert not r.passed
    (line,) = r.properties
    assert [s.verdict for s in line.shapes] == ["fail"] and line.shapes[0].ratio > 1
    assert "found on declared shape long decode" in line.note
    shape = r.counterexamples[0].spec
    assert shape["Lk"] > 4096 and shape["Hkv"] == 2  # what the bug needs stays
    assert shape["Hq"] * shape["Lq"] * shape["D"] < DECODE["Hq"] * DECODE["D"]  # the rest shrinks


def test_a_correct_function_passes_every_declared_shape_with_its_window():
    r = attncheck.check(kernels.attention_with_features, properties=["accuracy", "lse", "window"],
                        contract=kernels.FEATURES, shapes=[DECODE, LOCAL], **QUICK)
    assert r.passed, r.summary()
    for line in r.properties:
        assert [s.verdict for s in line.shapes] == ["pass", "pass"], line
        assert all(s.ratio <= 1 and s.spec for s in line.shapes)
    assert "declared shape of attention_with_features f32: long decode" in r.summary()


def test_a_preset_by_name_and_a_shape_the_property_does_not_take():
    r = attncheck.check(attention, properties=["causal"], shapes="gemma-3-1b", **QUICK)
    (line,) = r.properties
    assert [s.shape.split(":")[0] for s in line.shapes] == [
        "gemma-3-1b local prefill", "gemma-3-1b global prefill", "gemma-3-1b local decode"]
    assert all(s.verdict == "unsupported" and "not taken" in s.note for s in line.shapes)


@pytest.mark.parametrize("shapes, message", [
    ("llama-9b", "shapes: 'llama-9b' is neither a preset (llama-3-8b"),
    ([{"Hq": 8, "Lq": 1, "Lk": 4}], 'shapes: shapes[0]: "D" is missing'),
    ([{"Hq": 8, "Hkv": 3, "Lq": 1, "Lk": 4, "D": 8}], "Hq = 8 is not a multiple of Hkv = 3"),
    ([{"Hq": 8, "Lq": 1, "Lk": 4, "D": 8, "window": [1]}], '"window" must be [left, right]'),
    ([{"Hq": object()}], "shapes: a shape's values are numbers"),
])
def test_a_shape_that_does_not_read_is_one_value_error_line(shapes, message):
    with pytest.raises(ValueError) as e:
        attncheck.check(attention, properties=["accuracy"], shapes=shapes, **QUICK)
    assert message in str(e.value) and "\n" not in str(e.value)
