"""The counterexample corpus from Python: check(corpus=DIR) keeps every counterexample and replays it first, so that a
bug seed 1 found is caught by seed 2, which misses it alone; after the fix the corpus case passes and prune_corpus
drops it. The pytest option --attncheck-corpus passes the corpus to attncheck_assert. Everything goes through the C++
gate (attncheck._core): Python reads the lines and fields it returns."""
import json
import os
import subprocess

import pytest

import attncheck
from conftest import EXAMPLES, NEVER_BINDS
from kernels import attention

#: Three accuracy cases in float32: seed 1 finds drops_a_key's bug, seed 2 misses it (asserted below).
PLAN = dict(dtypes="f32", properties=["accuracy"], profile="quick", cases=3, quiet=True, time_budget=NEVER_BINDS,
            name="demo")


def drops_a_key(q, k, v, *, scale, causal):
    """A planted bug that only some shapes show: with three or more keys, the last key's values are read as zero."""
    if k.shape[2] >= 3:
        v = v.copy()
        v[:, :, -1, :] = 0
    return attention(q, k, v, scale=scale, causal=causal)


def fixed(q, k, v, *, scale, causal):
    """drops_a_key fixed: checked under the same name ("demo"), as a fixed kernel is."""
    return attention(q, k, v, scale=scale, causal=causal)


def test_a_bug_found_with_seed_1_is_caught_by_seed_2_through_the_corpus(tmp_path):
    corpus = tmp_path / "corpus"
    assert attncheck.check(drops_a_key, seed=2, **PLAN).passed  # seed 2 alone misses the bug
    first = attncheck.check(drops_a_key, seed=1, corpus=corpus, **PLAN)
    assert not first.passed and first.counterexamples[0].corpus_entry is None
    entries = attncheck.corpus_entries(corpus)
    assert len(entries) == 1 and "  demo  f32  accuracy  fail  B=" in entries[0]
    entry = entries[0].split()[0]
    assert sorted(os.listdir(corpus)) == [entry + ".json"]
    assert json.loads((corpus / (entry + ".json")).read_text())["kernel"] == "demo"

    caught = attncheck.check(drops_a_key, seed=2, corpus=corpus, **PLAN)
    assert not caught.passed and caught.verdict == "fail"
    [cx] = caught.counterexamples
    assert cx.corpus_entry == entry and cx.property == "accuracy"
    assert f"from the corpus: entry {entry}" in caught.summary()
    [accuracy] = caught.properties
    assert (accuracy.corpus_replayed, accuracy.corpus_passed) == (1, 0)
    # The CLI lists the same corpus.
    cli = os.environ.get("ATTNCHECK_CLI")
    if cli:
        listed = subprocess.run([cli, "corpus", str(corpus)], capture_output=True, text=True)
        assert listed.returncode == 0 and listed.stdout.splitlines() == entries

    # While the bug is there, prune keeps the entry; once fixed, the corpus case passes and prune drops it.
    [(line, dropped)] = attncheck.prune_corpus(corpus, drops_a_key, name="demo")
    assert not dropped and line.startswith("kept     " + entry)
    passing = attncheck.check(fixed, seed=2, corpus=corpus, **PLAN)
    assert passing.passed
    [accuracy] = passing.properties
    assert (accuracy.corpus_replayed, accuracy.corpus_passed) == (1, 1)
    [(line, dropped)] = attncheck.prune_corpus(corpus, fixed, name="demo")
    assert dropped and line.startswith("dropped  " + entry) and line.endswith("(passes now)")
    assert attncheck.corpus_entries(corpus) == []


def test_an_empty_corpus_changes_nothing(tmp_path):
    for fn in (drops_a_key, fixed):
        empty = tmp_path / fn.__name__  # a fresh one each: the failing check adds its counterexample to it
        empty.mkdir()
        plain = attncheck.check(fn, seed=1, **PLAN)
        with_empty = attncheck.check(fn, seed=1, corpus=empty, **PLAN)
        assert with_empty.content == plain.content
        assert with_empty.exit_code == plain.exit_code


def test_a_missing_or_corrupt_corpus_is_one_clear_error(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        attncheck.corpus_entries(tmp_path / "missing")
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / ("0" * 32 + ".json")).write_text("{")
    with pytest.raises(ValueError, match="corpus entry: truncated or malformed JSON"):
        attncheck.corpus_entries(corpus)
    with pytest.raises(ValueError, match="corpus entry: truncated or malformed JSON"):
        attncheck.check(fixed, seed=1, corpus=corpus, **PLAN)


TESTS = f'''
import sys
sys.path.insert(0, {EXAMPLES!r})
sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})
from test_corpus import PLAN, drops_a_key

def test_demo(attncheck_assert):
    attncheck_assert(drops_a_key, **{{k: v for k, v in PLAN.items() if k != "profile"}})
'''


def test_the_pytest_option_gives_attncheck_assert_the_corpus(pytester, tmp_path):
    pytester.makepyfile(test_demo=TESTS)
    corpus = tmp_path / "corpus"
    alone = pytester.runpytest_subprocess("-q", "--attncheck-seed", "2")
    alone.assert_outcomes(passed=1)
    found = pytester.runpytest_subprocess("-q", "--attncheck-seed", "1", "--attncheck-corpus", str(corpus))
    found.assert_outcomes(failed=1)
    [entry] = [line.split()[0] for line in attncheck.corpus_entries(corpus)]
    caught = pytester.runpytest_subprocess("-q", "--attncheck-seed", "2", "--attncheck-corpus", str(corpus))
    caught.assert_outcomes(failed=1)
    assert f"from the corpus: entry {entry}" in caught.stdout.str()
