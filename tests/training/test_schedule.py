"""Mixture schedules: breakpoints, linear between them, constant after; fixed weights are the one-breakpoint case
(same batches); in epoch mode the rows of each source over any window of steps follow its summed weight; epoch
orders continue across weight changes; random mode draws by p(step); resume mid-ramp in a new process, with
later breakpoints edited, and a changed past refused naming the first differing breakpoint."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import torch

from niels_gpt.sampling import derive_seed, draw_sources
from niels_gpt.training.epoch_mixer import EpochMixer, source_seed
from niels_gpt.training.epoch_order import RankCursor
from niels_gpt.training.loader import MixedLoader
from niels_gpt.training.round_robin import ScheduledRoundRobin
from niels_gpt.training.schedule import Schedule
from tests.training.test_epoch_mixer import Items, digest, next_arrays

ROOT = Path(__file__).resolve().parents[2]
P = {"fineweb_edu": 0.5, "wikitext": 0.3, "gutenberg": 0.2}  # the sources of loader_caches
# warm up on wikitext, ramp to the mix by step 10, anneal gutenberg away by step 30; roam never (not built)
RAMP = [
    (0, {"wikitext": 1.0}),
    (4, {"wikitext": 1.0, "roam": 0.0}),
    (10, P),
    (30, {"fineweb_edu": 0.6, "wikitext": 0.4}),
]
T, B, N, M = 64, 8, 13, 17  # N = 13: the state is saved in the middle of the ramp from 10 to 30


def loader(root, mode: str, p=RAMP, **kw) -> MixedLoader:
    return MixedLoader.pretrain(root, p=p, T=T, B=B, seed=7, mode=mode, **kw)


# -- the schedule --------------------------------------------------------------------------------------
def test_weights_are_linear_between_breakpoints_and_constant_after_the_last():
    s = Schedule([(0, {"a": 1.0}), (10, {"a": 0.5, "b": 0.5}), (20, {"b": 1.0})])
    assert s.names == ["a", "b"] and s.at(0) == {"a": 1.0, "b": 0.0} and s.at(5) == {"a": 0.75, "b": 0.25}
    assert s.exact(15) == (Fraction(1, 4), Fraction(3, 4)) and s.at(20) == s.at(10**9) == {"a": 0.0, "b": 1.0}
    for n in (0, 1, 9, 10, 11, 25, 40):  # the closed form against the plain sum
        assert s.target(n) == [sum((s.exact(k)[i] for k in range(n)), Fraction(0)) for i in range(2)]
    assert (
        Schedule.of({"a": 0.5, "b": 0.5})
        == Schedule.of([(0, {"a": 0.5, "b": 0.5})])
        == Schedule.of([[0, {"a": 0.5, "b": 0.5}]])
    )
    assert Schedule.of({0: {"a": 1.0}, 10: {"b": 1.0}}) == Schedule([(0, {"a": 1.0}), (10, {"b": 1.0})])


@pytest.mark.parametrize(
    "points, message",
    [
        ([(1, {"a": 1.0})], "breakpoints starting at step 0"),
        ([(0, {"a": 1.0}), (0, {"a": 1.0})], "breakpoint 1: step must be an int > 0"),
        ([(0, {"a": 1.0}), (5, {"a": 0.5})], r"breakpoint 1 \(step 5\) must sum to 1"),
        ([(0, {"a": 1.5, "b": -0.5})], "loader mixture p must sum to 1 .* with every weight >= 0"),
        ([(0, [0.5, 0.5])], r"breakpoint 0 must be \(step, \{source: weight\}\)"),
    ],
)
def test_a_malformed_schedule_is_refused_with_one_message(points, message):
    with pytest.raises(ValueError, match=message):
        Schedule(points)


@pytest.mark.parametrize("mode", ["random", "epoch"])
def test_fixed_weights_are_the_one_breakpoint_schedule(loader_caches, mode):
    a, b = loader(loader_caches, mode, p=P), loader(loader_caches, mode, p=[(0, P)])
    assert digest([next(a) for _ in range(20)]) == digest([next(b) for _ in range(20)])
    assert a.state_dict() == b.state_dict()


# -- exactness -----------------------------------------------------------------------------------------
def deviations(schedule: Schedule, B: int, steps: int) -> np.ndarray:
    """(steps + 1, K) rows read less B times the summed weight, after each step, as floats of exact values."""
    rr = ScheduledRoundRobin(schedule)
    read = np.zeros(len(schedule.names), dtype=np.int64)
    out = [[0.0] * len(schedule.names)]
    for step in range(steps):
        which = rr.assign(B, step)
        assert len(which) == B
        read += np.bincount(which, minlength=len(schedule.names))
        out.append([float(r - B * t) for r, t in zip(read.tolist(), schedule.target(step + 1))])
    return np.array(out)


def worst(dev: np.ndarray) -> tuple[float, float]:
    """(worst |deviation| from step 0, worst over any window of steps: max - min of a source's deviation)."""
    return float(np.abs(dev).max()), float((dev.max(0) - dev.min(0)).max())


def random_weights(rng: random.Random, names: list[str]) -> dict[str, float]:
    raw = {n: (0 if rng.random() < 0.3 else rng.randint(1, 20)) for n in names}
    raw[rng.choice(names)] += 1
    weights = {n: round(v / sum(raw.values()), 3) for n, v in raw.items()}
    top = max(weights, key=weights.get)
    weights[top] = round(1 - sum(v for n, v in weights.items() if n != top), 3)
    return weights


@pytest.mark.parametrize(
    "points",
    [
        [(0, {"a": 0.5, "b": 0.3, "c": 0.2}), (7, {"a": 0.1, "b": 0.1, "c": 0.8}), (20, {"a": 0.4, "b": 0.6})],
        [(0, {"a": 0.9, "b": 0.1}), (5, {"a": 0.0, "b": 1.0})],  # a goes to 0 and stays there
        [(0, {"a": 1.0, "b": 0.0}), (3, {"a": 1.0}), (11, {"a": 0.3, "b": 0.7})],  # b starts at 0
        [(0, {"a": 0.784, "b": 0.196, "c": 0.02}), (1, {"c": 1.0}), (2, {"a": 0.5, "b": 0.5})],  # jumps
    ],
)
@pytest.mark.parametrize("B", [1, 3, 8, 32])
def test_rows_over_any_window_follow_the_summed_weight(points, B):
    dev = deviations(Schedule(points), B, 60)
    prefix, window = worst(dev)
    assert prefix < 1 and window < 2


def test_rows_follow_the_summed_weight_under_random_schedules():
    rng, worst_prefix, worst_window = random.Random(0), 0.0, 0.0
    for _ in range(120):
        names = [chr(97 + i) for i in range(rng.randint(2, 6))]
        steps = sorted(rng.sample(range(1, 40), rng.randint(0, 4)))
        schedule = Schedule([(s, random_weights(rng, names)) for s in [0, *steps]])
        prefix, window = worst(deviations(schedule, rng.choice([1, 2, 5, 8, 32, 64]), 50))
        worst_prefix, worst_window = max(worst_prefix, prefix), max(worst_window, window)
    assert worst_prefix < 1 and worst_window < 2, (worst_prefix, worst_window)


@pytest.mark.parametrize("rank, world_size", [(0, 1), (1, 2)])
def test_each_sources_epoch_order_continues_across_weight_changes(rank, world_size):
    points = [(0, {"a": 0.0, "b": 1.0}), (3, {"a": 0.7, "b": 0.3}), (9, {"a": 0.1, "b": 0.9}), (12, {"b": 1.0})]
    mixer = EpochMixer({"a": Items(7, 0), "b": Items(5, 100)}, points, seed=3, rank=rank, world_size=world_size)
    cursors = {n: RankCursor(k, source_seed(3, n), rank=rank, world_size=world_size) for n, k in (("a", 7), ("b", 5))}
    read = {"a": [], "b": []}
    for step in range(20):
        which, (values, _) = next_arrays(mixer, 4, step)
        read["a"] += values[which == 0].tolist()
        read["b"] += (values[which == 1] - 100).tolist()
    for name in ("a", "b"):  # each source's rows are its cursor's items in order: none repeated, none skipped
        assert read[name] == cursors[name].take(len(read[name])).tolist()
    assert len(read["a"]) > 7 // world_size and mixer.epochs()["a"] >= 1


# -- random mode ---------------------------------------------------------------------------------------
def test_random_draws_follow_the_weights_of_their_step(loader_caches):
    mixed = loader(loader_caches, "random")
    names = mixed.names
    for step in (0, 5, 13, 29, 40):
        g = torch.Generator().manual_seed(derive_seed(7, step, 0))
        _, want = draw_sources(mixed.schedule.at(step), B, g)
        assert torch.equal(mixed.batch_at(step).source, want)
    warmup = torch.cat([mixed.batch_at(s).source for s in range(5)])
    annealed = torch.cat([mixed.batch_at(s).source for s in range(30, 60)])
    assert set(warmup.tolist()) == {names.index("wikitext")} and names.index("gutenberg") not in annealed.tolist()


# -- resume --------------------------------------------------------------------------------------------
CASES = [(mode, rank, world) for mode in ("random", "epoch") for rank, world in ((0, 1), (1, 2))]


def resume_all(root: str, folder: str) -> None:
    """In a new process: load each case's JSON state into a new loader and save its next M batches' digest."""
    for mode, rank, world in CASES:
        name = f"{mode}-{rank}-{world}"
        fresh = loader(Path(root), mode, rank=rank, world_size=world)
        fresh.load_state_dict(json.loads((Path(folder) / f"{name}.json").read_text()))
        (Path(folder) / f"{name}.out").write_text(digest([next(fresh) for _ in range(M)]))


def test_n_plus_m_batches_equal_n_save_new_process_load_m_in_the_middle_of_a_ramp(loader_caches, tmp_path):
    expected = {}
    for mode, rank, world in CASES:
        name = f"{mode}-{rank}-{world}"
        straight = loader(loader_caches, mode, rank=rank, world_size=world)
        expected[name] = digest([next(straight) for _ in range(N + M)][N:])
        saver = loader(loader_caches, mode, rank=rank, world_size=world)
        for _ in range(N):
            next(saver)
        (tmp_path / f"{name}.json").write_text(json.dumps(saver.state_dict()))
    code = f"import tests.training.test_schedule as t; t.resume_all({str(loader_caches)!r}, {str(tmp_path)!r})"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for name, want in expected.items():
        assert (tmp_path / f"{name}.out").read_text() == want, name


AT_13 = {"fineweb_edu": 0.515, "wikitext": 0.315, "gutenberg": 0.17}  # RAMP's weights at step 13
EDITED = [  # the same weights at steps 0-12 (the ramp ends where it stood at 13), another future
    [(0, {"wikitext": 1.0}), (4, {"wikitext": 1.0}), (10, P), (13, AT_13)],
    [*RAMP[:3], (13, AT_13), (14, {"fineweb_edu": 1.0})],
]


@pytest.mark.parametrize("mode", ["random", "epoch"])
@pytest.mark.parametrize("future", EDITED, ids=["ramp-removed", "ramp-cut-and-jump"])
def test_later_breakpoints_may_change_and_the_batches_follow_the_new_future(loader_caches, mode, future):
    saver = loader(loader_caches, mode)
    for _ in range(N):
        next(saver)
    state = json.loads(json.dumps(saver.state_dict()))
    resumed = loader(loader_caches, mode, p=future)
    resumed.load_state_dict(state)
    straight = loader(loader_caches, mode, p=future)
    want = [next(straight) for _ in range(N + M)][N:]
    assert digest([next(resumed) for _ in range(M)]) == digest(want)


def test_a_source_added_later_resumes_from_the_start_of_its_order(loader_caches):
    early = [(0, {"wikitext": 0.5, "gutenberg": 0.5})]
    saver = loader(loader_caches, "epoch", p=early)
    for _ in range(N):
        next(saver)
    later = [*early, (N, {"wikitext": 0.5, "gutenberg": 0.5}), (N + 5, P)]
    resumed = loader(loader_caches, "epoch", p=later)
    resumed.load_state_dict(json.loads(json.dumps(saver.state_dict())))
    straight = loader(loader_caches, "epoch", p=later)
    want = [next(straight) for _ in range(N + M)][N:]
    assert digest([next(resumed) for _ in range(M)]) == digest(want) and "fineweb_edu" in resumed.names


@pytest.mark.parametrize("mode", ["random", "epoch"])
def test_a_ramp_under_way_may_be_redirected_and_the_weights_from_the_saved_step_follow(loader_caches, mode):
    state = saved_state(loader_caches, mode)
    moved_end = [*RAMP[:3], (40, {"gutenberg": 1.0})]  # the ramp from step 10, now slower and elsewhere
    resumed = loader(loader_caches, mode, p=moved_end)
    resumed.load_state_dict(state)
    spliced = Schedule(RAMP).spliced(Schedule(moved_end), N, resumed.names)  # RAMP before 13, moved_end after
    assert [spliced.exact(s) for s in (12, 13, 20)] == [
        Schedule(RAMP).used().exact(12),
        Schedule(moved_end).exact(13),
        Schedule(moved_end).exact(20),
    ]
    straight = loader(loader_caches, mode, p=spliced)
    want = [next(straight) for _ in range(N + M)][N:]
    assert digest([next(resumed) for _ in range(M)]) == digest(want)
    again = loader(loader_caches, mode, p=moved_end)  # and that state resumes in its turn
    again.load_state_dict(json.loads(json.dumps(resumed.state_dict())))
    assert digest([next(again) for _ in range(5)]) == digest([next(resumed) for _ in range(5)])


def saved_state(root, mode: str) -> dict:
    saver = loader(root, mode)
    for _ in range(N):
        next(saver)
    return json.loads(json.dumps(saver.state_dict()))


@pytest.mark.parametrize("mode", ["random", "epoch"])
def test_a_schedule_that_changes_the_past_is_refused_naming_the_breakpoint(loader_caches, mode):
    state = saved_state(loader_caches, mode)
    moved_start = [*RAMP[:2], (11, P), RAMP[3]]  # the ramp to P ended at 11 instead of 10
    with pytest.raises(ValueError) as e:
        loader(loader_caches, mode, p=moved_start).load_state_dict(state)
    assert str(e.value) == (
        "refusing to resume at step 13: the loader's schedule changes the past: breakpoint 2 is (10, {'fineweb_edu': "
        "0.5, 'gutenberg': 0.2, 'wikitext': 0.3}) in the state and (11, {'fineweb_edu': 0.5, 'gutenberg': 0.2, "
        "'wikitext': 0.3}) in the loader; keep the breakpoints before step 13 as saved and edit only later ones"
    )
    with pytest.raises(ValueError, match=r"breakpoint 0 is \(0, \{'wikitext': 1\}\) in the state"):
        loader(loader_caches, mode, p=P).load_state_dict(state)
    state["fingerprint"]["schedule"] = "tampered"
    with pytest.raises(ValueError, match="the state's schedule is not one"):
        loader(loader_caches, mode).load_state_dict(state)
