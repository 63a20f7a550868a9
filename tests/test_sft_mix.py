"""MixedSFTBatches: rows follow the mixture weights, one generator makes it deterministic, bad mixes fail."""

from __future__ import annotations

import pytest
import torch
from sft_chats import random_chats

from niels_gpt.cache.sft_dataset import SFTExampleDataset
from niels_gpt.cache.sft_mix import MixedSFTBatches, default_mix_sft
from niels_gpt.cache.sft_writer import build_sft_cache
from niels_gpt.sampling import draw_sources

SOURCES = ("dolly15k", "oasst1", "primer")
MIX = {"primer": 0.10, "oasst1": 0.70, "dolly15k": 0.20}


@pytest.fixture(scope="module")
def caches(tiny_tokenizer, tmp_path_factory):
    root = tmp_path_factory.mktemp("sftmix")
    for k, source in enumerate(SOURCES):
        build_sft_cache(random_chats(40, seed=k), str(root / source), tokenizer=tiny_tokenizer,
                        val_frac=0.1, seed=0, source=source)  # fmt: skip
    return root


def datasets(caches, T=32):
    return {s: SFTExampleDataset.from_cache_dir(caches / s, T=T) for s in SOURCES}


def test_default_mix_comes_from_config():
    assert default_mix_sft() == MIX
    assert sum(default_mix_sft().values()) == pytest.approx(1.0)


def test_rows_follow_the_weights(caches):
    mixed = MixedSFTBatches(datasets(caches), MIX)
    g = torch.Generator().manual_seed(0)
    x, y, ym, src, names = mixed.get_batch(B=20_000, generator=g, return_sources=True)
    assert x.shape == (20_000, 32) and ((ym != -100).sum(1) > 0).all()
    for k, name in enumerate(names):
        assert abs((src == k).float().mean().item() - MIX[name]) < 0.02, name


def test_batch_is_draw_sources_then_each_source_in_name_order(caches):
    ds = datasets(caches)
    got = MixedSFTBatches(ds, MIX).get_batch(B=64, generator=torch.Generator().manual_seed(5))
    g = torch.Generator().manual_seed(5)
    names, src = draw_sources(MIX, 64, g)
    assert names == sorted(SOURCES)
    for k, name in enumerate(names):
        rows = (src == k).nonzero().squeeze(1)
        want = ds[name].get_batch(B=len(rows), generator=g)
        for a, b in zip(got, want):
            assert (a[rows] == b).all()


def test_same_seed_same_batch_and_dict_order_does_not_matter(caches):
    a = MixedSFTBatches(datasets(caches), MIX).get_batch(B=32, generator=torch.Generator().manual_seed(1))
    reordered = dict(reversed(list(MIX.items())))
    b = MixedSFTBatches(datasets(caches), reordered).get_batch(B=32, generator=torch.Generator().manual_seed(1))
    assert all((p == q).all() for p, q in zip(a, b))


def test_primer_alone_is_an_ordinary_source(caches):
    mixed = MixedSFTBatches({"primer": datasets(caches)["primer"]}, {"primer": 1.0})
    assert mixed.get_batch(B=4, generator=torch.Generator().manual_seed(0))[0].shape == (4, 32)


@pytest.mark.parametrize(
    "mix, match",
    [
        ({"primer": 0.5, "oasst1": 0.5}, "missing"),
        ({**MIX, "wiki": 0.0}, "not available"),
        ({"primer": 0.2, "oasst1": 0.7, "dolly15k": 0.2}, "sum to 1"),
        ({"primer": -0.1, "oasst1": 0.9, "dolly15k": 0.2}, "negative"),
    ],
)
def test_bad_mix_is_refused(caches, mix, match):
    with pytest.raises(ValueError, match=match):
        MixedSFTBatches(datasets(caches), mix)


def test_mixed_T_is_refused(caches):
    ds = datasets(caches)
    ds["primer"] = SFTExampleDataset.from_cache_dir(caches / "primer", T=16)
    with pytest.raises(ValueError, match="same T"):
        MixedSFTBatches(ds, MIX)


def test_from_config_opens_every_source_of_the_mix(caches):
    cfg = {"cache_dir": str(caches), "sft": {"mix": MIX, "t_max": 24}}
    (caches / "sft").mkdir(exist_ok=True)  # the layout from_config expects: {cache_dir}/sft/<source>
    for s in SOURCES:
        link = caches / "sft" / s
        if not link.exists():
            link.symlink_to(caches / s)
    mixed = MixedSFTBatches.from_config(cfg, "val")
    assert mixed.T == 24 and set(mixed.datasets) == set(SOURCES)
