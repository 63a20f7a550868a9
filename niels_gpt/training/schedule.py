"""Mixture schedules: the weight of every source at every step, exact.

A schedule is a list of breakpoints `[(step, {source: weight}), ...]`: the first at step 0, steps strictly
increasing, each breakpoint's weights >= 0 summing to 1 (within sampling.SUM_TOLERANCE; a source it does not
name has weight 0 there). Between two breakpoints every weight moves linearly with the step; after the last
it stays constant. Fixed weights `{source: weight}` are the schedule `[(0, weights)]`.

Exact values: each breakpoint's weights are read as the decimals Python prints for them (round_robin's
`integer_weights`) and divided by their sum, so the weight q_i(s) of source i at step s is a Fraction, and
`target(n)` = sum of q_i(s) over steps s < n (rows per batch row: times B it is the rows source i is owed
after n batches) is one as well. `at(step)` is the float mixture for random mode (the breakpoint's own
floats at a breakpoint and after the last one, so fixed weights draw exactly as before schedules).

Resume: `first_difference(saved, steps)` compares the breakpoints before the saved step and names the first
that differs (None: later breakpoints may be added, moved or removed freely, a ramp under way redirected);
`spliced(future, at, names)` is the weights a resumed run really has: this schedule's before `at`, `future`'s
from `at` on (exact: the weights at at - 1 are kept as Fractions, saved as 'n/d' strings).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

from niels_gpt.sampling import SUM_TOLERANCE

Weights = dict[str, float]


def _decimal(x) -> Fraction:
    """A weight as an exact number: a Fraction as it is (spliced histories), a float as the decimal it prints."""
    return x if isinstance(x, Fraction) else Fraction(repr(float(x)))


def _weight(x):
    """A weight as given: a float, or a Fraction (from a Fraction or its 'n/d' string in a saved state)."""
    if isinstance(x, Fraction):
        return x
    if isinstance(x, str) and "/" in x:
        return Fraction(x)
    return float(x)


def _shown(point) -> str:
    if not isinstance(point, tuple):
        return str(point)
    step, weights = point
    return f"({step}, {{{', '.join(f'{n!r}: {float(w):g}' for n, w in weights.items())}}})"


class Schedule:
    """Breakpoints (step, weights), linear between them, constant after the last (module docstring)."""

    def __init__(self, breakpoints: Sequence[tuple[int, Mapping[str, float]]], names: Sequence[str] | None = None):
        points = []
        for k, point in enumerate(breakpoints):
            if not (isinstance(point, (tuple, list)) and len(point) == 2 and isinstance(point[1], Mapping)):
                raise ValueError(f"schedule breakpoint {k} must be (step, {{source: weight}}), got {point!r}")
            step, weights = point
            if isinstance(step, bool) or not isinstance(step, int) or step < (points[-1][0] + 1 if points else 0):
                after = f"> {points[-1][0]}" if points else ">= 0"
                raise ValueError(f"schedule breakpoint {k}: step must be an int {after}, got {step!r}")
            try:
                weights = {n: _weight(w) for n, w in weights.items()}
            except (TypeError, ValueError, ZeroDivisionError):
                raise ValueError(f"schedule breakpoint {k}: weights must be numbers, got {dict(weights)}") from None
            bad = {n: w for n, w in weights.items() if not isinstance(n, str) or not w >= 0}
            total = float(sum(weights.values()))
            if bad or abs(total - 1.0) > SUM_TOLERANCE:
                where = "" if len(breakpoints) == 1 else f" breakpoint {k} (step {step})"
                raise ValueError(
                    f"loader mixture p{where} must sum to 1 (within {SUM_TOLERANCE}) with every weight >= 0, "
                    f"got {dict(weights)}"
                )
            points.append((step, dict(sorted(weights.items()))))
        if not points or points[0][0] != 0:
            raise ValueError(f"a schedule needs breakpoints starting at step 0, got {list(breakpoints)!r}")
        self.breakpoints = tuple(points)
        self.mentioned = sorted({n for _, w in points for n in w})
        self.names = [n for n in self.mentioned if any(w.get(n, 0.0) > 0 for _, w in points)]
        if names is not None:  # over the sources of a loader, some perhaps with weight 0 throughout
            missing = sorted(set(self.names) - set(names))
            if missing:
                raise ValueError(f"the schedule gives weight to {missing}, which are not among {list(names)}")
            self.names = sorted(names)
        self.steps = [s for s, _ in points]
        self._q = [self._exact(w) for _, w in points]  # each breakpoint's weights as Fractions over names
        self._floats = [
            {n: float(w.get(n, 0.0)) for n in self.names} for _, w in points
        ]  # read-only: at() hands them out
        self._ints = [self._integers(q) for q in self._q]
        self._ramps = [self._ramp(k) for k in range(len(points) - 1)]

    @classmethod
    def of(cls, p: Any) -> Schedule:
        """`p` as a schedule: a Schedule, fixed weights {source: weight}, breakpoints [(step, weights), ...] or
        {step: weights, ...}."""
        if isinstance(p, Schedule):
            return p
        if isinstance(p, Mapping) and p and all(isinstance(v, Mapping) for v in p.values()):
            return cls(sorted(p.items(), key=lambda point: point[0] if isinstance(point[0], int) else -1))
        if isinstance(p, Mapping):
            return cls([(0, p)])
        if isinstance(p, (list, tuple)):
            return cls([tuple(point) if isinstance(point, list) else point for point in p])
        raise TypeError(f"a mixture is {{source: weight}} or a schedule [(step, {{source: weight}}), ...], got {p!r}")

    def _exact(self, weights: Mapping[str, float]) -> tuple[Fraction, ...]:
        decimals = [_decimal(weights.get(n, 0.0)) for n in self.names]
        total = sum(decimals)
        return tuple(d / total for d in decimals)

    @staticmethod
    def _integers(q: Sequence[Fraction]) -> tuple[tuple[int, ...], int]:
        """The smallest integers proportional to q (sum 1) and their sum."""
        total = math.lcm(*(f.denominator for f in q))
        return tuple(int(f * total) for f in q), total

    def _ramp(self, k: int) -> tuple[tuple[int, ...], tuple[int, ...], int]:
        """Segment k's ends over one denominator D: (D * q at its start, D * q at its end, D * length); the
        integers of step s inside it are (end_step - s) * start + (s - start_step) * end, over D * length."""
        a, b = self._q[k], self._q[k + 1]
        common = math.lcm(*(f.denominator for f in a + b))
        start, end = tuple(int(f * common) for f in a), tuple(int(f * common) for f in b)
        return start, end, common * (self.steps[k + 1] - self.steps[k])

    def used(self) -> Schedule:
        """This schedule over the sources with weight > 0 somewhere (the ones a loader opens)."""
        if self.names == self.mentioned:
            return self
        return Schedule([(s, {n: w[n] for n in self.names if n in w}) for s, w in self.breakpoints])

    def weight(self, name: str) -> float:
        """The largest weight `name` has anywhere (for messages)."""
        return max(w.get(name, 0.0) for _, w in self.breakpoints)

    def _segment(self, step: int) -> int:
        """The last breakpoint at or before `step`."""
        if step >= self.steps[-1]:
            return len(self.steps) - 1
        lo, hi = 0, len(self.steps) - 1
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if self.steps[mid] <= step else (lo, mid)
        return lo

    def _constant_at(self, step: int) -> int | None:
        """k if the weights at `step` are breakpoint k's exactly (at it, after the last, or on a flat stretch)."""
        k = self._segment(step)
        if step == self.steps[k] or k == len(self.steps) - 1 or self._q[k] == self._q[k + 1]:
            return k
        return None

    def exact(self, step: int) -> tuple[Fraction, ...]:
        """q_i(step) over `names`, Fractions summing to 1."""
        k = self._constant_at(step)
        if k is not None:
            return self._q[k]
        k = self._segment(step)
        t = Fraction(step - self.steps[k], self.steps[k + 1] - self.steps[k])
        return tuple(a + (b - a) * t for a, b in zip(self._q[k], self._q[k + 1]))

    def integers(self, step: int) -> tuple[tuple[int, ...], int]:
        """q(step) as integers proportional to it and their sum: on a flat stretch the smallest (one object per
        breakpoint), on a ramp over the ramp's denominator (no Fraction arithmetic per step)."""
        k = self._constant_at(step)
        if k is not None:
            return self._ints[k]
        k = self._segment(step)
        start, end, total = self._ramps[k]
        before, after = self.steps[k + 1] - step, step - self.steps[k]
        return tuple(before * a + after * b for a, b in zip(start, end)), total

    def next_breakpoint(self, step: int) -> int | float:
        """The first breakpoint after `step` (inf after the last)."""
        k = self._segment(step)
        return self.steps[k + 1] if k + 1 < len(self.steps) else math.inf

    def ramp(self, step: int) -> tuple[int, int, tuple[int, ...], tuple[int, ...], int] | None:
        """(start, stop, a, b, total) when `step` lies strictly inside a ramp (weights that change every step):
        the weights at step t of start..stop are ((stop - t) * a + (t - start) * b) / total (integers); else None."""
        if self._constant_at(step) is not None:
            return None
        k = self._segment(step)
        a, b, total = self._ramps[k]
        return self.steps[k], self.steps[k + 1], a, b, total

    def flat(self, step: int) -> bool:
        """Whether step `step` has the weights of step - 1 (step 0: of itself): a fact of the weights alone, so
        a breakpoint inserted where the weights already were changes nothing."""
        k = self._constant_at(step)
        if k is None or step == 0:
            return k is not None
        before = self._constant_at(step - 1)
        return before is not None and self._q[before] == self._q[k]

    def at(self, step: int) -> Weights:
        """The float mixture at `step` over `names` (random mode's draw); do not change it (one per breakpoint)."""
        k = self._constant_at(step)
        if k is not None:
            return self._floats[k]
        ints, total = self.integers(step)
        return {name: n / total for name, n in zip(self.names, ints)}  # int / int: correctly rounded

    def target(self, steps: int) -> list[Fraction]:
        """Sum of q_i(s) over s < steps, per source: the rows source i is owed per batch row."""
        total = [Fraction(0)] * len(self.names)
        for k, start in enumerate(self.steps):
            end = self.steps[k + 1] if k + 1 < len(self.steps) else steps
            m = min(end, steps) - start
            if m <= 0:
                break
            if k + 1 < len(self.steps):
                slope_sum = Fraction(m * (m - 1), 2 * (end - start))
                total = [t + m * a + (b - a) * slope_sum for t, a, b in zip(total, self._q[k], self._q[k + 1])]
            else:
                total = [t + m * a for t, a in zip(total, self._q[k])]
        return total

    def _q_of(self, step: int, names: Sequence[str]) -> tuple[Fraction, ...]:
        q = dict(zip(self.names, self.exact(step)))
        return tuple(q.get(n, Fraction(0)) for n in names)

    def first_difference(self, saved: Schedule, steps: int) -> str | None:
        """None if this schedule has `saved`'s breakpoints at every step < `steps` (the ones a run of `steps`
        batches started from; later ones may differ), else the first that differs."""
        mine = [k for k, s in enumerate(self.steps) if s < steps]
        theirs = [k for k, s in enumerate(saved.steps) if s < steps]
        for k in range(max(len(mine), len(theirs))):
            if k >= len(mine) or k >= len(theirs) or not self._same_point(saved, k):
                a = saved.breakpoints[k] if k < len(theirs) else "none"
                b = self.breakpoints[k] if k < len(mine) else "none"
                return f"breakpoint {k} is {_shown(a)} in the state and {_shown(b)} in the loader"
        return None

    def _same_point(self, other: Schedule, k: int) -> bool:
        names = sorted(set(self.names) | set(other.names))
        mine = dict(zip(self.names, self._q[k]))
        theirs = dict(zip(other.names, other._q[k]))
        same_q = all(mine.get(n, 0) == theirs.get(n, 0) for n in names)
        return self.steps[k] == other.steps[k] and same_q

    def spliced(self, future: Schedule, at: int, names: Sequence[str]) -> Schedule:
        """The weights of this schedule at steps < `at` and of `future` from `at` on, exact, over `names`."""
        if at <= 0:
            return Schedule(future.breakpoints, names=names)
        if len(self.steps) == len(future.steps) and all(self._same_point(future, k) for k in range(len(self.steps))):
            return Schedule(self.breakpoints, names=names)  # the same weights: nothing to splice
        points = [(s, w) for s, w in self.breakpoints if s < at - 1]
        points.append((at - 1, dict(zip(self.names, self.exact(at - 1)))))
        points.append((at, dict(zip(future.names, future.exact(at)))))
        points += [(s, w) for s, w in future.breakpoints if s > at]
        return Schedule(points, names=names)

    def state(self) -> list[list]:
        """Plain lists and dicts (JSON- and torch.save-able): [[step, {source: weight}], ...], exact weights as
        'n/d' strings."""
        return [[s, {n: str(v) if isinstance(v, Fraction) else v for n, v in w.items()}] for s, w in self.breakpoints]

    def __eq__(self, other) -> bool:
        return isinstance(other, Schedule) and self.breakpoints == other.breakpoints

    def __hash__(self) -> int:
        return hash(tuple((s, tuple(w.items())) for s, w in self.breakpoints))

    def __repr__(self) -> str:
        if len(self.breakpoints) == 1:
            return repr(self.breakpoints[0][1])
        return "Schedule(" + repr([(s, w) for s, w in self.breakpoints]) + ")"
