"""Exact row mixing: after any number of rows, every source's count is within 1 of its share."""

from __future__ import annotations

import random
from collections import Counter
from fractions import Fraction

import numpy as np
import pytest

from niels_gpt.training.round_robin import ScheduledRoundRobin, SmoothRoundRobin, integer_weights
from niels_gpt.training.schedule import Schedule


def worst_miss(which: np.ndarray, rr: SmoothRoundRobin) -> float:
    """max over sources and prefixes n of |count_i(n) - q_i n|, exactly (Fractions)."""
    n = np.arange(1, len(which) + 1)
    worst = Fraction(0)
    for i, w in enumerate(rr.weights):
        counts = np.cumsum(which == i)
        miss = np.abs(counts * rr.total - w * n)  # ints: |count - q n| * W
        worst = max(worst, Fraction(int(miss.max()), rr.total))
    return worst


def test_weights_are_the_decimals_the_user_wrote():
    assert integer_weights([0.784, 0.196, 0.02]) == [196, 49, 5]
    assert integer_weights([0.1, 0.7, 0.2]) == [1, 7, 2]
    assert integer_weights([0.5]) == [1]
    with pytest.raises(ValueError, match=r"weights must all be > 0, got \[0.5, 0.0\]"):
        integer_weights([0.5, 0.0])


@pytest.mark.parametrize("seed", range(40))
def test_every_prefix_is_within_one_of_its_share(seed):
    rng = random.Random(seed)
    k = rng.randint(1, 9)
    p = [rng.random() ** 3 + 1e-4 for _ in range(k)]
    p = [round(x / sum(p), rng.choice([2, 3, 6, 17])) or 0.01 for x in p]
    rr = SmoothRoundRobin(p)
    which = np.concatenate([rr.assign(rng.randint(1, 64)) for _ in range(60)])
    bound = 1 - Fraction(1, 2 * k - 2) if k > 1 else 0
    assert worst_miss(which, rr) <= bound < 1


def test_weights_that_defeat_the_largest_credit_rule_are_mixed_within_one():
    # nginx's smooth weighted round-robin (pick the largest credit) misses these by 1.25 rows
    p = [3, 100, 1, 1, 100, 1, 100]
    rr = SmoothRoundRobin([x / 306 for x in p])
    assert worst_miss(rr.assign(612), rr) <= 1 - Fraction(1, 12)


def test_credits_come_back_to_zero_after_a_period_and_counts_follow():
    rr = SmoothRoundRobin([0.6, 0.3, 0.1])
    which = rr.assign(10)
    assert rr.total == 10 and rr.credits == [0, 0, 0] and np.bincount(which).tolist() == [6, 3, 1]
    which = np.concatenate([which, rr.assign(7)])
    assert sum(rr.credits) == 0 and rr.counts(17) == np.bincount(which, minlength=3).tolist()
    assert np.array_equal(which[10:], which[:7])  # the same credits give the same rows


def test_restored_credits_continue_exactly_and_chunking_does_not_matter():
    p = [0.784, 0.196, 0.02]
    whole = SmoothRoundRobin(p).assign(5000)
    chunked = SmoothRoundRobin(p)
    first = np.concatenate([chunked.assign(32) for _ in range(50)])
    restored = SmoothRoundRobin(p, credits=list(chunked.credits))
    assert np.array_equal(np.concatenate([first, restored.assign(3400)]), whole)


def test_returned_rows_are_the_callers_to_keep():
    rr = SmoothRoundRobin([0.5, 0.5])
    a = rr.assign(4)
    a[:] = 9  # must not reach the memo of the next period
    rr.assign(4)
    assert rr.assign(4).tolist() == SmoothRoundRobin([0.5, 0.5]).assign(4).tolist() != [9] * 4


@pytest.mark.parametrize("credits", [[1, 0], [12, -12, 0], [20, -20], [1.0, -1.0], [True, -1]])
def test_credits_that_are_no_state_are_refused(credits):
    with pytest.raises(ValueError, match="not a state of these"):
        SmoothRoundRobin([0.25, 0.75] if len(credits) == 2 else [0.2, 0.3, 0.5], credits=credits)


def test_credits_that_do_not_fit_the_row_count_are_refused():
    rr = SmoothRoundRobin([0.25, 0.75])
    rr.assign(3)
    assert rr.counts(3) == [1, 2]
    with pytest.raises(ValueError, match="do not fit 4 rows"):
        rr.counts(4)


def random_schedule(rng: random.Random, names: list[str], last_step: int) -> Schedule:
    """Breakpoints with weights of three decimals, zeros among them (sources that stop and start), some ramps."""

    def weights():
        raw = [rng.choice([0, 0, 1, 2, 3, 5, 7, 10]) for _ in names]
        raw[rng.randrange(len(names))] += 1
        p = [1000 * w // sum(raw) for w in raw[:-1]]
        return dict(zip(names, [x / 1000 for x in (*p, 1000 - sum(p))]))

    steps = sorted(rng.sample(range(1, last_step), rng.randint(0, 4)))
    return Schedule([(0, weights()), *((s, weights()) for s in steps)], names=names)


def counting(run, used: Counter, way: str):
    def counted(self, *args):
        done = run(self, *args)
        used[way] += done
        return done

    return counted


@pytest.mark.parametrize("seed", range(4))
def test_assign_many_gives_the_rows_and_credits_of_one_step_at_a_time(seed, monkeypatch):
    """Ramps in closed form, flat stretches by their period: the same rows as assign() step by step, the same
    position after, and the same rows after that (random schedules with jumps, zero weights and clamps)."""
    rng = random.Random(seed)
    used = Counter()
    for way in ("_ramp_run", "_cycle_run"):  # count the batches each fast path assigned
        monkeypatch.setattr(ScheduledRoundRobin, way, counting(getattr(ScheduledRoundRobin, way), used, way))
    for _ in range(60):
        names = [f"s{i}" for i in range(rng.randint(1, 4))]
        schedule = random_schedule(rng, names, 900)
        B, steps = rng.choice([1, 3, 8, 64]), rng.randint(1, 1_200)
        one, many = ScheduledRoundRobin(schedule), ScheduledRoundRobin(schedule)
        expected = np.stack([one.assign(B, s) for s in range(steps + 20)])
        got, s = [], 0
        while s < steps:
            count = min(rng.randint(1, 300), steps - s)
            got.append(many.assign_many(B, s, count))
            s += count
        assert one.position() != () and np.array_equal(np.concatenate(got), expected[:steps])
        assert np.array_equal(np.stack([many.assign(B, s) for s in range(steps, steps + 20)]), expected[steps:])
    assert used["_ramp_run"] > 1_000 and used["_cycle_run"] > 1_000  # both fast paths ran
