"""resident=True: every reader, opener and map-style dataset makes on the device the batches the host path
makes, bit for bit, and caches that do not fit are refused with one message giving the bytes needed and free."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

from niels_gpt.pretrain.dataset import PretrainTokenStreamDataset
from niels_gpt.sft.dataset import SFTExampleDataset
from niels_gpt.streams.batches import StreamBatcher, load_stream_cache
from niels_gpt.training import resident as resident_module
from niels_gpt.training.loader import MixedLoader
from niels_gpt.training.mixture import MixedBatches
from niels_gpt.training.torch_data import ByteWindows, PackedSFTRows, PretrainWindows, SFTExamples


def readers(caches: dict, resident: bool) -> dict:
    loader, packable, streams = caches["loader"], caches["packable"], caches["streams"]
    return {
        "pretrain": PretrainTokenStreamDataset(loader / "pretrain" / "wikitext" / "train", T=16, resident=resident),
        "sft": SFTExampleDataset.from_cache_dir(loader / "sft" / "oasst1", T=16, resident=resident),
        "packed": SFTExampleDataset.from_cache_dir(
            packable / "sft" / "oasst1", T=32, packing=True, seed=3, resident=resident
        ),
        "bytes": StreamBatcher(load_stream_cache(streams, "train"), p={"wiki": 0.5, "roam": 0.3, "primer": 0.2}, T=24),
    }


@pytest.fixture
def caches(loader_caches, packable_caches, stream_caches) -> dict:
    return {"loader": loader_caches, "packable": packable_caches, "streams": stream_caches}


@pytest.mark.parametrize("name", ["pretrain", "sft", "packed"])
def test_a_resident_reader_draws_the_host_readers_batches(name, caches):
    host, resident = readers(caches, False)[name], readers(caches, True)[name]
    assert host.resident is None and resident.resident is not None
    for seed in range(5):
        want = host.get_batch(B=7, generator=torch.Generator().manual_seed(seed))
        got = resident.get_batch(B=7, generator=torch.Generator().manual_seed(seed))
        assert len(got) == len(want)
        assert all(g.dtype == w.dtype and g.is_contiguous() and torch.equal(g, w) for g, w in zip(got, want))
    ids = np.arange(len(host))
    on_device = resident.resident.rows(resident.resident.locate(ids))
    assert all(torch.equal(g, torch.from_numpy(w)) for g, w in zip(on_device, host.rows(ids)))


def test_a_resident_byte_batcher_draws_the_host_batchers_batches(caches):
    streams = load_stream_cache(caches["streams"], "train")
    p = {"wiki": 0.5, "roam": 0.3, "primer": 0.2}
    host, resident = StreamBatcher(streams, p=p, T=24), StreamBatcher(streams, p=p, T=24, resident=True)
    for seed in range(5):
        want = host.get_batch(9, torch.Generator().manual_seed(seed))
        got = resident.get_batch(9, torch.Generator().manual_seed(seed))
        assert all(torch.equal(g, w) and g.dtype == torch.int64 for g, w in zip(got, want))


@pytest.mark.parametrize(
    "open_dataset",
    [
        lambda c, **kw: PretrainWindows(c["loader"] / "pretrain" / "gutenberg" / "train", T=16, **kw),
        lambda c, **kw: SFTExamples(c["loader"] / "sft" / "dolly15k", T=16, **kw),
        lambda c, **kw: PackedSFTRows(c["packable"] / "sft" / "dolly15k", T=32, seed=1, **kw),
        lambda c, **kw: ByteWindows(c["streams"], T=24, **kw),
    ],
    ids=["PretrainWindows", "SFTExamples", "PackedSFTRows", "ByteWindows"],
)
def test_resident_map_style_datasets_give_the_host_items(open_dataset, caches):
    host, resident = open_dataset(caches), open_dataset(caches, device="cpu", resident=True)
    ids = list(range(len(host)))[::-1]
    want, got = host.__getitems__(ids), resident.__getitems__(ids)
    assert all(g.keys() == w.keys() and all(torch.equal(g[k], w[k]) for k in w) for g, w in zip(got, want))


def test_resident_mixed_batches_resume_like_the_host_ones(caches):
    kw = {"p": {"fineweb_edu": 0.5, "wikitext": 0.5}, "T": 16, "B": 4, "seed": 1, "mode": "epoch"}
    host = iter(MixedBatches.pretrain(caches["loader"], **kw))
    resident = iter(MixedBatches.pretrain(caches["loader"], resident=True, **kw))
    for _ in range(3):
        want, got = next(host), next(resident)
        assert all(torch.equal(got[k], want[k]) for k in want)
    assert resident.state_dict() == host.state_dict()


def test_caches_that_do_not_fit_are_refused_with_the_bytes_needed_and_free(caches, monkeypatch):
    monkeypatch.setattr(resident_module, "free_bytes", lambda device: 1_000)
    with pytest.raises(MemoryError) as e:
        MixedLoader.pretrain(caches["loader"], p={"wikitext": 1.0}, T=16, B=4, seed=0, resident=True)
    message = str(e.value)
    needed = PretrainTokenStreamDataset(caches["loader"] / "pretrain" / "wikitext" / "train", T=16).n_tokens * 2
    assert "\n" not in message and f"needs {needed:,} bytes on cpu and 1,000 are free" in message
    assert "resident=False" in message


def test_the_free_memory_of_the_cpu_is_known():
    assert resident_module.free_bytes(torch.device("cpu")) > 0


@pytest.mark.parametrize("mode", ["random", "epoch"])
def test_a_resident_loader_resumes_from_a_host_loaders_state_and_back(mode, caches):
    kw = {"p": {"primer": 0.2, "oasst1": 0.5, "dolly15k": 0.3}, "T": 16, "B": 5, "seed": 2, "mode": mode}
    host = MixedLoader.sft(caches["loader"], **kw)
    straight = [next(host) for _ in range(8)]
    saver = MixedLoader.sft(caches["loader"], **kw)
    for _ in range(4):
        next(saver)
    resumed = MixedLoader.sft(caches["loader"], resident=True, **kw)
    resumed.load_state_dict(saver.state_dict())
    for want in straight[4:]:
        got = next(resumed)
        assert all(torch.equal(getattr(got, f), getattr(want, f)) for f in ("x", "y", "y_masked", "source"))
    back = MixedLoader.sft(caches["loader"], **kw)
    back.load_state_dict(resumed.state_dict())
    assert resumed.state_dict() == host.state_dict() and torch.equal(next(back).x, next(host).x)


def test_resident_datasets_refuse_dataloader_workers(caches):
    mix = MixedBatches.pretrain(caches["loader"], p={"wikitext": 1.0}, T=16, B=4, seed=0, resident=True)
    windows = PretrainWindows(caches["loader"] / "pretrain" / "wikitext" / "train", T=16, resident=True)
    for loader in (DataLoader(mix, batch_size=None, num_workers=1), DataLoader(windows, batch_size=4, num_workers=1)):
        with pytest.raises(ValueError, match="resident=True makes batches on the device in the main process"):
            next(iter(loader))
