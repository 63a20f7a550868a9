"""MixedBatches: MixedLoader's batches as dict batches, the same for 0-3 DataLoader workers, in random and
epoch mode; picklable; worker states that refuse other workers and other plans."""

from __future__ import annotations

import json
import pickle
import shutil

import pytest
from torch.utils.data import DataLoader

from niels_gpt.training.loader import MixedLoader
from niels_gpt.training.mixture import MixedBatches, MixedBatchIterator, open_streams_loader
from tests.support.dict_batches import same, take

PRETRAIN_P = {"fineweb_edu": 0.5, "wikitext": 0.3, "gutenberg": 0.2}  # the sources of loader_caches
PACKED_P = {"dolly15k": 0.3, "oasst1": 0.7}  # the sources of packable_caches
STREAM_P = {"wiki": 0.5, "roam": 0.3, "primer": 0.2}  # the streams of stream_caches
T, B, N = 64, 8, 40  # 40 batches of 8 rows cross the epoch ends of every pretrain source (35-39 windows each)


def mixture(root, mode: str, **kw) -> MixedBatches:
    return MixedBatches.pretrain(root, **{"p": PRETRAIN_P, "T": T, "B": B, "seed": 7, "mode": mode, **kw})


def batches(ds, k: int, n: int = N) -> list[dict]:
    return take(DataLoader(ds, batch_size=None, num_workers=k), n)


@pytest.mark.parametrize("mode", ["random", "epoch"])
def test_batch_g_is_mixed_loader_batch_g_as_a_dict(loader_caches, mode):
    loader = MixedLoader.pretrain(loader_caches, p=PRETRAIN_P, T=T, B=B, seed=7, mode=mode)
    want = [next(loader).as_dict() for _ in range(N)]
    assert same(batches(mixture(loader_caches, mode), 0), want)
    if mode == "epoch":
        assert min(next(loader).epochs.values()) >= 1


@pytest.mark.filterwarnings("ignore:This DataLoader will create 3 worker processes")
@pytest.mark.parametrize("mode", ["random", "epoch"])
def test_batches_are_the_same_for_0_to_3_workers(loader_caches, mode):
    ds = mixture(loader_caches, mode)
    reference = batches(ds, 0)
    for k in (1, 2, 3):
        assert same(batches(ds, k), reference), f"num_workers={k}"


def test_packed_sft_batches_carry_segment_ids_and_match_with_workers(packable_caches):
    ds = MixedBatches.sft(packable_caches, p=PACKED_P, T=32, B=B, seed=3, packing=True, mode="epoch")
    loader = MixedLoader.sft(packable_caches, p=PACKED_P, T=32, B=B, seed=3, packing=True, mode="epoch")
    want = [next(loader).as_dict() for _ in range(12)]
    got = batches(ds, 2, 12)
    assert "segment_ids" in got[0] and same(got, want)


def test_byte_streams_mix_by_weight(stream_caches):
    ds = MixedBatches.streams(stream_caches, p=STREAM_P, T=T, B=B, seed=1, mode="epoch")
    loader = open_streams_loader(stream_caches, p=STREAM_P, T=T, B=B, seed=1, mode="epoch")
    assert loader.names == ["primer", "roam", "wiki"]
    assert same(batches(ds, 2, 10), [next(loader).as_dict() for _ in range(10)])


def test_another_negative_ignore_index_is_converted_a_token_id_refused(loader_caches):
    p = {"oasst1": 0.5, "dolly15k": 0.5}
    default = MixedBatches.sft(loader_caches, p=p, T=T, B=B, seed=0)
    minus_one = MixedBatches.sft(loader_caches, p=p, T=T, B=B, seed=0, ignore_index=-1)
    assert same(batches(minus_one, 0, 3), batches(default, 0, 3))
    with pytest.raises(ValueError, match="could be a token id"):
        MixedBatches.sft(loader_caches, p=p, T=T, B=B, seed=0, ignore_index=0)


def test_rank_comes_from_torch_distributed_when_the_dataset_is_built(loader_caches, monkeypatch):
    import torch.distributed as dist

    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "get_rank", lambda: 1)
    monkeypatch.setattr(dist, "get_world_size", lambda: 2)
    ds = mixture(loader_caches, "epoch")
    assert (ds.rank, ds.world_size) == (1, 2) and ds.fingerprint["rank"] == 1
    loader = MixedLoader.pretrain(loader_caches, p=PRETRAIN_P, T=T, B=B, seed=7, mode="epoch", rank=1, world_size=2)
    assert same(batches(ds, 0, 5), [next(loader).as_dict() for _ in range(5)])


def test_pickles_without_the_caches_and_refuses_caches_that_changed(loader_caches, tmp_path):
    ds = mixture(loader_caches, "random")
    data = pickle.dumps(ds)
    assert len(data) < 4_000
    assert same(batches(pickle.loads(data), 0, 3), batches(ds, 0, 3))
    for name in PRETRAIN_P:
        shutil.copytree(loader_caches / "pretrain" / name, tmp_path / "pretrain" / name)
    moved = pickle.dumps(mixture(tmp_path, "random"))
    shutil.rmtree(tmp_path / "pretrain" / "wikitext")
    shutil.copytree(loader_caches / "pretrain" / "gutenberg", tmp_path / "pretrain" / "wikitext")
    with pytest.raises(ValueError, match="changed on disk since it was built.*caches\\['wikitext'\\]"):
        next(iter(pickle.loads(moved)))


def test_worker_state_is_plain_and_resumes_that_worker(loader_caches):
    ds = mixture(loader_caches, "epoch")
    it = MixedBatchIterator(ds, 1, 3, handover=False)  # batches 1, 4, 7, ...
    for _ in range(4):
        next(it)
    state = json.loads(json.dumps(it.state_dict()))
    assert (state["worker"], state["num_workers"], state["loader"]["step"]) == (1, 3, 13)
    expected = next(it)
    resumed = MixedBatchIterator(ds, 1, 3, handover=False)
    resumed.load_state_dict(state)
    assert same([next(resumed)], [expected])


def test_a_state_of_another_worker_or_plan_is_refused(loader_caches):
    state = MixedBatchIterator(mixture(loader_caches, "epoch"), 1, 2).state_dict()
    with pytest.raises(ValueError, match="saved by worker 1 of num_workers=2, loaded into worker 1 of 3"):
        MixedBatchIterator(mixture(loader_caches, "epoch"), 1, 3).load_state_dict(state)
    with pytest.raises(ValueError, match="refusing to resume from a state of a different loader \\(seed: state has 7"):
        MixedBatchIterator(mixture(loader_caches, "epoch", seed=8), 1, 2).load_state_dict(state)
    one = MixedBatchIterator(mixture(loader_caches, "random"), 0, 1)
    for _ in range(3):
        next(one)
    with pytest.raises(ValueError, match="not one of its batches"):  # batch 3 is worker 1's of 2
        MixedBatchIterator(mixture(loader_caches, "random"), 0, 2).load_state_dict(
            {**one.state_dict(), "num_workers": 2}
        )
    with pytest.raises(ValueError, match="not a MixedBatches state"):
        MixedBatchIterator(mixture(loader_caches, "epoch"), 1, 2).load_state_dict({"step": 3})
