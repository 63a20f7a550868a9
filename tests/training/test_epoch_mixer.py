"""EpochMixer and MixedLoader(mode="epoch"): each source's rows are its cursor's next items in the rows the
round robin gave it; every window / example once per epoch, disjoint ranks, exact mixing, epoch counts,
and exact resume in a new process behind the plan fingerprint."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from niels_gpt.batching import StreamBatcher, load_stream_cache
from niels_gpt.cache.build_cache import build_sft_cache
from niels_gpt.cache.loader import MixedLoader
from niels_gpt.cache.pretrain_dataset import PretrainTokenStreamDataset
from niels_gpt.cache.sft_dataset import SFTExampleDataset
from niels_gpt.streams.build import write_stream
from niels_gpt.training.assembly import Assembler
from niels_gpt.training.epoch_mixer import EpochMixer, source_seed
from niels_gpt.training.epoch_order import RankCursor
from niels_gpt.training.round_robin import SmoothRoundRobin
from tests.support.cache_files import numbered_shards
from tests.support.chats import random_chats

T, B = 8, 8
# source -> (first token value, shard lengths): every token's value is its position + the first value,
# so a window's x[0] names it. 400 tokens -> 49 windows of T+1 = 9 at stride 8; 9 tokens -> exactly 1.
SHARDS = {"a": (0, [400, 130, 9]), "b": (1000, [260]), "c": (2000, [95, 95, 5])}
P = {"a": 0.5, "b": 0.3, "c": 0.2}
SFT_P = {"dolly15k": 0.25, "oasst1": 0.75}


@pytest.fixture(scope="module")
def caches(tmp_path_factory, tiny_tokenizer) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("epoch_caches")
    for name, (first, lengths) in SHARDS.items():
        numbered_shards(root / "pretrain" / name / "train", lengths, offset=first)
    for k, name in enumerate(SFT_P):
        chats = random_chats(24 + 10 * k, seed=k)
        build_sft_cache(chats, str(root / "sft" / name), tokenizer=tiny_tokenizer, val_frac=0.1, seed=0, source=name)
    return root


def window_starts(name: str) -> list[int]:
    """Every stride-T window of source `name`, by its first token value (written independently of the code)."""
    first, lengths = SHARDS[name]
    starts = []
    for n in lengths:
        starts += [first + j * T for j in range(n) if j * T + T + 1 <= n]
        first += n
    return starts


def pretrain_loader(root: Path, **kw) -> MixedLoader:
    kw = {"p": P, "B": B, "seed": 3, "mode": "epoch", **kw}
    T_ = kw.pop("T", T)
    sources = {name: PretrainTokenStreamDataset(root / "pretrain" / name / "train", T=T_) for name in kw["p"]}
    return MixedLoader(sources, **kw)


def sft_loader(root: Path, **kw) -> MixedLoader:
    return MixedLoader.sft(root, p=SFT_P, T=T, B=B, seed=5, mode="epoch", **kw)


def rows_by_source(batches, names) -> dict[str, list]:
    """Each source's rows (x[0] values) in the order it read them: batch by batch, row by row."""
    out = {name: [] for name in names}
    for batch in batches:
        for row, k in enumerate(batch.source.tolist()):
            out[names[k]].append(int(batch.x[row, 0]))
    return out


@pytest.mark.parametrize("world_size", [1, 2, 3])
def test_every_window_once_per_epoch_and_ranks_share_it(caches, world_size):
    per_rank = []
    for rank in range(world_size):
        loader = pretrain_loader(caches, rank=rank, world_size=world_size)
        batches = [next(loader) for _ in range(80)]
        per_rank.append(rows_by_source(batches, loader.names))
        final = batches[-1].epochs
        for name in loader.names:  # Batch.epochs: completed epochs of each source on this rank
            share = len(range(rank, len(window_starts(name)), world_size))
            assert final[name] == len(per_rank[-1][name]) // share >= 2
    for name in P:
        n = len(window_starts(name))
        for epoch in (0, 1):
            seen = []
            for rank in range(world_size):
                share = len(range(rank, n, world_size))
                seen += per_rank[rank][name][epoch * share : (epoch + 1) * share]
            assert sorted(seen) == window_starts(name), (name, epoch)  # every window exactly once
        share = len(range(0, n, world_size))
        assert per_rank[0][name][:share] != per_rank[0][name][share : 2 * share]  # each epoch a new order


def test_tails_shorter_than_a_window_are_dropped_and_counted(caches):
    datasets = {name: PretrainTokenStreamDataset(caches / "pretrain" / name / "train", T=T) for name in SHARDS}
    assert {name: len(ds) for name, ds in datasets.items()} == {name: len(window_starts(name)) for name in SHARDS}
    # a: 400 -> 49 windows cover 393 tokens (7 left), 130 -> 16 cover 129 (1 left), 9 -> 1 covers 9
    # c: 95 -> 11 windows cover 89 (6 left, twice); the 5-token shard holds no window
    assert datasets["a"].epoch_dropped_tokens == 8 and datasets["c"].epoch_dropped_tokens == 17
    assert "17 tokens in none" in repr(datasets["c"])


def test_rows_are_windows_and_sources_are_mixed_within_one_row(caches):
    loader = pretrain_loader(caches)
    batches = [next(loader) for _ in range(60)]
    which = torch.cat([b.source for b in batches]).numpy()
    n = np.arange(1, len(which) + 1)
    for k, name in enumerate(loader.names):
        assert np.abs(np.cumsum(which == k) - P[name] * n).max() <= 1  # after any number of rows
    for step, b in enumerate(batches):
        assert torch.equal(b.x, b.x[:, :1] + torch.arange(T)) and torch.equal(b.y, b.x + 1)
        assert b.x.dtype == torch.int64 and b.step == step


def test_sft_examples_once_per_epoch(caches):
    loader = sft_loader(caches)
    datasets = {name: SFTExampleDataset.from_cache_dir(caches / "sft" / name, T=T) for name in SFT_P}
    batches = [next(loader) for _ in range(12)]
    assert all(b.y_masked is not None and ((b.y_masked != -100).sum(1) > 0).all() for b in batches)
    for k, name in enumerate(loader.names):
        rows = torch.cat([torch.cat([b.x, b.y, b.y_masked], 1)[b.source == k] for b in batches])
        n = len(datasets[name])
        want = np.concatenate(datasets[name].rows(np.arange(n)), 1)
        assert len(rows) >= n and sorted(map(tuple, rows[:n].tolist())) == sorted(map(tuple, want.tolist()))


def test_byte_streams_once_per_epoch(tmp_path):
    rng = np.random.default_rng(0)
    for name, size in (("wiki", 300), ("roam", 120)):
        write_stream(tmp_path, name, "train", rng.integers(0, 256, size, dtype=np.uint8).tobytes(), {})
    streams = load_stream_cache(tmp_path, "train")
    sources = {name: StreamBatcher({name: data}, p={name: 1.0}, T=T) for name, data in streams.items()}
    assert len(sources["wiki"]) == 299 // T and sources["wiki"].epoch_dropped_bytes == 299 % T
    loader = MixedLoader(sources, p={"wiki": 0.7, "roam": 0.3}, B=B, seed=0, mode="epoch")
    batches = [next(loader) for _ in range(10)]
    rows = torch.cat([torch.cat([b.x, b.y], 1)[b.source == loader.names.index("wiki")] for b in batches])
    want = np.concatenate(sources["wiki"].rows(np.arange(len(sources["wiki"]))), 1)
    assert sorted(map(tuple, rows[: len(want)].tolist())) == sorted(map(tuple, want.tolist()))
    other = tmp_path / "other"
    write_stream(other, "wiki", "train", rng.integers(0, 256, 300, dtype=np.uint8).tobytes(), {})
    changed = StreamBatcher(load_stream_cache(other, "train"), p={"wiki": 1.0}, T=T)
    assert changed.identity != sources["wiki"].identity  # same length, other bytes: the meta sha256 differs


def resume_here(root: str, kind: str, state_path: str, steps: int) -> str:
    """Build the loader, load the saved state, and digest the next `steps` batches (run in a new process)."""
    loader = (pretrain_loader if kind == "pretrain" else sft_loader)(Path(root))
    with open(state_path) as f:
        loader.load_state_dict(json.load(f))
    return digest([next(loader) for _ in range(steps)])


def digest(batches) -> str:
    parts = [
        (b.step, b.epochs, [t.tolist() for t in (b.x, b.y, b.y_masked, b.source) if t is not None]) for b in batches
    ]
    return json.dumps(parts, sort_keys=True)


@pytest.mark.parametrize("kind", ["pretrain", "sft"])
def test_n_plus_m_steps_equal_n_then_save_new_process_load_m(caches, tmp_path, kind):
    make = pretrain_loader if kind == "pretrain" else sft_loader
    N, M = 23, 31  # both sides cross epoch ends of every source
    straight = make(caches)
    expected = [next(straight) for _ in range(N + M)][N:]
    saver = make(caches)
    for _ in range(N):
        next(saver)
    state_path = tmp_path / "state.json"
    state_path.write_text(json.dumps(saver.state_dict()))
    code = (
        f"import sys; sys.path.insert(0, {str(Path(__file__).parents[2])!r}); "
        "import tests.training.test_epoch_mixer as t; "
        f"print(t.resume_here({str(caches)!r}, {kind!r}, {str(state_path)!r}, {M}))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == digest(expected)
    assert expected[-1].epochs != expected[0].epochs or kind == "sft"


def test_state_holds_step_positions_credits_and_the_fingerprint(caches):
    loader = pretrain_loader(caches, rank=1, world_size=2)
    for _ in range(5):
        next(loader)
    state = loader.state_dict()
    assert state["step"] == 5 and set(state["sources"]) == set(state["credits"]) == set(P)
    assert sum(state["credits"].values()) == 0
    assert state["sources"]["c"] == {"epoch": 0, "cursor": 8}  # 40 rows * 0.2 = 8 of its 11 per epoch
    fp = state["fingerprint"]
    assert (fp["mode"], fp["rank"], fp["world_size"], fp["B"], fp["T"], fp["seed"], fp["schedule"]) == (
        "epoch",
        1,
        2,
        B,
        T,
        3,
        [[0, P]],
    )
    assert set(fp["caches"]) == set(P) and all(len(v) == 64 for v in fp["caches"].values())


@pytest.mark.parametrize(
    "change, named",
    [
        ({"seed": 4}, "seed: state has 3, loader has 4"),
        ({"B": 4}, "B: state has 8, loader has 4"),
        ({"T": 4}, "T: state has 8, loader has 4"),
        ({"rank": 1, "world_size": 2}, "rank: state has 0, loader has 1; world_size: state has 1, loader has 2"),
        ({"mode": "random"}, "mode: state has 'epoch', loader has 'random'"),
    ],
)
def test_a_state_of_another_plan_is_refused_naming_what_changed(caches, change, named):
    state = pretrain_loader(caches).state_dict()
    with pytest.raises(ValueError, match="refusing to resume") as e:
        pretrain_loader(caches, **change).load_state_dict(state)
    assert named in str(e.value)


def test_changed_cache_and_old_state_versions_are_refused(caches, tmp_path, tiny_tokenizer):
    state = sft_loader(caches).state_dict()
    moved = tmp_path / "sft"
    for k, name in enumerate(SFT_P):
        chats = random_chats(24 + 10 * k, seed=k + (name == "oasst1"))
        build_sft_cache(chats, str(moved / name), tokenizer=tiny_tokenizer, val_frac=0.1, seed=0, source=name)
    with pytest.raises(ValueError, match=r"caches\['oasst1'\]: state has '[0-9a-f]{12}\.\.\.', loader has") as e:
        sft_loader(tmp_path).load_state_dict(state)
    assert "dolly15k" not in str(e.value)  # rebuilt from the same chats: same sha256s, same identity
    old = {k: v for k, v in state.items() if k != "fingerprint"} | {"version": 1}
    with pytest.raises(ValueError, match="no plan fingerprint.*older niels_gpt.*version 4"):
        sft_loader(caches).load_state_dict(old)


def test_a_tampered_position_is_refused(caches):
    loader = pretrain_loader(caches)
    for _ in range(3):
        next(loader)
    state = json.loads(json.dumps(loader.state_dict()))
    state["sources"]["a"]["cursor"] += 1
    with pytest.raises(ValueError, match="inconsistent epoch-mode state: source 'a'"):
        pretrain_loader(caches).load_state_dict(state)
    del state["credits"]
    with pytest.raises(ValueError, match=r"not an epoch-mode state \(KeyError: 'credits'"):
        pretrain_loader(caches).load_state_dict(state)


def test_sources_that_cannot_be_read_as_items_are_refused(caches):
    class DrawOnly:
        def get_batch(self, *, B, generator):
            return torch.zeros((B, T), dtype=torch.int64), torch.zeros((B, T), dtype=torch.int64)

    with pytest.raises(TypeError, match=r"mode='epoch' reads each source as items.*\['x'\]"):
        MixedLoader({"x": DrawOnly()}, p={"x": 1.0}, B=B, seed=0, mode="epoch")
    with pytest.raises(ValueError, match="source 'c': 22 items cannot be shared by world_size=23"):
        pretrain_loader(caches, world_size=23)
    with pytest.raises(ValueError, match="batch_at is for mode='random'"):
        pretrain_loader(caches).batch_at(0)
    with pytest.raises(ValueError, match="mode must be one of"):
        pretrain_loader(caches, mode="shuffle")


def test_sources_of_equal_size_get_different_orders():
    assert source_seed(0, "a") != source_seed(0, "b") and source_seed(0, "a") != source_seed(1, "a")


class Items:
    """`n` items; rows(ids) -> (first + ids, 2 * (first + ids)) as int64 arrays, or `arity` copies of the first."""

    def __init__(self, n: int, first: int, arity: int = 2):
        self.n, self.first, self.arity = n, first, arity

    def __len__(self) -> int:
        return self.n

    def rows(self, ids):
        values = self.first + np.asarray(ids, dtype=np.int64)
        return (values, 2 * values) if self.arity == 2 else (values,) * self.arity


def next_arrays(mixer: EpochMixer, B: int, step: int = 0):
    """(source of each row, the batch's arrays) of batch `step`'s B rows, read as MixedLoader reads them."""
    which, counts = mixer.assign(B, step)
    sources = {name: mixer.sources[name] for name in mixer.names}
    tensors = Assembler(sources, B=B, T=1, device=torch.device("cpu")).epoch(which, counts, mixer.take)
    return which, [t.numpy() for t in tensors]


@pytest.mark.parametrize("rank, world_size", [(0, 1), (1, 2)])
def test_each_sources_rows_are_its_cursors_next_items_in_the_rows_it_was_assigned(rank, world_size):
    p = {"a": 0.6, "b": 0.4}
    mixer = EpochMixer({"b": Items(5, 100), "a": Items(7, 0)}, p, seed=3, rank=rank, world_size=world_size)
    round_robin = SmoothRoundRobin([0.6, 0.4])  # sources in name order: a, b
    cursors = {
        name: RankCursor(n, source_seed(3, name), rank=rank, world_size=world_size) for name, n in (("a", 7), ("b", 5))
    }
    for step in range(7):  # 28 rows: several epochs of both sources, and credits in the middle of a period
        which, (values, doubled) = next_arrays(mixer, 4, step)
        assert np.array_equal(which, round_robin.assign(4)) and np.array_equal(doubled, 2 * values)
        for k, (name, first) in enumerate((("a", 0), ("b", 100))):
            assert np.array_equal(values[which == k], first + cursors[name].take(int((which == k).sum())))
    assert (
        mixer.epochs() == {name: cursor.epoch for name, cursor in cursors.items()} and min(mixer.epochs().values()) >= 2
    )
    assert any(round_robin.credits)  # mid-period: the saved credits are not all 0
    assert {key: value for key, value in mixer.state().items() if key not in ("ledger", "history")} == {
        "sources": {name: {"epoch": c.epoch, "cursor": c.cursor} for name, c in cursors.items()},
        "credits": {"a": round_robin.credits[0], "b": round_robin.credits[1]},
        "credit_unit": round_robin.total,
    }


def test_sources_whose_rows_return_different_arrays_are_refused():
    mixer = EpochMixer(
        {"a": Items(10, 0, arity=1), "b": Items(10, 0)}, {"a": 0.5, "b": 0.5}, seed=0, rank=0, world_size=1
    )
    with pytest.raises(ValueError) as e:
        next_arrays(mixer, 4)
    assert str(e.value) == "source 'b' returned 2 arrays from rows(), the others 1"


@pytest.mark.parametrize("rank, world_size", [(0, 1), (1, 2)])
def test_skip_records_what_batch_by_batch_recording_records(monkeypatch, rank, world_size):
    """skip() in chunks (here of 7 steps) against the batch-by-batch path: the same ledger (every digest kept), the
    same cursors and credits, over a ramp, a source that starts at 0 and one whose weight goes to 0."""
    from niels_gpt.training import epoch_mixer

    monkeypatch.setattr(epoch_mixer, "SKIP_CHUNK", 7)
    p = [(0, {"a": 0.7, "b": 0.3}), (20, {"a": 0.2, "b": 0.5, "c": 0.3}), (90, {"b": 0.1, "c": 0.9})]
    sources = {"a": Items(37, 0), "b": Items(11, 1000), "c": Items(23, 5000)}
    stepped, skipped = (EpochMixer(sources, p, seed=5, rank=rank, world_size=world_size) for _ in range(2))
    for step in range(130):
        which, counts = stepped.assign(8, step)
        for k, count in enumerate(counts):
            if count:
                stepped.take(k, count)
        stepped.record(step, which)
    skipped.skip(8, 0, 50)
    skipped.skip(8, 50, 80)
    assert skipped.state() == stepped.state() and skipped.ledger.digest == stepped.ledger.digest
