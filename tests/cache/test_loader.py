"""niels_gpt.cache.loader: the public names of MixedLoader and Batch (niels_gpt.training.loader)."""

from __future__ import annotations

from niels_gpt.cache import loader
from niels_gpt.cache.pretrain_dataset import PretrainTokenStreamDataset
from niels_gpt.training import loader as implementation
from tests.support.cache_files import numbered_shards


def test_the_public_names_are_the_implementations_objects():
    assert loader.MixedLoader is implementation.MixedLoader and loader.Batch is implementation.Batch


def test_batches_through_the_public_name_are_deterministic(tmp_path):
    sources = {
        "a": PretrainTokenStreamDataset(numbered_shards(tmp_path / "a", [200]), T=8),
        "b": PretrainTokenStreamDataset(numbered_shards(tmp_path / "b", [200], offset=1000), T=8),
    }
    first = next(iter(loader.MixedLoader(sources, p={"a": 0.5, "b": 0.5}, B=4, seed=3)))
    again = next(iter(loader.MixedLoader(sources, p={"a": 0.5, "b": 0.5}, B=4, seed=3)))
    assert isinstance(first, loader.Batch) and first.x.shape == (4, 8) and bool((first.x == again.x).all())
