"""MixedLoader: deterministic batches, exact resume, rank sharding, guards (mixture draws: niels_gpt.sampling)."""

from __future__ import annotations

import json
import types

import numpy as np
import pytest
import torch

from niels_gpt.batching import StreamBatcher
from niels_gpt.cache.build_cache import build_pretrain_cache, build_sft_cache
from niels_gpt.cache.loader import Batch, MixedLoader
from niels_gpt.cache.pretrain_dataset import PretrainTokenStreamDataset
from niels_gpt.cache.sft_dataset import SFTExampleDataset
from niels_gpt.pretrain.writer import write_not_built_meta
from niels_gpt.sampling import derive_seed, draw_sources
from tests.support.chats import random_chats
from tests.support.corpus import tiny_corpus

PRETRAIN_P = {"fineweb_edu": 0.6, "wikitext": 0.3, "gutenberg": 0.1}
SFT_P = {"primer": 0.10, "oasst1": 0.70, "dolly15k": 0.20}
T, B = 16, 8


@pytest.fixture(scope="module")
def cache_dir(tiny_tokenizer, tmp_path_factory):
    root = tmp_path_factory.mktemp("loader_cache")
    for k, name in enumerate(PRETRAIN_P):
        build_pretrain_cache(
            tiny_corpus(40, seed=k),
            str(root / "pretrain" / name),
            tokenizer=tiny_tokenizer,
            max_train_tokens=4_000,
            max_val_tokens=500,
            shard_bytes=2_000,
            seed=0,
            shuffle_buffer=None,
            val_doc_prob=0.1,
            num_threads=1,
        )
    write_not_built_meta(
        str(root / "pretrain" / "roam"),
        reason="disabled in config",
        dataset_name=None,
        dataset_config=None,
        seed=0,
        shard_bytes=2_000,
    )
    for k, name in enumerate(SFT_P):
        build_sft_cache(
            random_chats(30, seed=k),
            str(root / "sft" / name),
            tokenizer=tiny_tokenizer,
            val_frac=0.1,
            seed=0,
            source=name,
        )
    return root


def pretrain(cache_dir, **kw):
    kw = {"p": PRETRAIN_P, "T": T, "B": B, "seed": 7, **kw}
    return MixedLoader.pretrain(cache_dir, "train", **kw)


def take(loader, n):
    return [next(loader) for _ in range(n)]


def same(a: Batch, b: Batch) -> bool:
    pairs = [(a.x, b.x), (a.y, b.y), (a.source, b.source)]
    if a.y_masked is not None or b.y_masked is not None:
        pairs.append((a.y_masked, b.y_masked))
    return a.step == b.step and all(torch.equal(s, t) for s, t in pairs)


def test_same_seed_gives_same_batches_and_other_seed_differs(cache_dir):
    a, b = take(pretrain(cache_dir), 6), take(pretrain(cache_dir), 6)
    assert all(same(s, t) for s, t in zip(a, b))
    assert [x.step for x in a] == list(range(6))
    assert len({tuple(x.x.flatten().tolist()) for x in a}) == 6  # every step is a new batch
    c = take(pretrain(cache_dir, seed=8), 6)
    assert not any(torch.equal(s.x, t.x) for s, t in zip(a, c))


def test_batch_is_draw_sources_then_each_source_in_name_order(cache_dir, tiny_tokenizer):
    loader = MixedLoader.sft(cache_dir, p=SFT_P, T=T, B=64, seed=3)
    datasets = {n: SFTExampleDataset.from_cache_dir(cache_dir / "sft" / n, T=T) for n in SFT_P}
    g = torch.Generator().manual_seed(derive_seed(3, 4, 0))
    names, src = draw_sources(SFT_P, 64, g)
    got = loader.batch_at(4)
    assert loader.names == names == sorted(SFT_P) and torch.equal(got.source, src)
    for k, name in enumerate(names):
        rows = (src == k).nonzero().squeeze(1)
        want = datasets[name].get_batch(B=len(rows), generator=g)
        for have, expected in zip((got.x, got.y, got.y_masked), want):
            assert torch.equal(have[rows], expected)


def test_one_source_alone_is_the_batch(cache_dir):
    batch = MixedLoader.sft(cache_dir, p={"primer": 1.0}, T=T, B=4, seed=0).batch_at(0)
    assert batch.x.shape == (4, T) and (batch.source == 0).all()


def test_resume_from_state_yields_exactly_the_next_batches(cache_dir):
    original = pretrain(cache_dir)
    take(original, 5)
    state = json.loads(json.dumps(original.state_dict()))  # states survive a JSON round trip
    assert state["step"] == 5
    expected = take(original, 3)
    resumed = pretrain(cache_dir)
    resumed.load_state_dict(state)
    assert all(same(s, t) for s, t in zip(take(resumed, 3), expected))
    assert resumed.state_dict() == original.state_dict()


def test_ranks_differ_and_each_rank_is_reproducible(cache_dir):
    r0 = take(pretrain(cache_dir, rank=0, world_size=2), 4)
    r1 = take(pretrain(cache_dir, rank=1, world_size=2), 4)
    assert not any(torch.equal(a.x, b.x) for a, b in zip(r0, r1))
    assert all(same(a, b) for a, b in zip(r1, take(pretrain(cache_dir, rank=1, world_size=2), 4)))
    # a rank's stream does not depend on world_size: rank 0 of 2 == the single-process run
    assert all(same(a, b) for a, b in zip(r0, take(pretrain(cache_dir), 4)))


def test_rank_may_differ_when_loading_a_state(cache_dir):
    saver = pretrain(cache_dir, rank=0, world_size=2)
    take(saver, 3)
    other = pretrain(cache_dir, rank=1, world_size=2)
    other.load_state_dict(saver.state_dict())
    assert other.rank == 1 and same(next(other), pretrain(cache_dir, rank=1, world_size=2).batch_at(3))


@pytest.mark.parametrize(
    "rank, world_size, message",
    [
        (-1, 2, "rank must be an int with 0 <= rank < 2, got -1"),
        (2, 2, "rank must be an int with 0 <= rank < 2, got 2"),
        (0, 0, "world_size must be an int with world_size >= 1, got 0"),
        (1.0, 2, "rank must be an int with 0 <= rank < 2, got 1.0"),
    ],
)
def test_invalid_rank_is_refused(cache_dir, rank, world_size, message):
    with pytest.raises(ValueError) as e:
        pretrain(cache_dir, rank=rank, world_size=world_size)
    assert str(e.value) == message


@pytest.mark.parametrize(
    "change",
    [
        {"seed": 8},
        {"B": 4},
        {"world_size": 3},
        {"p": {"fineweb_edu": 1.0}},
        {"version": 0},
        {"T": 32},
        {"mode": "epoch"},
    ],
)
def test_mismatched_state_is_refused(cache_dir, change):
    state = pretrain(cache_dir).state_dict()
    state["fingerprint"] = {**state["fingerprint"], **change}
    key = next(iter(change))
    with pytest.raises(ValueError, match=f"refusing to resume.*{key}: state has"):
        pretrain(cache_dir).load_state_dict(state)


def test_zero_weights_are_ignored_and_not_built_sources_refused_only_with_weight(cache_dir):
    with_roam = pretrain(cache_dir, p={**PRETRAIN_P, "roam": 0.0})
    assert with_roam.names == sorted(PRETRAIN_P)
    assert same(with_roam.batch_at(2), pretrain(cache_dir).batch_at(2))
    pretrain(cache_dir).load_state_dict(with_roam.state_dict())
    not_built = r"source 'roam' has weight 0.1 but its cache was not built \(disabled in config\)"
    with pytest.raises(ValueError, match=not_built):
        pretrain(cache_dir, p={"fineweb_edu": 0.9, "roam": 0.1})


def test_arity_mismatch_is_refused(cache_dir):
    sources = {
        "fineweb_edu": PretrainTokenStreamDataset(cache_dir / "pretrain/fineweb_edu/train", T=T),
        "dolly15k": SFTExampleDataset.from_cache_dir(cache_dir / "sft/dolly15k", T=T),
    }
    arity = r"must all return the same fields.*'dolly15k': '\(x, y, y_masked\)', 'fineweb_edu': '\(x, y\)'"
    with pytest.raises(ValueError, match=arity):
        MixedLoader(sources, p={"fineweb_edu": 0.5, "dolly15k": 0.5}, B=B, seed=0)


def test_different_T_is_refused(cache_dir):
    sources = {
        "a": PretrainTokenStreamDataset(cache_dir / "pretrain/wikitext/train", T=T),
        "b": PretrainTokenStreamDataset(cache_dir / "pretrain/gutenberg/train", T=T + 1),
    }
    with pytest.raises(ValueError, match="same T and device"):
        MixedLoader(sources, p={"a": 0.5, "b": 0.5}, B=B, seed=0)


def test_sft_mixture_has_y_masked_with_a_target_in_every_row(cache_dir):
    for batch in take(MixedLoader.sft(cache_dir, p=SFT_P, T=T, B=64, seed=1), 5):
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


def test_tokenizer_mismatch_error_reaches_the_user_unchanged(cache_dir, tiny_tokenizer):
    other = types.SimpleNamespace(sha256="0" * 64, model_path="other.model", special_ids=tiny_tokenizer.special_ids)
    for kind, build_one in (
        (
            "pretrain",
            lambda: PretrainTokenStreamDataset(cache_dir / "pretrain/fineweb_edu/train", T=T, tokenizer=other),
        ),
        ("sft", lambda: SFTExampleDataset.from_cache_dir(cache_dir / "sft/dolly15k", T=T, tokenizer=other)),
    ):
        with pytest.raises(ValueError) as direct:
            build_one()
        make = getattr(MixedLoader, kind)
        p = {"fineweb_edu": 1.0} if kind == "pretrain" else {"dolly15k": 1.0}
        with pytest.raises(ValueError) as via_loader:
            make(cache_dir, p=p, T=T, B=B, seed=0, tokenizer=other)
        assert str(via_loader.value) == str(direct.value) and "sha256" in str(direct.value)
    assert MixedLoader.sft(cache_dir, p=SFT_P, T=T, B=B, seed=0, tokenizer=tiny_tokenizer).names == sorted(SFT_P)


def test_caches_of_different_tokenizers_are_refused_naming_each_sha256(cache_dir, tiny_tokenizer, tmp_path):
    import shutil

    from niels_gpt.tokenizer import train_sentencepiece

    other = train_sentencepiece(tiny_corpus(200, seed=9), tmp_path / "other.model", vocab_size=380, num_threads=1)
    root = tmp_path / "cache"
    shutil.copytree(cache_dir / "sft", root / "sft")
    shutil.rmtree(root / "sft" / "primer")
    build_sft_cache(random_chats(30, seed=2), str(root / "sft" / "primer"), tokenizer=other, val_frac=0.1, seed=0)
    with pytest.raises(ValueError) as e:
        MixedLoader.sft(root, p=SFT_P, T=T, B=B, seed=0)
    shas = {"dolly15k": tiny_tokenizer.sha256, "oasst1": tiny_tokenizer.sha256, "primer": other.sha256}
    assert str(e.value) == (
        f"caches of one loader were built with different tokenizers (sha256 by source: {shas}); "
        "rebuild them with one tokenizer"
    )
    assert MixedLoader.sft(root, p={"primer": 1.0}, T=T, B=B, seed=0).names == ["primer"]  # alone it is fine


def test_a_weighted_source_without_meta_is_refused_with_the_path(cache_dir, tmp_path):
    import shutil

    root = tmp_path / "cache"
    shutil.copytree(cache_dir / "pretrain", root / "pretrain")
    (root / "pretrain" / "wikitext" / "meta.json").unlink()  # a build that never finished
    with pytest.raises(FileNotFoundError) as e:
        pretrain(root)
    assert str(e.value) == (
        f"{root}/pretrain/wikitext/meta.json: no meta.json for source 'wikitext' (weight 0.3); build the cache "
        "first (`snakemake -j4 cache/all`) or give it weight 0"
    )
    assert pretrain(root, p={"fineweb_edu": 0.7, "gutenberg": 0.3, "wikitext": 0.0}).names == [
        "fineweb_edu",
        "gutenberg",
    ]


@pytest.mark.parametrize("state", [{}, {"fingerprint": {}}, [("step", 3)], None])
def test_a_state_without_step_is_refused(cache_dir, state):
    loader = pretrain(cache_dir)
    with pytest.raises(ValueError, match=r"^not a MixedLoader state \(no 'step'\): "):
        loader.load_state_dict(state)
    assert loader.step == 0
