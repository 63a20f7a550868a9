"""MixedLoader's batches are the rows the loader's contract names, bit for bit: a reference written here
assembles them as the loader did before its batches were gathered in one pass (each source's own
`get_batch` in random mode, its `rows()` over its cursor's items in epoch mode, scattered row by row), and
every field, dtype and layout of every batch must equal it, for pretrain, byte, padded and packed SFT
sources, at any rank, on the host and with the caches resident."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from niels_gpt.sampling import derive_seed, draw_sources
from niels_gpt.training.epoch_mixer import source_seed
from niels_gpt.training.epoch_order import RankCursor
from niels_gpt.training.loader import MixedLoader
from niels_gpt.training.mixture import open_streams_loader
from niels_gpt.training.round_robin import SmoothRoundRobin
from niels_gpt.training.sources import FIELDS

PRETRAIN_P = {"fineweb_edu": 0.6, "wikitext": 0.3, "gutenberg": 0.1}
SFT_P = {"primer": 0.10, "oasst1": 0.70, "dolly15k": 0.20}
PACKED_P = {"dolly15k": 0.3, "oasst1": 0.7}
STREAM_P = {"wiki": 0.784, "roam": 0.196, "primer": 0.02}
STEPS = 9


def reference_random(loader: MixedLoader, step: int) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """(source of each row, the batch's tensors): each source's get_batch, scattered into its rows."""
    g = torch.Generator().manual_seed(derive_seed(loader.seed, step, loader.rank))
    _, idx = draw_sources(loader.p, loader.B, g)
    out = None
    for k, name in enumerate(loader.names):
        rows = (idx == k).nonzero().squeeze(1)
        if len(rows):
            part = loader.sources[name].get_batch(B=len(rows), generator=g)
            if out is None:
                out = [torch.full((loader.B, loader.T), -7, dtype=t.dtype) for t in part]
            for dst, src in zip(out, part):
                dst[rows] = src.cpu()
    return idx, out


def reference_epoch(loader: MixedLoader, steps: int) -> list[tuple[torch.Tensor, list[torch.Tensor]]]:
    """The first `steps` epoch-mode batches: round robin, each source's cursor, its rows() scattered."""
    names, sources = loader.names, loader.sources
    round_robin = SmoothRoundRobin([loader.p[name] for name in names])
    cursors = [
        RankCursor(len(sources[n]), source_seed(loader.seed, n), rank=loader.rank, world_size=loader.world_size)
        for n in names
    ]
    batches = []
    for _ in range(steps):
        which = round_robin.assign(loader.B)
        out = None
        for k, name in enumerate(names):
            rows = np.flatnonzero(which == k)
            if len(rows):
                part = sources[name].rows(cursors[k].take(len(rows)))
                if out is None:
                    out = [torch.full((loader.B, loader.T), -7, dtype=torch.from_numpy(a).dtype) for a in part]
                for dst, src in zip(out, part):
                    dst[torch.from_numpy(rows)] = torch.from_numpy(src)
        batches.append((torch.from_numpy(which), out))
    return batches


def open_loader(kind: str, caches: dict, **kw):
    common = {"B": 8, "seed": 5, **kw}
    if kind == "pretrain":
        return MixedLoader.pretrain(caches["loader"], p=PRETRAIN_P, T=16, **common)
    if kind == "one pretrain source":
        return MixedLoader.pretrain(caches["loader"], p={"wikitext": 1.0}, T=16, **common)
    if kind == "sft":
        return MixedLoader.sft(caches["loader"], p=SFT_P, T=16, **common)
    if kind == "packed sft":
        return MixedLoader.sft(caches["packable"], p=PACKED_P, T=32, packing=True, **common)
    return open_streams_loader(caches["streams"], "train", p=STREAM_P, T=24, **common)


KINDS = ["pretrain", "one pretrain source", "sft", "packed sft", "bytes"]


@pytest.fixture
def caches(loader_caches, packable_caches, stream_caches) -> dict:
    return {"loader": loader_caches, "packable": packable_caches, "streams": stream_caches}


def assert_batch_is(batch, which, tensors) -> None:
    assert torch.equal(batch.source, which) and batch.source.dtype == torch.int64
    for name, want in zip(FIELDS, tensors):
        got = getattr(batch, name)
        assert got.dtype == want.dtype and got.is_contiguous(), name
        assert torch.equal(got.cpu(), want), name
    assert all(getattr(batch, name) is None for name in FIELDS[len(tensors) :])


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("rank, world_size", [(0, 1), (1, 2)])
def test_random_batches_are_each_sources_get_batch_in_its_rows(kind, rank, world_size, caches):
    loader = open_loader(kind, caches, rank=rank, world_size=world_size)
    for step in range(STEPS):
        assert_batch_is(next(loader), *reference_random(loader, step))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("rank, world_size", [(0, 1), (1, 2)])
def test_epoch_batches_are_each_sources_rows_of_its_next_items(kind, rank, world_size, caches):
    loader = open_loader(kind, caches, rank=rank, world_size=world_size, mode="epoch")
    for want in reference_epoch(loader, STEPS):
        assert_batch_is(next(loader), *want)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("mode", ["random", "epoch"])
@pytest.mark.parametrize("rank, world_size", [(0, 1), (1, 2)])
def test_resident_batches_are_the_host_batches(kind, mode, rank, world_size, caches):
    host = open_loader(kind, caches, rank=rank, world_size=world_size, mode=mode)
    resident = open_loader(kind, caches, rank=rank, world_size=world_size, mode=mode, resident=True)
    assert resident.assembler.resident and not host.assembler.resident
    for _ in range(STEPS):
        want, got = next(host), next(resident)
        assert_batch_is(got, want.source, [getattr(want, name) for name in FIELDS if getattr(want, name) is not None])
        assert got.epochs == want.epochs
    assert resident.state_dict() == host.state_dict()
