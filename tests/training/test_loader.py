"""MixedLoader: deterministic batches, exact resume, rank sharding, guards, packed SFT rows (mixture draws:
niels_gpt.sampling; what sources must share: test_sources.py; epoch mode: test_epoch_mixer.py)."""

from __future__ import annotations

import json
import types

import numpy as np
import pytest
import torch

from niels_gpt.batching import StreamBatcher
from niels_gpt.pretrain.dataset import PretrainTokenStreamDataset
from niels_gpt.sampling import derive_seed, draw_sources
from niels_gpt.sft.dataset import SFTExampleDataset
from niels_gpt.training.loader import Batch, MixedLoader

PRETRAIN_P = {"fineweb_edu": 0.6, "wikitext": 0.3, "gutenberg": 0.1}  # the sources of loader_caches
SFT_P = {"primer": 0.10, "oasst1": 0.70, "dolly15k": 0.20}
PACKED_P = {"dolly15k": 0.3, "oasst1": 0.7}  # the sources of packable_caches
T, B = 16, 8
PACKED_T = 32
FIELDS = ("x", "y", "y_masked", "segment_ids", "position_ids")  # a packed batch's tensors, in get_batch's order


def pretrain(root, **kw):
    kw = {"p": PRETRAIN_P, "T": T, "B": B, "seed": 7, **kw}
    return MixedLoader.pretrain(root, "train", **kw)


def take(loader, n):
    return [next(loader) for _ in range(n)]


def same(a: Batch, b: Batch) -> bool:
    pairs = [(a.x, b.x), (a.y, b.y), (a.source, b.source)]
    if a.y_masked is not None or b.y_masked is not None:
        pairs.append((a.y_masked, b.y_masked))
    return a.step == b.step and all(torch.equal(s, t) for s, t in pairs)


def test_same_seed_gives_same_batches_and_other_seed_differs(loader_caches):
    a, b = take(pretrain(loader_caches), 6), take(pretrain(loader_caches), 6)
    assert all(same(s, t) for s, t in zip(a, b))
    assert [x.step for x in a] == list(range(6))
    assert len({tuple(x.x.flatten().tolist()) for x in a}) == 6  # every step is a new batch
    c = take(pretrain(loader_caches, seed=8), 6)
    assert not any(torch.equal(s.x, t.x) for s, t in zip(a, c))


def test_batch_is_draw_sources_then_each_source_in_name_order(loader_caches, tiny_tokenizer):
    loader = MixedLoader.sft(loader_caches, p=SFT_P, T=T, B=64, seed=3)
    datasets = {n: SFTExampleDataset.from_cache_dir(loader_caches / "sft" / n, T=T) for n in SFT_P}
    g = torch.Generator().manual_seed(derive_seed(3, 4, 0))
    names, src = draw_sources(SFT_P, 64, g)
    got = loader.batch_at(4)
    assert loader.names == names == sorted(SFT_P) and torch.equal(got.source, src)
    for k, name in enumerate(names):
        rows = (src == k).nonzero().squeeze(1)
        want = datasets[name].get_batch(B=len(rows), generator=g)
        for have, expected in zip((got.x, got.y, got.y_masked), want):
            assert torch.equal(have[rows], expected)


def test_one_source_alone_is_the_batch(loader_caches):
    batch = MixedLoader.sft(loader_caches, p={"primer": 1.0}, T=T, B=4, seed=0).batch_at(0)
    assert batch.x.shape == (4, T) and (batch.source == 0).all()


def test_resume_from_state_yields_exactly_the_next_batches(loader_caches):
    original = pretrain(loader_caches)
    take(original, 5)
    state = json.loads(json.dumps(original.state_dict()))  # states survive a JSON round trip
    assert state["step"] == 5
    expected = take(original, 3)
    resumed = pretrain(loader_caches)
    resumed.load_state_dict(state)
    assert all(same(s, t) for s, t in zip(take(resumed, 3), expected))
    assert resumed.state_dict() == original.state_dict()


def test_ranks_differ_and_each_rank_is_reproducible(loader_caches):
    r0 = take(pretrain(loader_caches, rank=0, world_size=2), 4)
    r1 = take(pretrain(loader_caches, rank=1, world_size=2), 4)
    assert not any(torch.equal(a.x, b.x) for a, b in zip(r0, r1))
    assert all(same(a, b) for a, b in zip(r1, take(pretrain(loader_caches, rank=1, world_size=2), 4)))
    # a rank's stream does not depend on world_size: rank 0 of 2 == the single-process run
    assert all(same(a, b) for a, b in zip(r0, take(pretrain(loader_caches), 4)))


def test_rank_may_differ_when_loading_a_state(loader_caches):
    saver = pretrain(loader_caches, rank=0, world_size=2)
    take(saver, 3)
    other = pretrain(loader_caches, rank=1, world_size=2)
    other.load_state_dict(saver.state_dict())
    assert other.rank == 1 and same(next(other), pretrain(loader_caches, rank=1, world_size=2).batch_at(3))


@pytest.mark.parametrize(
    "rank, world_size, message",
    [
        (-1, 2, "rank must be an int with 0 <= rank < 2, got -1"),
        (2, 2, "rank must be an int with 0 <= rank < 2, got 2"),
        (0, 0, "world_size must be an int with world_size >= 1, got 0"),
        (1.0, 2, "rank must be an int with 0 <= rank < 2, got 1.0"),
    ],
)
def test_invalid_rank_is_refused(loader_caches, rank, world_size, message):
    with pytest.raises(ValueError) as e:
        pretrain(loader_caches, rank=rank, world_size=world_size)
    assert str(e.value) == message


@pytest.mark.parametrize(
    "change",
    [
        {"seed": 8},
        {"B": 4},
        {"world_size": 3},
        {"version": 0},
        {"T": 32},
        {"mode": "epoch"},
    ],
)
def test_mismatched_state_is_refused(loader_caches, change):
    state = pretrain(loader_caches).state_dict()
    state["fingerprint"] = {**state["fingerprint"], **change}
    key = next(iter(change))
    with pytest.raises(ValueError, match=f"refusing to resume.*{key}: state has"):
        pretrain(loader_caches).load_state_dict(state)


def test_zero_weights_are_ignored_and_not_built_sources_refused_only_with_weight(loader_caches):
    with_roam = pretrain(loader_caches, p={**PRETRAIN_P, "roam": 0.0})
    assert with_roam.names == sorted(PRETRAIN_P)
    assert same(with_roam.batch_at(2), pretrain(loader_caches).batch_at(2))
    pretrain(loader_caches).load_state_dict(with_roam.state_dict())
    not_built = r"source 'roam' has weight 0.1 but its cache was not built \(disabled in config\)"
    with pytest.raises(ValueError, match=not_built):
        pretrain(loader_caches, p={"fineweb_edu": 0.9, "roam": 0.1})


def test_sft_mixture_has_y_masked_with_a_target_in_every_row(loader_caches):
    for batch in take(MixedLoader.sft(loader_caches, p=SFT_P, T=T, B=64, seed=1), 5):
        assert batch.y_masked is not None and batch.y_masked.shape == (64, T)
        assert ((batch.y_masked != -100).sum(1) > 0).all()
        active = batch.y_masked != -100
        assert torch.equal(batch.y_masked[active], batch.y[active])


def test_byte_stream_batchers_are_sources():
    rng = np.random.default_rng(0)
    sources = {
        name: StreamBatcher({name: rng.integers(0, 256, 500, dtype=np.uint8)}, p={name: 1.0}, T=T)
        for name in ("wiki", "roam")
    }
    a = take(MixedLoader(sources, p={"wiki": 0.8, "roam": 0.2}, B=B, seed=0), 3)
    b = take(MixedLoader(sources, p={"wiki": 0.8, "roam": 0.2}, B=B, seed=0), 3)
    assert all(same(s, t) for s, t in zip(a, b)) and a[0].y_masked is None
    assert torch.equal(a[0].y[:, :-1], a[0].x[:, 1:])


def test_tokenizer_mismatch_error_reaches_the_user_unchanged(loader_caches, tiny_tokenizer):
    other = types.SimpleNamespace(sha256="0" * 64, model_path="other.model", special_ids=tiny_tokenizer.special_ids)
    for kind, build_one in (
        (
            "pretrain",
            lambda: PretrainTokenStreamDataset(loader_caches / "pretrain/fineweb_edu/train", T=T, tokenizer=other),
        ),
        ("sft", lambda: SFTExampleDataset.from_cache_dir(loader_caches / "sft/dolly15k", T=T, tokenizer=other)),
    ):
        with pytest.raises(ValueError) as direct:
            build_one()
        make = getattr(MixedLoader, kind)
        p = {"fineweb_edu": 1.0} if kind == "pretrain" else {"dolly15k": 1.0}
        with pytest.raises(ValueError) as via_loader:
            make(loader_caches, p=p, T=T, B=B, seed=0, tokenizer=other)
        assert str(via_loader.value) == str(direct.value) and "sha256" in str(direct.value)
    assert MixedLoader.sft(loader_caches, p=SFT_P, T=T, B=B, seed=0, tokenizer=tiny_tokenizer).names == sorted(SFT_P)


def test_a_source_that_changes_its_fields_is_refused():
    class Shifty:
        """get_batch: (x, y) for the probe, (x, y, y_masked) after it; rows(): three arrays."""

        calls = 0

        def get_batch(self, *, B, generator):
            self.calls += 1
            return tuple(torch.zeros((B, T), dtype=torch.int64) for _ in range(2 if self.calls == 1 else 3))

        def __len__(self):
            return 4

        def rows(self, ids):
            return tuple(np.zeros((len(ids), T), dtype=np.int64) for _ in range(3))

    with pytest.raises(ValueError, match=r"^source 'x' returned 3 tensors, earlier 2$"):
        MixedLoader({"x": Shifty()}, p={"x": 1.0}, B=B, seed=0).batch_at(0)
    with pytest.raises(ValueError, match=r"^sources returned 3 arrays from rows\(\), 2 from get_batch$"):
        next(MixedLoader({"x": Shifty()}, p={"x": 1.0}, B=B, seed=0, mode="epoch"))


@pytest.mark.parametrize("state", [{}, {"fingerprint": {}}, [("step", 3)], None])
def test_a_state_without_step_is_refused(loader_caches, state):
    loader = pretrain(loader_caches)
    with pytest.raises(ValueError, match=r"^not a MixedLoader state \(no 'step'\): "):
        loader.load_state_dict(state)
    assert loader.step == 0


# -- packed SFT sources ------------------------------------------------------------------------


def packed(root, **kw):
    return MixedLoader.sft(root, p=PACKED_P, T=PACKED_T, B=B, seed=4, packing=True, **kw)


def datasets(root, **kw) -> dict[str, SFTExampleDataset]:
    return {n: SFTExampleDataset.from_cache_dir(root / "sft" / n, T=PACKED_T, seed=4, **kw) for n in sorted(PACKED_P)}


def test_random_batches_are_the_packed_rows_each_source_draws(packable_caches):
    batch = packed(packable_caches).batch_at(2)
    g = torch.Generator().manual_seed(derive_seed(4, 2, 0))
    names, src = draw_sources(PACKED_P, B, g)
    assert torch.equal(batch.source, src)
    for k, (name, ds) in enumerate(datasets(packable_caches, packing=True).items()):
        rows = (src == k).nonzero().squeeze(1)
        for field, want in zip(FIELDS, ds.get_batch(B=len(rows), generator=g)):
            assert torch.equal(getattr(batch, field)[rows], want), (name, field)
    assert batch.segment_ids.dtype == torch.int32 and batch.position_ids.dtype == torch.int64
    assert (batch.segment_ids.max(1).values > 1).any()  # rows hold several examples
    unpacked = MixedLoader.sft(packable_caches, p=PACKED_P, T=PACKED_T, B=B, seed=4).batch_at(2)
    assert unpacked.y_masked is not None and unpacked.segment_ids is None and unpacked.position_ids is None


def test_epoch_mode_reads_every_packed_row_once_per_epoch(packable_caches):
    loader = packed(packable_caches, mode="epoch")
    batches = [next(loader) for _ in range(60)]
    for k, (name, ds) in enumerate(datasets(packable_caches, packing=True).items()):
        rows = torch.cat(
            [torch.cat([getattr(b, f)[b.source == k].long() for f in FIELDS], 1) for b in batches]
        ).tolist()
        n = len(ds)
        want = np.concatenate([a.astype(np.int64) for a in ds.rows(np.arange(n))], 1).tolist()
        assert len(rows) >= 2 * n and sorted(rows[:n]) == sorted(want) == sorted(rows[n : 2 * n]), name
    assert batches[-1].epochs["dolly15k"] >= 2


@pytest.mark.parametrize("mode", ["random", "epoch"])
def test_a_resumed_packed_loader_continues_with_the_same_batches(packable_caches, mode):
    straight = packed(packable_caches, mode=mode)
    expected = [next(straight) for _ in range(9)][5:]
    saver = packed(packable_caches, mode=mode)
    for _ in range(5):
        next(saver)
    resumed = packed(packable_caches, mode=mode)
    resumed.load_state_dict(json.loads(json.dumps(saver.state_dict())))
    for want in expected:
        got = next(resumed)
        assert got.step == want.step and all(torch.equal(getattr(got, f), getattr(want, f)) for f in FIELDS)
    padded = MixedLoader.sft(packable_caches, p=PACKED_P, T=PACKED_T, B=B, seed=4, mode=mode)
    with pytest.raises(ValueError, match=r"refusing to resume.*caches\['dolly15k'\]"):
        padded.load_state_dict(saver.state_dict())  # a packed position means nothing to padded rows


@pytest.mark.parametrize("packing", [False, True])
def test_ignore_index_reaches_every_row(packable_caches, packing):
    loader = MixedLoader.sft(packable_caches, p=PACKED_P, T=PACKED_T, B=64, seed=1, packing=packing, ignore_index=-1)
    batch = next(loader)
    default = MixedLoader.sft(packable_caches, p=PACKED_P, T=PACKED_T, B=64, seed=1, packing=packing).batch_at(0)
    assert loader.ignore_index == -1 and torch.equal(
        batch.y_masked, default.y_masked.masked_fill(default.y_masked == -100, -1)
    )
    assert ((batch.y_masked != -1).sum(1) > 0).all()
    mixed = datasets(packable_caches)
    mixed["oasst1"] = SFTExampleDataset.from_cache_dir(packable_caches / "sft" / "oasst1", T=PACKED_T, ignore_index=-1)
    with pytest.raises(ValueError, match=r"one ignore_index, got \{'dolly15k': -100, 'oasst1': -1\}"):
        MixedLoader(mixed, p=PACKED_P, B=B, seed=0)


@pytest.mark.parametrize("mode", ["random", "epoch"])
def test_skip_moves_the_plan_as_far_as_reading_the_batches_would(loader_caches, mode):
    read, skipped = pretrain(loader_caches, mode=mode), pretrain(loader_caches, mode=mode)
    take(read, 37)
    skipped.skip(37)
    assert skipped.state_dict() == read.state_dict() and same(next(skipped), next(read))
    if mode == "epoch":
        assert read.state_dict()["sources"]["fineweb_edu"]["epoch"] >= 1  # the skip crossed an epoch end


def test_a_batch_as_a_dict_has_unshifted_labels_and_the_shifted_targets(loader_caches):
    batch = MixedLoader.sft(loader_caches, p=SFT_P, T=T, B=B, seed=3).batch_at(2)
    d = batch.as_dict()
    assert torch.equal(d["input_ids"], batch.x) and torch.equal(d["shift_labels"], batch.y_masked)
    assert torch.equal(d["labels"][:, 1:], batch.y_masked[:, :-1]) and (d["labels"][:, 0] == -100).all()


@pytest.mark.parametrize("mode", ["random", "epoch"])
def test_fresh_is_the_same_plan_from_step_zero_and_moves_on_its_own(loader_caches, mode):
    used = pretrain(loader_caches, mode=mode)
    take(used, 11)
    fresh, straight = used.fresh(), pretrain(loader_caches, mode=mode)
    assert fresh.fingerprint() == straight.fingerprint() and fresh.state_dict() == straight.state_dict()
    assert same(next(fresh), next(straight)) and used.step == 11


def test_draw_rows_is_draw_sources_with_the_weights_of_each_step():
    import torch

    from niels_gpt.sampling import draw_sources
    from niels_gpt.training.loader import draw_rows
    from niels_gpt.training.schedule import Schedule

    schedule = Schedule([(0, {"a": 0.7, "b": 0.3}), (5, {"a": 0.7, "b": 0.3}), (9, {"a": 0.1, "b": 0.9})])
    for step in (0, 1, 4, 6, 9, 10, 0, 12):  # flat, ramp, flat again: the kept tensor follows the weights
        g, h = torch.Generator().manual_seed(step), torch.Generator().manual_seed(step)
        assert torch.equal(draw_rows(schedule, step, 64, g), draw_sources(schedule.at(step), 64, h)[1])
