"""EpochSampler: seeded endless epochs, disjoint ranks covering each epoch, int state that resumes exactly."""

from __future__ import annotations

import itertools
import json

import pytest
import torch.distributed as dist

from niels_gpt.training.samplers import EpochSampler, resolve_rank


def take(iterator, n: int) -> list[int]:
    return list(itertools.islice(iterator, n))


def test_every_epoch_visits_every_item_once_in_its_own_order():
    sampler = EpochSampler(10, seed=3)
    order = take(iter(sampler), 30)
    epochs = [order[i : i + 10] for i in range(0, 30, 10)]
    assert all(sorted(e) == list(range(10)) for e in epochs)
    assert len({tuple(e) for e in epochs}) == 3  # every epoch is shuffled anew
    assert take(iter(EpochSampler(10, seed=4)), 10) != epochs[0]


def test_iter_has_no_side_effect_and_the_order_is_a_function_of_the_seed():
    sampler = EpochSampler(list(range(25)), seed=1)
    assert take(iter(sampler), 60) == take(iter(sampler), 60) == take(iter(EpochSampler(25, seed=1)), 60)


def test_ranks_are_disjoint_and_together_read_each_epoch_once():
    n, world = 11, 3
    samplers = [EpochSampler(n, seed=5, rank=r, world_size=world) for r in range(world)]
    assert [s.per_epoch for s in samplers] == [4, 4, 3]
    for epoch in range(2):
        parts = [take(iter(s), s.per_epoch * (epoch + 1))[s.per_epoch * epoch :] for s in samplers]
        assert sorted(itertools.chain(*parts)) == list(range(n))
    with pytest.raises(ValueError, match="cannot be shared by world_size=4"):
        EpochSampler(3, seed=0, rank=0, world_size=4)


def test_rank_and_world_size_come_from_torch_distributed_when_it_is_initialized(monkeypatch):
    assert resolve_rank() == (0, 1) and resolve_rank(2, 4) == (2, 4)
    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "get_rank", lambda: 1)
    monkeypatch.setattr(dist, "get_world_size", lambda: 3)
    assert resolve_rank() == (1, 3) and resolve_rank(rank=0) == (0, 3)
    sampler = EpochSampler(9, seed=0)
    assert (sampler.rank, sampler.world_size) == (1, 3)
    with pytest.raises(ValueError, match="rank must be an int with 0 <= rank < 3"):
        resolve_rank(rank=3)


def test_state_is_a_fresh_dict_of_ints_and_resumes_exactly_across_an_epoch_end():
    sampler = EpochSampler(7, seed=9, rank=1, world_size=2)  # 3 items an epoch on rank 1
    straight = take(iter(sampler), 12)
    it = iter(sampler)
    take(it, 5)
    state = it.state_dict()
    assert state is not it.state_dict() and (state["epoch"], state["cursor"], it.epoch) == (1, 2, 1)
    state = json.loads(json.dumps(state))
    take(it, 1)  # the saved dict does not follow the iterator
    assert (state["epoch"], state["cursor"]) == (1, 2)
    resumed = iter(EpochSampler(7, seed=9, rank=1, world_size=2))
    resumed.load_state_dict(state)
    assert take(resumed, 7) == straight[5:]


@pytest.mark.parametrize(
    "other, named",
    [
        ({"seed": 10}, "seed: state has 9, loader has 10"),
        ({"data_source": 8}, "items: state has 7, loader has 8"),
        ({"rank": 0}, "rank: state has 1, loader has 0"),
    ],
)
def test_a_state_of_another_order_is_refused_naming_what_differs(other, named):
    state = iter(EpochSampler(7, seed=9, rank=1, world_size=2)).state_dict()
    settings = {"data_source": 7, "seed": 9, "rank": 1, "world_size": 2, **other}
    with pytest.raises(ValueError, match="refusing to resume from a state of a different loader") as e:
        iter(EpochSampler(**settings)).load_state_dict(state)
    assert named in str(e.value)


def test_a_malformed_state_is_refused():
    it = iter(EpochSampler(7, seed=9))
    with pytest.raises(ValueError, match="needs 'epoch' and 'cursor'"):
        it.load_state_dict({"step": 3})
    with pytest.raises(ValueError, match="cursor"):
        it.load_state_dict({**it.state_dict(), "cursor": 7})
