"""Measured claims in the chapters: every sentence that states what a cell measured is backed by
one verdict line computed from that measurement (the rule of CONTRIBUTING.md's checklist)::

    claim: <what is claimed>: holds (<evidence>)
    claim: <what is claimed>: does not hold (<evidence>)
    claim: <what is claimed>: inconclusive (<why>)

Timings are taken so that a busy 2-core laptop gives the same verdict as an idle machine:
:func:`interleaved` runs the candidates round-robin (a burst of load hits all of them alike),
blocks on every result, and keeps every sample; the verdicts compare medians *and* quartiles, so a
claim "holds" only when the whole middle half of the samples agrees, "does not hold" only when it
clearly disagrees, and is "inconclusive" in between. ``make test`` fails on any "does not hold".

Typical use in a chapter::

    t = claims.interleaved({"three dispatches": lambda: step3(w, x, y),
                            "one fused program": lambda: fused(w, x, y)})
    claims.faster("one fused program beats three dispatches", t["three dispatches"],
                  t["one fused program"], margin=1.1)
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable

HOLDS = "holds"
DOES_NOT_HOLD = "does not hold"
INCONCLUSIVE = "inconclusive"
VERDICTS = (HOLDS, DOES_NOT_HOLD, INCONCLUSIVE)

#: every verdict printed in this process, in order: ``(claim, verdict, evidence)``
RECORD: list[tuple[str, str, str]] = []


@dataclass(frozen=True)
class Sample:
    """The timings of one candidate: every sample (seconds), its median and quartiles."""

    name: str
    times: tuple[float, ...] = field(repr=False)

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    @property
    def low(self) -> float:
        """The first quartile (25th percentile)."""
        return _quartiles(self.times)[0]

    @property
    def high(self) -> float:
        """The third quartile (75th percentile)."""
        return _quartiles(self.times)[2]

    @property
    def spread(self) -> float:
        """Interquartile range relative to the median (0.1 means the middle half is within 10%)."""
        return (self.high - self.low) / self.median if self.median > 0 else float("inf")

    def __str__(self) -> str:
        return f"{self.name}: {format_seconds(self.median)} (middle half {format_seconds(self.low)}-{format_seconds(self.high)})"


def _quartiles(times) -> list[float]:
    """The three quartiles, interpolated as NumPy's default does; a single sample is all three (a
    chapter compares one first call with many warm ones)."""
    return statistics.quantiles(times, n=4, method="inclusive") if len(times) > 1 else list(times) * 3


def format_seconds(s: float) -> str:
    """``12.3 µs``-style formatting."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if abs(s) >= scale:
            return f"{s / scale:.3g} {unit}"
    return f"{s / 1e-9:.3g} ns"


def _block(x):
    import jax

    return jax.block_until_ready(x)


def interleaved(candidates: dict[str, Callable[[], Any]], repeats: int = 15, warmup: int = 2,
                number: int = 1, block: bool = True) -> dict[str, Sample]:
    """Time each zero-argument callable ``repeats`` times, round-robin, after ``warmup`` untimed
    rounds (compilation excluded). Each sample is the mean of ``number`` back-to-back calls, each
    blocked on its result when ``block`` (pass ``block=False`` to time dispatch alone). The order
    rotates every round, so no candidate always runs first after a pause."""
    if repeats < 3:
        raise ValueError("repeats must be at least 3: a median and quartiles need samples")
    names = list(candidates)
    for _ in range(warmup):
        for name in names:
            _block(candidates[name]())
    samples: dict[str, list[float]] = {name: [] for name in names}
    for r in range(repeats):
        order = names[r % len(names):] + names[:r % len(names)]
        for name in order:
            f = candidates[name]
            t0 = time.perf_counter()
            for _ in range(number):
                out = f()
                if block:
                    _block(out)
            samples[name].append((time.perf_counter() - t0) / number)
            if not block:
                _block(out)
    return {name: Sample(name, tuple(ts)) for name, ts in samples.items()}


def claim(text: str, verdict: str | bool | None, evidence: str) -> str:
    """Print and record one verdict line. ``verdict`` is one of :data:`VERDICTS`, or ``True``
    (holds), ``False`` (does not hold) or ``None`` (inconclusive). Returns the verdict."""
    import numpy as np

    if isinstance(verdict, np.bool_):  # NumPy's True/False, as a comparison of scalars gives
        verdict = bool(verdict)
    if verdict is True:
        verdict = HOLDS
    elif verdict is False:
        verdict = DOES_NOT_HOLD
    elif verdict is None:
        verdict = INCONCLUSIVE
    if verdict not in VERDICTS:
        raise ValueError(f"a verdict is one of {VERDICTS}, not {verdict!r}")
    RECORD.append((text, verdict, evidence))
    print(f"claim: {text}: {verdict} ({evidence})")
    return verdict


def faster(text: str, slow: Sample, fast: Sample, margin: float = 1.0) -> str:
    """``fast`` takes less time than ``slow`` by at least ``margin`` (a ratio of medians).

    holds: the median ratio is at least ``margin`` and even the pessimistic ratio (slow's first
    quartile over fast's third) is above 1. Does not hold: the optimistic ratio (slow's third
    quartile over fast's first) is below 1, so ``fast`` is clearly the slower one. Otherwise
    inconclusive (the samples overlap, or the gain is real but under the margin)."""
    ratio = slow.median / fast.median
    pessimistic, optimistic = slow.low / fast.high, slow.high / fast.low
    evidence = f"{ratio:.2f}x; {slow}; {fast}"
    if ratio >= margin and pessimistic > 1.0:
        return claim(text, HOLDS, evidence)
    if optimistic < 1.0:
        return claim(text, DOES_NOT_HOLD, evidence)
    why = "the samples overlap" if pessimistic <= 1.0 else f"faster, but under the {margin:.2g}x margin"
    return claim(text, INCONCLUSIVE, f"{why}: {evidence}")


def similar(text: str, a: Sample, b: Sample, within: float = 1.5) -> str:
    """``a`` and ``b`` take about the same time: the ratio of medians is within ``within`` either
    way. Does not hold when even the quartiles put them further apart than ``within``;
    inconclusive otherwise."""
    ratio = max(a.median / b.median, b.median / a.median)
    closest = max(a.low / b.high, b.low / a.high)  # the smallest separation the quartiles allow
    return _within(text, ratio, closest, within, f"{ratio:.2f}x apart; {a}; {b}")


def flat(text: str, sizes, samples: list[Sample], within: float = 2.0) -> str:
    """A line is flat: the medians over ``sizes`` stay within a factor ``within`` of each other.
    Does not hold when the quartiles of the extremes are further apart than ``within``."""
    meds = [s.median for s in samples]
    lo_i, hi_i = meds.index(min(meds)), meds.index(max(meds))
    ratio = meds[hi_i] / meds[lo_i]
    separated = samples[hi_i].low / samples[lo_i].high
    return _within(text, ratio, separated, within, f"max/min {ratio:.2f}x over sizes {sizes[0]}..{sizes[-1]} "
                   f"({format_seconds(meds[lo_i])} to {format_seconds(meds[hi_i])})")


def _within(text: str, ratio: float, separated: float, within: float, evidence: str) -> str:
    """The verdict of "these times are within a factor ``within``": holds on the medians' ratio,
    does not hold only when even the closest quartiles (``separated``) are further apart."""
    if ratio <= within:
        return claim(text, HOLDS, evidence)
    if separated > within:
        return claim(text, DOES_NOT_HOLD, evidence)
    return claim(text, INCONCLUSIVE, f"the samples are too spread to tell: {evidence}")


def grows(text: str, sizes, samples: list[Sample], at_least: float = 2.0) -> str:
    """Time grows with size: the last size's median is at least ``at_least`` times the first's,
    and the quartiles agree (last's first quartile above first's third). Does not hold when the
    last is below the first even at the quartiles that favour growth (last's third quartile
    under first's first)."""
    first, last = samples[0], samples[-1]
    ratio = last.median / first.median
    evidence = (f"{ratio:.2f}x from size {sizes[0]} to {sizes[-1]} "
                f"({format_seconds(first.median)} to {format_seconds(last.median)})")
    if ratio >= at_least and last.low > first.high:
        return claim(text, HOLDS, evidence)
    if last.high < first.low:
        return claim(text, DOES_NOT_HOLD, evidence)
    return claim(text, INCONCLUSIVE, f"grows less than {at_least:.2g}x or the samples overlap: {evidence}")


def equal(text: str, observed, expected, what: str = "observed") -> str:
    """An exact, deterministic fact (a compile count, a size, a shape): holds or does not."""
    ok = observed == expected
    return claim(text, HOLDS if ok else DOES_NOT_HOLD, f"{what} {observed!r}, expected {expected!r}")


def smaller(text: str, small: float, large: float, factor: float = 1.0, unit: str = "bytes") -> str:
    """A deterministic measure (bytes of scratch memory, bytes moved) is ``factor`` times smaller:
    holds when ``small * factor <= large``. Nothing measured (``large`` is 0, as a backend that
    reports no scratch memory gives) says nothing either way: inconclusive, never "holds"."""
    evidence = f"{small:,} against {large:,} {unit}"
    if not large > 0:
        return claim(text, INCONCLUSIVE, f"nothing measured on this backend: {evidence}")
    return claim(text, HOLDS if small * factor <= large else DOES_NOT_HOLD,
                 f"{evidence}, {large / small:.2f}x" if small > 0 else evidence)


def mostly(text: str, outcomes, expected=True, at_least: float = 0.8) -> str:
    """A yes/no observation repeated over trials (a result ready when its call returned, a
    program run inline) comes out as ``expected`` in most of them: holds when at least
    ``at_least`` of the trials do, does not hold when at least that share comes out the other
    way, inconclusive in between (a busy machine can flip a few trials)."""
    outcomes = [bool(o) for o in outcomes]
    if not outcomes:
        raise ValueError("mostly needs at least one trial")
    if not 0.5 < at_least <= 1.0:
        raise ValueError("at_least is a share above one half and at most 1")
    share = sum(o == bool(expected) for o in outcomes) / len(outcomes)
    evidence = f"{sum(o == bool(expected) for o in outcomes)} of {len(outcomes)} trials"
    if share >= at_least:
        return claim(text, HOLDS, evidence)
    if 1.0 - share >= at_least:
        return claim(text, DOES_NOT_HOLD, evidence)
    return claim(text, INCONCLUSIVE, f"only {evidence}, {at_least:.0%} needed")
