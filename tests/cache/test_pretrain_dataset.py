"""niels_gpt.cache.pretrain_dataset: the public name of PretrainTokenStreamDataset."""

from __future__ import annotations

import torch

from niels_gpt.cache import pretrain_dataset
from niels_gpt.pretrain.dataset import PretrainTokenStreamDataset
from tests.support.cache_files import numbered_shards


def test_the_public_name_is_the_implementations_object():
    assert pretrain_dataset.PretrainTokenStreamDataset is PretrainTokenStreamDataset


def test_a_batch_through_the_public_name(tmp_path):
    ds = pretrain_dataset.PretrainTokenStreamDataset(numbered_shards(tmp_path / "train", [50]), T=8, device="cpu")
    x, y = ds.get_batch(B=3, generator=torch.Generator().manual_seed(0))
    assert x.shape == (3, 8) and torch.equal(y, x + 1)  # token values are positions
