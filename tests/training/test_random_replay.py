"""random_replay: torch's CPU generator and random mode's draws, replayed in numpy for many batches at once, give
the digests torch's own draws give; where they would not (another generator), batch_digests uses torch's draws."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from niels_gpt.sampling import derive_seed
from niels_gpt.training import random_mixer, random_replay
from niels_gpt.training.loader import MixedLoader
from niels_gpt.training.random_replay import derive_seeds, mt_words
from tests.training.test_schedule import RAMP, P, loader

SFT = {"oasst1": 0.5, "dolly15k": 0.5}


def test_mt_words_are_the_words_of_torchs_cpu_generator():
    seeds = [0, 1, 7, 123_456_789, 2**32 - 1]
    for n in (1, 192, 227, 228, 396, 397, 454, 455, 623, 624):  # every stretch of the twist
        words = mt_words(np.array(seeds, dtype=np.uint32), n)
        for row, seed in zip(words, seeds):
            expected = torch.randint(0, 1000, (n,), generator=torch.Generator().manual_seed(seed))
            assert np.array_equal(row % 1000, expected.numpy())


def test_derive_seeds_is_derive_seed():
    steps = np.array([0, 1, 2, 10**6, 2**40 + 3])
    for seed, rank in ((0, 0), (7, 3), (-5, 1), (2**63 - 1, 2)):
        assert derive_seeds(seed, steps, rank).tolist() == [derive_seed(seed, s, rank) for s in steps.tolist()]


def digests(mixed: MixedLoader, first: int, last: int, rank: int) -> tuple[bytes | None, bytes]:
    """(the replay's, torch's draws') digests of batches first..last-1."""
    fast = random_replay.replay_digests(mixed, first, last, rank=rank, schedule=mixed.history)
    return fast, random_mixer.draws_digests(mixed, first, last, rank=rank, schedule=mixed.history)


@pytest.mark.parametrize("B", [1, 2, 5, 64])
@pytest.mark.parametrize(
    "p", [P, RAMP, [(0, {"wikitext": 1.0}), (30, {"gutenberg": 1.0})]], ids=["fixed", "ramp", "jump"]
)
def test_window_draws_replayed_give_the_digests_of_torchs_draws(loader_caches, B, p):
    mixed = MixedLoader.pretrain(loader_caches, p=p, T=64, B=B, seed=7, rank=1, world_size=2)
    fast, slow = digests(mixed, 3, 120, rank=1)
    assert fast == slow and len(slow) == 117 * 16 or B == 1 and fast is None  # one row: torch draws it otherwise
    assert random_mixer.batch_digests(mixed, 3, 120, rank=1, schedule=mixed.history) == slow


def test_item_draws_replayed_give_the_digests_of_torchs_draws(loader_caches):
    mixed = MixedLoader.sft(loader_caches, p=SFT, T=64, B=16, seed=4)
    fast, slow = digests(mixed, 0, 90, rank=0)
    assert fast == slow


class Numbers:
    """A source of n items (n up to 2**40): draw_items is torch.randint(0, n); an item's row holds its number."""

    def __init__(self, n: int):
        self.n = n

    def __len__(self) -> int:
        return self.n

    def draw_items(self, B: int, generator) -> np.ndarray:
        return torch.randint(0, self.n, (B,), generator=generator).numpy()

    def uniform_draw(self):
        return self.n, None

    def rows(self, ids):
        ids = np.asarray(ids, dtype=np.int64)[:, None]
        return np.repeat(ids, 4, axis=1), np.repeat(ids + 1, 4, axis=1)

    def get_batch(self, *, B: int, generator):
        return tuple(torch.from_numpy(a) for a in self.rows(self.draw_items(B, generator)))


def test_numbers_of_one_word_and_of_two_are_replayed():
    """torch's randint takes two words a number from a range of 2**28 on: ranges on both sides of it, mixed."""
    sources = {"a": Numbers(3), "b": Numbers(2**28 - 1), "c": Numbers(2**28), "d": Numbers(2**40 + 7)}
    mixed = MixedLoader(sources, p={"a": 0.1, "b": 0.3, "c": 0.2, "d": 0.4}, B=24, seed=9)
    fast, slow = digests(mixed, 0, 80, rank=0)
    assert fast == slow


def test_another_generator_falls_back_to_torchs_draws(loader_caches, monkeypatch):
    mixed = loader(loader_caches, "random", p=P)
    monkeypatch.setattr(random_replay, "RANDINT_64", 1)  # as if torch drew two words for every number
    fast, slow = digests(mixed, 0, 100, rank=0)
    assert fast != slow
    assert random_mixer.batch_digests(mixed, 0, 100, rank=0, schedule=mixed.history) == slow


def test_a_long_random_state_resumes_through_the_replay(loader_caches):
    saver = loader(loader_caches, "random", rank=1, world_size=2)
    for _ in range(150):
        next(saver)
    resumed = loader(loader_caches, "random", rank=0, world_size=2)
    resumed.load_state_dict(json.loads(json.dumps(saver.state_dict())))
    straight = loader(loader_caches, "random", rank=0, world_size=2)
    straight.skip(150)
    assert resumed.state_dict()["ledger"] == straight.state_dict()["ledger"]
    assert torch.equal(next(resumed).x, next(straight).x)
