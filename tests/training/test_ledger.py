"""The data-order ledger of epoch mode: carried in the state (small), recomputed on load; a changed mixer, a
tampered ledger or position is refused naming where the histories part; resumes after an edited future
resume again."""

from __future__ import annotations

import json
import re
from functools import partial

import numpy as np
import pytest
import torch

from niels_gpt.training import random_mixer, round_robin
from niels_gpt.training.epoch_mixer import EpochMixer
from niels_gpt.training.ledger import WINDOW, Ledger, first_parting
from tests.training.test_epoch_mixer import Items, digest
from tests.training.test_schedule import AT_13, RAMP, loader

N, M = 13, 17


def saved(root, p=RAMP, steps: int = N) -> dict:
    mixed = loader(root, "epoch", p=p)
    for _ in range(steps):
        next(mixed)
    return json.loads(json.dumps(mixed.state_dict()))


def test_the_state_carries_a_small_ledger_with_marks_at_powers_of_two_and_short_digests_near_anchors():
    p = [(0, {"a": 0.7, "b": 0.3}), (50_000, {"a": 0.7, "b": 0.3}), (60_000, {"a": 0.2, "b": 0.8})]
    mixer = EpochMixer({"a": Items(10**9, 0), "b": Items(10**6, 0)}, p, seed=0, rank=0, world_size=1)
    mixer.skip(64, 0, 100_000)
    ledger = mixer.state()["ledger"]
    assert ledger["steps"] == 100_000 and sorted(map(int, ledger["marks"])) == [2**k for k in range(17)] + [100_000]
    runs = [(first, len(digits) // 8) for first, digits in ledger["fine"]]  # 4-byte digests, in hex
    assert runs == [(1, WINDOW), (50_000, WINDOW + 1), (60_000, WINDOW + 1), (100_000 - WINDOW, WINDOW + 1)]
    assert len(json.dumps(ledger)) < 2_500


def parted(n: int, first: int, anchors=(0,)) -> tuple[dict, Ledger]:
    """A saved ledger of n random batch records and the replay's, whose records differ from batch `first` on."""
    rng = np.random.default_rng(first)
    saved, replay = rng.bytes(16 * n), bytearray(rng.bytes(16 * n))
    replay[: 16 * first] = saved[: 16 * first]
    mine = Ledger(anchors=anchors)
    mine.add_digests(saved)
    state = json.loads(json.dumps(mine.state()))
    replayed = Ledger(anchors=anchors, watch=Ledger.watched(state))
    replayed.add_digests(bytes(replay))
    return state, replayed


@pytest.mark.parametrize("first", [0, 1, 5, 31, 32, 33, 70, 100, 101, 131, 132, 150, 167, 168, 199])
def test_the_parting_batch_is_named_exactly_near_anchors_and_the_end_and_bracketed_elsewhere(first):
    """200 batches, anchors 0 and 100: the batch is named where short digests are kept on both sides of it
    (batches 0-31, 100-131, 168-199), elsewhere a range that holds it; never another batch."""
    state, replayed = parted(200, first, anchors=(0, 100))
    message = first_parting(state, replayed)
    exact = first < WINDOW or 100 <= first < 100 + WINDOW or first >= 200 - WINDOW
    if exact:
        assert message == f"the histories part at batch {first}"
    else:
        low, high = map(int, re.match(r"the histories part at a batch from (\d+) to (\d+) ", message).groups())
        assert low <= first <= high and (low, high) != (first, first)
    assert first_parting(*parted(200, 200, anchors=(0, 100))) is None  # nothing differs


def test_records_added_at_once_or_one_by_one_keep_the_same_digests():
    records = np.random.default_rng(3).integers(0, 1 << 60, size=(300, 6))
    one, many = Ledger(anchors=(0, 90), watch=(150, 151)), Ledger(anchors=(0, 90), watch=(150, 151))
    for row in records:
        one.add_records(row.tobytes(), 48)
    many.add_records(records[:7], 48)
    many.add_records(records[7:200].tobytes(), 48)
    many.add_records(records[200:], 48)
    assert one.state() == many.state() and one.short(150) == many.short(150) is not None
    assert one.digest == many.digest and [first for first, _ in one.state()["fine"]] == [1, 90, 300 - WINDOW]


def test_batches_and_skips_record_the_same_history(loader_caches):
    read, skipped = loader(loader_caches, "epoch"), loader(loader_caches, "epoch")
    for _ in range(N):
        next(read)
    skipped.skip(N)
    assert read.state_dict()["ledger"] == skipped.state_dict()["ledger"]


def first_batch_that_differs(batches, b, steps: int) -> int:
    """The first of `steps` batches (read before) that loader b makes with other sources or tokens (an oracle)."""
    for step in range(steps):
        x, y = batches[step], next(b)
        if not (torch.equal(x.source, y.source) and torch.equal(x.x, y.x)):
            return step
    raise AssertionError("no batch differs")


def test_a_changed_mixer_is_refused_naming_the_batch_where_the_histories_part(loader_caches, monkeypatch):
    state = saved(loader_caches)
    before = loader(loader_caches, "epoch")
    before = [next(before) for _ in range(N)]
    monkeypatch.setattr(round_robin, "spread", lambda counts: round_robin_spread(counts)[::-1].copy())
    step = first_batch_that_differs(before, loader(loader_caches, "epoch"), N)
    assert 4 <= step < N  # the ramp's steps with two sources are spread the other way round
    with pytest.raises(ValueError) as e:
        loader(loader_caches, "epoch").load_state_dict(state)
    message = str(e.value)
    assert message.startswith("refusing to resume: the data order recomputed from the caches, the schedule and this")
    assert f"the histories part at batch {step});" in message


round_robin_spread = round_robin.spread


def test_a_tampered_ledger_or_position_is_refused(loader_caches):
    state = saved(loader_caches)
    mark = state["ledger"]["marks"]["4"]
    state["ledger"]["marks"]["4"] = mark[::-1]
    with pytest.raises(ValueError, match=r"not match the state's ledger \(the state's ledger mark after 4 batches was"):
        loader(loader_caches, "epoch").load_state_dict(state)
    state["ledger"]["marks"]["4"] = mark
    assert first_parting(state["ledger"], Ledger()) is not None
    del state["ledger"]
    with pytest.raises(ValueError, match="the state has no ledger"):
        loader(loader_caches, "epoch").load_state_dict(state)


def test_a_resume_after_an_edited_future_resumes_again(loader_caches):
    edited = [*RAMP[:3], (13, AT_13), (14, {"fineweb_edu": 1.0})]
    first = loader(loader_caches, "epoch", p=edited)
    first.load_state_dict(saved(loader_caches))
    for _ in range(N):
        next(first)
    second = json.loads(json.dumps(first.state_dict()))
    again = loader(loader_caches, "epoch", p=edited)
    again.load_state_dict(second)  # the replay under the edited schedule gives the history run under RAMP
    assert digest([next(again) for _ in range(M)]) == digest([next(first) for _ in range(M)])


def test_a_source_that_never_had_weight_changes_no_row():
    a = EpochMixer({"a": Items(50, 0), "b": Items(40, 0)}, {"a": 0.6, "b": 0.4}, seed=1, rank=0, world_size=1)
    three = {"a": Items(50, 0), "b": Items(40, 0), "c": Items(9, 0)}
    b = EpochMixer(
        three, [(0, {"a": 0.6, "b": 0.4}), (30, {"a": 0.6, "b": 0.4}), (40, {"c": 1.0})], seed=1, rank=0, world_size=1
    )
    a.skip(8, 0, 30)
    b.skip(8, 0, 30)
    assert a.ledger.digest == b.ledger.digest and np.array_equal(
        a.round_robin.assign(8, 30), b.round_robin.assign(8, 30)
    )


@pytest.mark.parametrize(
    "tamper, message",
    [
        (lambda s: s["sources"]["wikitext"].__setitem__("epoch", "x"), "must be ints"),
        (lambda s: s.__setitem__("history", [[0, {"fineweb_edu": 1.0}]]), "inconsistent epoch-mode state"),
        (lambda s: s.__setitem__("history", None), "the state's schedule history does not fit"),
        (lambda s: s.__setitem__("credits", [1, -1]), "not an epoch-mode state"),
        (lambda s: s.__setitem__("step", N + 1), "inconsistent epoch-mode state"),
        (lambda s: s["ledger"].__setitem__("steps", N - 1), "its ledger covers 12 batches"),
    ],
)
def test_a_tampered_state_is_refused_with_one_value_error(loader_caches, tamper, message):
    state = saved(loader_caches)
    tamper(state)
    with pytest.raises(ValueError, match=message):
        loader(loader_caches, "epoch").load_state_dict(state)


# -- random mode -----------------------------------------------------------------------------------
def test_a_random_state_carries_the_ledger_of_its_rank_and_skips_record_the_same(loader_caches):
    read, skipped = (
        loader(loader_caches, "random", rank=1, world_size=2),
        loader(loader_caches, "random", rank=1, world_size=2),
    )
    for _ in range(N):
        next(read)
    skipped.skip(N)
    state = read.state_dict()
    assert state["ledger"] == skipped.state_dict()["ledger"] and state["ledger"]["rank"] == 1
    assert sorted(map(int, state["ledger"]["marks"])) == [1, 2, 4, 8, N] and len(json.dumps(state)) < 2_000
    other = loader(loader_caches, "random", rank=0, world_size=2)
    other.skip(N)
    assert other.state_dict()["ledger"]["marks"] != state["ledger"]["marks"]  # each rank reads its own rows


def test_the_random_ledger_records_the_rows_each_batch_read(loader_caches):
    """The digest after batch 0, taken by hand from the batch's rows: the digest of (source ids, then each source's
    shards and starts), digested in its turn (the running digest over batch digests)."""
    import hashlib

    from niels_gpt.training.ledger import name_id

    mixed = loader(loader_caches, "random", p={"wikitext": 0.5, "gutenberg": 0.5})
    batch = next(mixed)
    h = hashlib.blake2b(digest_size=16)
    h.update(np.array([name_id(mixed.names[k]) for k in batch.source.tolist()], dtype=np.int64))
    for k, name in enumerate(mixed.names):
        source, rows = mixed.sources[name], np.flatnonzero(batch.source.numpy() == k)
        views = source.window_views
        found = [  # the (shard, start) of each row, found by searching the shards for its tokens
            next(
                (v, s)
                for v, view in enumerate(views)
                for s in np.flatnonzero((view[:, :-1] == batch.x[row].numpy()).all(axis=1)).tolist()
            )
            for row in rows.tolist()
        ]
        if found:
            h.update(np.array([v for v, _ in found], dtype=np.int64))
            h.update(np.array([s for _, s in found], dtype=np.int64))
    assert mixed.state_dict()["ledger"]["marks"]["1"] == hashlib.blake2b(h.digest(), digest_size=16).hexdigest()


def test_a_replay_split_over_processes_gives_the_serial_ledger(loader_caches, monkeypatch):
    from niels_gpt.training import ledger as ledger_module

    mixed = loader(loader_caches, "random", rank=1, world_size=2)
    serial = mixed.batch_digests(0, 40, rank=1, schedule=mixed.history)
    monkeypatch.setattr(ledger_module, "PARALLEL_STEPS", 8)
    job = partial(mixed.batch_digests, rank=1, schedule=mixed.history)
    assert ledger_module.replay_digests(job, 0, 40, workers=2) == serial and len(serial) == 40 * 16
    assert ledger_module.replay_digests(job, 10, 40, workers=2) == serial[10 * 16 :]
    for _ in range(N):
        next(mixed)
    resumed = loader(loader_caches, "random", rank=1, world_size=2)
    resumed.load_state_dict(mixed.state_dict())  # replayed by 2 processes (when this machine has 2 CPUs)
    assert resumed.state_dict()["ledger"] == mixed.state_dict()["ledger"]


def test_batch_digests_added_at_once_or_one_by_one_give_the_same_marks():
    one, many = Ledger(), Ledger()
    blob = bytes(range(256)) * 7  # 112 digests of 16 bytes
    for k in range(0, len(blob), 16):
        one.add_digests(blob[k : k + 16])
    many.add_digests(blob[:48])
    many.add_digests(blob[48:])
    assert one.state() == many.state() and sorted(map(int, one.state()["marks"])) == [1, 2, 4, 8, 16, 32, 64, 112]


@pytest.mark.parametrize("rank", [0, 1])
def test_a_random_state_of_any_rank_resumes_every_rank(loader_caches, rank):
    saver = loader(loader_caches, "random", rank=rank, world_size=2)
    for _ in range(N):
        next(saver)
    state = json.loads(json.dumps(saver.state_dict()))
    for mine in (0, 1):
        resumed = loader(loader_caches, "random", rank=mine, world_size=2)
        resumed.load_state_dict(state)
        straight = loader(loader_caches, "random", rank=mine, world_size=2)
        for _ in range(N + M):
            next(straight)
        for _ in range(M):
            next(resumed)
        assert resumed.state_dict()["ledger"] == straight.state_dict()["ledger"]


def test_a_changed_random_mixer_is_refused_naming_where_the_histories_part(loader_caches, monkeypatch):
    state = json.loads(json.dumps(saved_random(loader_caches)))
    draw = random_mixer.draw_rows

    def changed(schedule, step, B, g):  # batches from 5 on draw their sources the other way round
        idx = draw(schedule, step, B, g)
        return idx.flip(0) if step >= 5 else idx

    monkeypatch.setattr(random_mixer, "draw_rows", changed)
    with pytest.raises(ValueError, match=r"not match the state's ledger \(the histories part at batch 5\)"):
        loader(loader_caches, "random").load_state_dict(state)


FLAT = {"wikitext": 0.5, "gutenberg": 0.5}


@pytest.mark.parametrize(
    "p, steps, changed_from, named",
    [
        (FLAT, 80, 75, "at batch 75)"),  # among the last WINDOW batches
        ([(0, FLAT), (40, {"wikitext": 0.3, "gutenberg": 0.7})], 80, 41, "at batch 41)"),  # just after a breakpoint
        (FLAT, 80, 40, "at a batch from 32 to 47 "),  # neither: the range between the marks around it
    ],
)
def test_a_random_history_that_parts_later_is_named_near_breakpoints_and_the_end(
    loader_caches, monkeypatch, p, steps, changed_from, named
):
    state = saved_random(loader_caches, steps, p=p)
    draw = random_mixer.draw_rows
    oracle = loader(loader_caches, "random", p=p)  # where the flipped draws first change a batch's sources
    first = next(
        s for s in range(changed_from, steps) if not np.array_equal(*(lambda w: (w, w[::-1]))(draw_which(oracle, s)))
    )
    assert first == changed_from
    monkeypatch.setattr(
        random_mixer,
        "draw_rows",
        lambda s, step, B, g: draw(s, step, B, g).flip(0) if step >= first else draw(s, step, B, g),
    )
    with pytest.raises(ValueError, match=re.escape(f"the histories part {named}")):
        loader(loader_caches, "random", p=p).load_state_dict(state)


def draw_which(mixed, step: int) -> np.ndarray:
    return mixed.random_draws(step)[1]


def test_a_tampered_short_digest_is_refused_as_altered(loader_caches):
    state = saved_random(loader_caches, 40)
    first, digits = state["ledger"]["fine"][0]
    state["ledger"]["fine"][0] = [first, digits[: 8 * 3] + "00000000" + digits[8 * 4 :]]
    with pytest.raises(ValueError, match="the state's ledger mark after 4 batches was altered"):
        loader(loader_caches, "random").load_state_dict(state)


def saved_random(root, steps: int = N, **kw) -> dict:
    mixed = loader(root, "random", **kw)
    for _ in range(steps):
        next(mixed)
    return json.loads(json.dumps(mixed.state_dict()))


@pytest.mark.parametrize(
    "tamper, message",
    [
        (lambda s: s["ledger"]["marks"].__setitem__("8", "0" * 32), "ledger mark after 8 batches was altered"),
        (lambda s: s["ledger"]["marks"].__setitem__(str(N), "0" * 32), f"ledger mark after {N} batches was altered"),
        (lambda s: s["ledger"].__setitem__("fine", [[1, "xyz"]]), "its ledger's short digests are not"),
        (lambda s: s["ledger"].__setitem__("fine", [[N + 1, "0" * 8]]), f"a digest after {N + 1} batches, outside"),
        (lambda s: s["ledger"].__setitem__("rank", 2), "its ledger's rank is 2"),
        (lambda s: s.__delitem__("ledger"), "the state has no ledger"),
        (lambda s: s.__setitem__("step", N + 1), f"its ledger covers {N} batches"),
        (lambda s: s.__setitem__("history", [[0, {"gutenberg": 1.0}]]), "histories part at batch 0"),
        (lambda s: s.__delitem__("history"), "the state's schedule history does not fit"),
    ],
)
def test_a_tampered_random_state_is_refused_with_one_value_error(loader_caches, tamper, message):
    state = saved_random(loader_caches)
    tamper(state)
    with pytest.raises(ValueError, match=message):
        loader(loader_caches, "random").load_state_dict(state)
