"""niels_gpt.cache.sft_dataset: the public name of SFTExampleDataset."""

from __future__ import annotations

import torch

from niels_gpt.cache import sft_dataset
from niels_gpt.cache.build_cache import build_sft_cache
from niels_gpt.sft.dataset import SFTExampleDataset


def test_the_public_name_is_the_implementations_object():
    assert sft_dataset.SFTExampleDataset is SFTExampleDataset


def test_a_batch_through_the_public_name(tiny_tokenizer, tmp_path):
    chat = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "the river"}]
    build_sft_cache([chat] * 4, str(tmp_path), tokenizer=tiny_tokenizer, val_frac=0.0, seed=0)
    ds = sft_dataset.SFTExampleDataset.from_cache_dir(tmp_path, "train", T=16, tokenizer=tiny_tokenizer)
    x, y, y_masked = ds.get_batch(B=2, generator=torch.Generator().manual_seed(0))
    assert x.shape == y.shape == y_masked.shape == (2, 16) and bool((y_masked != -100).any())
