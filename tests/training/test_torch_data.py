"""Map-style datasets over every cache: dict items equal to the readers' rows, picklable without their memory
maps, packed boundaries never targets, and DataLoader batches that do not depend on num_workers."""

from __future__ import annotations

import itertools
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

from niels_gpt.batching import StreamBatcher, load_stream_cache
from niels_gpt.pretrain.dataset import PretrainTokenStreamDataset
from niels_gpt.sft.dataset import SFTExampleDataset
from niels_gpt.training.batch_dict import KEYS, PACKED_KEYS, as_dict
from niels_gpt.training.samplers import EpochSampler
from niels_gpt.training.torch_data import ByteWindows, PackedSFTRows, PretrainWindows, SFTExamples
from tests.support.dict_batches import same, take

T, B = 16, 4
PACKED_T = 32
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def datasets(loader_caches, packable_caches, stream_caches):
    """Each dataset beside the reader it reads."""
    pretrain_dir = loader_caches / "pretrain" / "wikitext" / "train"
    sft_dir = loader_caches / "sft" / "oasst1"
    packed_dir = packable_caches / "sft" / "oasst1"
    streams = load_stream_cache(stream_caches, "train")
    return {
        "pretrain": (PretrainWindows(pretrain_dir, T=T), PretrainTokenStreamDataset(pretrain_dir, T=T)),
        "sft": (SFTExamples(sft_dir, T=T), SFTExampleDataset.from_cache_dir(sft_dir, T=T)),
        "packed": (
            PackedSFTRows(packed_dir, T=PACKED_T, seed=2),
            SFTExampleDataset.from_cache_dir(packed_dir, T=PACKED_T, packing=True, seed=2),
        ),
        "bytes": (
            ByteWindows(stream_caches, T=T),
            StreamBatcher(streams, p={"primer": 0.5, "roam": 0.25, "wiki": 0.25}, T=T),
        ),
    }


@pytest.mark.parametrize("kind", ["pretrain", "sft", "packed", "bytes"])
def test_item_i_is_row_i_of_the_reader_as_a_dict_item(datasets, kind):
    ds, reader = datasets[kind]
    assert len(ds) == len(reader) > B
    ids = [0, len(ds) - 1, 3, 3]
    want = as_dict(*reader.rows(np.array(ids)))
    items = ds.__getitems__(ids)
    assert tuple(items[0]) == (PACKED_KEYS if kind == "packed" else KEYS)
    for row, i in enumerate(ids):
        item = ds[i]
        assert all(v.shape == (ds.T,) and v.dtype == torch.int64 for v in item.values())
        assert all(torch.equal(item[key], want[key][row]) and torch.equal(items[row][key], item[key]) for key in want)
    with pytest.raises(IndexError, match="out of range"):
        ds[len(ds)]
    with pytest.raises(IndexError):
        ds.__getitems__([0, -1])


def test_packed_rows_never_target_across_an_example_boundary(datasets):
    ds, _ = datasets["packed"]
    batch = ds.__getitems__(list(range(len(ds))))
    inner_starts = 0
    for item in batch:
        seg, pos = item["segment_ids"], item["position_ids"]
        begins = torch.nonzero(seg[1:] != seg[:-1]).squeeze(1) + 1  # an example (or the padding) starts here
        inner_starts += int((seg[begins] > 0).sum())
        assert (item["labels"][begins] == -100).all() and (item["shift_labels"][begins - 1] == -100).all()
        assert (pos[begins] == 0).all() and pos[0] == 0
        inside = torch.ones_like(seg, dtype=torch.bool)
        inside[begins] = False
        inside[0] = False
        assert torch.equal(pos[inside], pos[torch.nonzero(inside).squeeze(1) - 1] + 1)  # counts up inside each
    assert inner_starts >= 5  # some rows hold several examples


def test_padded_rows_count_positions_from_0_and_keep_y_masked(datasets):
    ds, reader = datasets["sft"]
    item = ds[5]
    _, _, y_masked = reader.rows(np.array([5]))
    assert torch.equal(item["position_ids"], torch.arange(T))
    assert torch.equal(item["shift_labels"], torch.from_numpy(y_masked[0])) and item["labels"][0] == -100


def test_pickles_without_its_memory_maps_and_opens_them_again(datasets, loader_caches, tmp_path):
    ds, _ = datasets["pretrain"]
    data = pickle.dumps(ds)
    assert len(data) < 2_000  # paths and settings, no tokens
    copy = pickle.loads(data)
    assert copy._opened is None and len(copy) == len(ds) and torch.equal(copy[7]["input_ids"], ds[7]["input_ids"])
    moved = tmp_path / "wikitext"
    shutil.copytree(loader_caches / "pretrain" / "wikitext", moved)
    built = pickle.dumps(PretrainWindows(moved / "train", T=T))
    shutil.rmtree(moved)
    shutil.copytree(loader_caches / "pretrain" / "gutenberg", moved)  # other tokens under the same path
    with pytest.raises(ValueError, match="the caches changed on disk since it was built"):
        pickle.loads(built)[0]


def test_the_tokenizer_is_checked_when_built(loader_caches, tiny_tokenizer):
    split = loader_caches / "pretrain" / "wikitext" / "train"
    assert len(PretrainWindows(split, T=T, tokenizer=tiny_tokenizer)) > 0
    other = type("Tok", (), {"sha256": "0" * 64, "model_path": "other.model"})()
    with pytest.raises(ValueError, match="rebuild the cache with this tokenizer"):
        PretrainWindows(split, T=T, tokenizer=other)
    with pytest.raises(ValueError, match="tokenizer"):
        SFTExamples(loader_caches / "sft" / "oasst1", T=T, tokenizer=other)


def test_too_large_a_t_is_refused(stream_caches):
    with pytest.raises(ValueError, match="shorter than T\\+1"):
        ByteWindows(stream_caches, T=4_000)


def batches(ds, sampler, k: int, n: int, **kw) -> list[dict]:
    return take(DataLoader(ds, batch_size=B, sampler=sampler, num_workers=k, **kw), n)


@pytest.mark.filterwarnings("ignore:This DataLoader will create 3 worker processes")
@pytest.mark.parametrize("kind", ["pretrain", "packed"])
def test_dataloader_batches_are_the_same_for_0_to_3_workers(datasets, kind):
    ds, reader = datasets[kind]
    sampler = EpochSampler(ds, seed=11)
    n = len(ds) // B + 3  # into the second epoch
    reference = batches(ds, sampler, 0, n)
    first = list(itertools.islice(iter(sampler), B))  # the sampler is the only order
    want = as_dict(*reader.rows(np.array(first)))
    assert all(torch.equal(reference[0][key], want[key]) for key in want)
    for k in (1, 2, 3):
        assert same(batches(ds, sampler, k, n), reference), f"num_workers={k}"


def test_ranks_read_disjoint_items_that_cover_the_epoch(datasets):
    ds, _ = datasets["pretrain"]
    seen = []
    for rank in range(2):
        sampler = EpochSampler(ds, seed=1, rank=rank, world_size=2)
        rows = torch.cat([b["input_ids"] for b in batches(ds, sampler, 0, sampler.per_epoch // B)])
        seen += [tuple(r) for r in rows.tolist()]
    assert len(set(seen)) == len(seen) >= len(ds) - 2 * B  # every rank's rows are its own


def test_spawned_workers_open_the_caches_again(datasets):
    ds, _ = datasets["packed"]
    sampler = EpochSampler(ds, seed=4)
    assert same(batches(ds, sampler, 1, 3, multiprocessing_context="spawn"), batches(ds, sampler, 0, 3))


def test_the_package_imports_and_reads_without_torchdata_or_transformers(loader_caches):
    code = (
        "import sys; sys.modules['torchdata'] = None; sys.modules['transformers'] = None\n"
        "import niels_gpt.training\n"
        "from niels_gpt.training import batch_dict, loader_state, mixture, samplers, torch_data\n"
        f"ds = torch_data.PretrainWindows({str(loader_caches / 'pretrain' / 'wikitext' / 'train')!r}, T=8)\n"
        "print(next(iter(samplers.EpochSampler(ds, seed=0))) < len(ds), sorted(ds[0]))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "True ['input_ids', 'labels', 'position_ids', 'shift_labels']"
