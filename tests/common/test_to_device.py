"""to_device: CPU rows are the arrays themselves; for CUDA every reader's rows go through pinned memory and a
non-blocking copy (run here with the CUDA calls faked: tests/support/fake_cuda.py)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from niels_gpt.batching import StreamBatcher, get_batch
from niels_gpt.pretrain.dataset import PretrainTokenStreamDataset
from niels_gpt.sft.dataset import SFTExampleDataset
from niels_gpt.sft.writer import build_sft_cache
from niels_gpt.to_device import to_device
from niels_gpt.training.loader import MixedLoader
from tests.support.cache_files import numbered_shards
from tests.support.chats import random_chats
from tests.support.fake_cuda import FakeCuda

T = 16
STREAMS = {"a": np.arange(200, dtype=np.uint8), "b": np.arange(100, 250, dtype=np.uint8)}


@pytest.fixture(scope="module")
def caches(tmp_path_factory, tiny_tokenizer):
    """{root}/pretrain/{a,b}/train: numbered shards; {root}/sft/oasst1: 30 short chats."""
    root = tmp_path_factory.mktemp("to_device")
    for k, name in enumerate(("a", "b")):
        numbered_shards(root / "pretrain" / name / "train", [300, 200], offset=1000 * k)
    build_sft_cache(
        random_chats(30, max_words=8), str(root / "sft" / "oasst1"), tokenizer=tiny_tokenizer, val_frac=0.0, seed=0
    )
    return root


def readers(root, device: str) -> dict:
    """name -> a call returning a batch of every reader, built for `device`."""
    g = torch.Generator().manual_seed(3)
    pretrain = {
        name: PretrainTokenStreamDataset(root / "pretrain" / name / "train", T=T, device=device) for name in "ab"
    }
    sft = root / "sft" / "oasst1"
    padded = SFTExampleDataset.from_cache_dir(sft, "train", T=T, device=device)
    packed = SFTExampleDataset.from_cache_dir(sft, "train", T=4 * T, device=device, packing=True)
    mixed = MixedLoader(pretrain, p={"a": 0.5, "b": 0.5}, B=6, seed=0)
    epoch = MixedLoader(pretrain, p={"a": 0.5, "b": 0.5}, B=6, seed=0, mode="epoch")
    for loader in (mixed, epoch):  # a faked copy stays on the CPU, where the loader's probe saw the rows
        loader.device = loader.assembler.device = torch.device(device)
    streams = StreamBatcher(STREAMS, p={"a": 0.7, "b": 0.3}, T=T, device=device)
    return {
        "pretrain get_batch": lambda: pretrain["a"].get_batch(B=4, generator=g),
        "SFT get_batch": lambda: padded.get_batch(B=4, generator=g),
        "packed SFT get_batch": lambda: packed.get_batch(B=4, generator=g),
        "MixedLoader random": lambda: tuple(t for t in vars(next(mixed)).values() if isinstance(t, torch.Tensor)),
        "MixedLoader epoch": lambda: tuple(t for t in vars(next(epoch)).values() if isinstance(t, torch.Tensor)),
        "byte get_batch": lambda: get_batch(STREAMS, p={"a": 0.7, "b": 0.3}, B=4, T=T, device=device, generator=g),
        "StreamBatcher": lambda: streams.get_batch(4, g),
    }


def test_cpu_rows_are_the_arrays_themselves():
    a, b = np.arange(6, dtype=np.int64).reshape(2, 3), np.ones((2, 3), dtype=np.int32)
    x, y = to_device([a, b], "cpu")
    assert (
        x.data_ptr() == a.ctypes.data and y.dtype == torch.int32 and torch.equal(y, torch.ones(2, 3, dtype=torch.int32))
    )
    (t,) = to_device([torch.zeros(2)], torch.device("cpu"))
    assert t.device.type == "cpu"


def test_cuda_rows_are_pinned_then_copied_without_blocking(monkeypatch):
    fake = FakeCuda(monkeypatch)
    already = torch.zeros(2).pin_memory()  # a DataLoader(pin_memory=True) batch: not pinned twice
    x, y, z = to_device([np.arange(4), torch.ones(3), already], "cuda:0")
    assert fake.all_pinned_and_non_blocking() and len(fake.copies) == 3
    assert z is already and torch.equal(x, torch.arange(4))


def test_every_reader_sends_its_rows_through_pinned_memory_non_blocking_on_cuda(caches, monkeypatch):
    want = {name: call() for name, call in readers(caches, "cpu").items()}
    fake = FakeCuda(monkeypatch)
    for name, call in readers(caches, "cuda").items():
        fake.copies.clear()
        got = call()
        assert fake.all_pinned_and_non_blocking(), name
        assert len(got) == len(want[name]) and all(torch.equal(a, b) for a, b in zip(got, want[name])), name
