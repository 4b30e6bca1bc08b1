"""autograder.claims: the verdicts the chapters print for their measured claims."""
from __future__ import annotations

import pytest

from autograder import claims
from autograder.claims import DOES_NOT_HOLD, HOLDS, INCONCLUSIVE, Sample


def _s(name, *times):
    return Sample(name, tuple(times))


SLOW = _s("slow", 10, 10.5, 11, 11.5, 12)
FAST = _s("fast", 4, 4.2, 4.4, 4.6, 5)
NOISY = _s("noisy", 3, 6, 9, 12, 15)


def test_sample_statistics():
    s = _s("x", 1, 2, 3, 4, 5)
    assert (s.median, s.low, s.high) == (3, 2, 4)
    assert s.spread == pytest.approx(2 / 3)
    once = _s("first call", 7)  # chapter 06 compares one first call with the warm ones
    assert (once.low, once.median, once.high) == (7, 7, 7)


@pytest.mark.parametrize("slow, fast, margin, verdict", [
    (SLOW, FAST, 2.0, HOLDS),
    (SLOW, FAST, 3.0, INCONCLUSIVE),       # faster, but under the margin
    (FAST, SLOW, 1.0, DOES_NOT_HOLD),      # the "fast" one is clearly slower
    (SLOW, NOISY, 1.0, INCONCLUSIVE),      # quartiles overlap
])
def test_faster(capsys, slow, fast, margin, verdict):
    assert claims.faster("f is faster", slow, fast, margin=margin) == verdict
    line = capsys.readouterr().out.strip()
    assert line.startswith(f"claim: f is faster: {verdict} (")


def test_similar():
    assert claims.similar("same", SLOW, _s("b", 10, 11, 11, 12, 12)) == HOLDS
    assert claims.similar("same", SLOW, FAST, within=1.5) == DOES_NOT_HOLD
    assert claims.similar("same", _s("a", 5, 5, 5, 5, 5), _s("b", 3, 4, 8, 12, 13), within=1.5) == INCONCLUSIVE


def test_flat_and_grows():
    flat = [_s("1", 1, 1, 1), _s("2", 1.1, 1.2, 1.3), _s("3", 0.9, 1, 1.1)]
    steep = [_s("1", 1, 1, 1), _s("2", 3, 3, 3), _s("3", 9, 9, 9)]
    assert claims.flat("flat", [1, 2, 3], flat) == HOLDS
    assert claims.flat("flat", [1, 2, 3], steep) == DOES_NOT_HOLD
    assert claims.grows("grows", [1, 2, 3], steep) == HOLDS
    assert claims.grows("grows", [1, 2, 3], flat) == INCONCLUSIVE
    assert claims.grows("grows", [1, 3], [steep[2], steep[0]]) == DOES_NOT_HOLD


def test_claim_accepts_booleans_and_records(capsys):
    before = len(claims.RECORD)
    assert claims.claim("a", True, "e") == HOLDS
    assert claims.claim("b", False, "e") == DOES_NOT_HOLD
    assert claims.claim("c", None, "e") == INCONCLUSIVE
    assert claims.equal("d", 2, 2, what="compiles") == HOLDS
    import numpy as np
    assert claims.claim("e", np.float32(2) > 1, "numpy") == HOLDS
    assert claims.claim("f", np.int32(0) > 1, "numpy") == DOES_NOT_HOLD
    del claims.RECORD[-2:]
    assert [v for _, v, _ in claims.RECORD[before:]] == [HOLDS, DOES_NOT_HOLD, INCONCLUSIVE, HOLDS]
    assert "claim: b: does not hold (e)" in capsys.readouterr().out
    with pytest.raises(ValueError):
        claims.claim("x", "maybe", "e")


def test_interleaved_times_every_candidate_round_robin():
    order = []
    out = claims.interleaved({"a": lambda: order.append("a"), "b": lambda: order.append("b")},
                             repeats=4, warmup=1)
    assert set(out) == {"a", "b"} and all(len(s.times) == 4 for s in out.values())
    assert order[:2] == ["a", "b"]              # the warm-up round
    assert order[2:] == ["a", "b", "b", "a", "a", "b", "b", "a"]   # rotated each round
    with pytest.raises(ValueError):
        claims.interleaved({"a": lambda: 0}, repeats=2)


def test_mostly_counts_trials():
    assert claims.mostly("ready", [True] * 9 + [False]) == HOLDS
    assert claims.mostly("not ready", [False] * 10, expected=False) == HOLDS
    assert claims.mostly("ready", [False] * 9 + [True]) == DOES_NOT_HOLD
    assert claims.mostly("ready", [True] * 6 + [False] * 4) == INCONCLUSIVE
    assert claims.mostly("ready", [True] * 6 + [False] * 4, at_least=0.6) == HOLDS
    with pytest.raises(ValueError):
        claims.mostly("ready", [])
    with pytest.raises(ValueError):
        claims.mostly("ready", [True], at_least=0.5)


def test_smaller_needs_something_measured(capsys):
    assert claims.smaller("less", 100, 400, factor=4) == HOLDS
    assert claims.smaller("less", 101, 400, factor=4) == DOES_NOT_HOLD
    assert claims.smaller("less", 0, 400, factor=4) == HOLDS
    assert claims.smaller("less", 0, 0, factor=2) == INCONCLUSIVE   # 0 against 0: nothing measured
    assert "inconclusive (nothing measured on this backend: 0 against 0 bytes)" in capsys.readouterr().out.splitlines()[-1]
