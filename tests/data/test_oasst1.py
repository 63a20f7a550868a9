"""oasst1: the cap on a long thread, exclusions, orphans, tree order, a brute-force check, and the loader on
local parquet in the hub schema (a whole read, seeded tree shuffle, reads that shuffle or take rows refused)."""

from __future__ import annotations

import random

import pytest

from niels_gpt.data.hub import HubRead
from niels_gpt.data.oasst1 import DATASET_ID, iter_oasst1_sft, reconstruct_threads
from tests.support.hub_files import OASST_BRANCHING as BRANCHING
from tests.support.hub_files import oasst_record as rec
from tests.support.hub_files import oasst_rows, rows_to_columns, write_parquet

P, A = "prompter", "assistant"


def ids(samples):
    return [s.meta["message_ids"] for s in samples]


def test_thread_longer_than_cap_keeps_its_first_messages_ending_with_assistant():
    chain = [rec("m0", None, P)] + [rec(f"m{i}", f"m{i - 1}", A if i % 2 else P) for i in range(1, 40)]
    assert ids(reconstruct_threads(chain, max_messages=32)) == [[f"m{i}" for i in range(32)]]
    assert ids(reconstruct_threads(chain, max_messages=31)) == [[f"m{i}" for i in range(30)]]
    assert len(reconstruct_threads(chain, max_messages=64)[0].messages) == 40


def test_deleted_message_and_its_subtree_are_excluded():
    records = [
        rec("r", None, P),
        rec("a1", "r", A, deleted=True),
        rec("p2", "a1", P),
        rec("a3", "p2", A),
        rec("a2", "r", A),
    ]
    stats = {}
    assert ids(reconstruct_threads(records, stats=stats)) == [["r", "a2"]]
    assert stats["deleted"] == 1


def test_deleted_root_drops_the_tree():
    assert reconstruct_threads([rec("r", None, P, deleted=True), rec("a", "r", A)]) == []


def test_orphans_are_skipped_not_a_crash():
    records = [rec("x", "nowhere", A), rec("y", "x", P), *BRANCHING]
    stats = {}
    out = reconstruct_threads(records, stats=stats)
    assert ids(out) == ids(reconstruct_threads(BRANCHING))
    assert stats["orphans"] == 1


def test_english_only_drops_non_english_messages_and_their_subtrees():
    records = [
        rec("r", None, P),
        rec("a1", "r", A, lang="de"),
        rec("p2", "a1", P),
        rec("a3", "p2", A),
        rec("a2", "r", A),
        {k: v for k, v in rec("a5", "r", A).items() if k != "lang"},  # no lang field: kept
    ]
    assert ids(reconstruct_threads(records)) == [["r", "a2"], ["r", "a5"]]
    assert ids(reconstruct_threads(records, english_only=False)) == [["r", "a1", "p2", "a3"], ["r", "a2"], ["r", "a5"]]


def test_non_alternating_thread_is_cut_at_the_last_valid_message():
    records = [
        rec("r", None, P),
        rec("a1", "r", A),
        rec("a2", "a1", A),
        rec("p3", "a2", P),
        rec("a4", "p3", A),
        rec("p5", "a1", P),  # a user leaf: cut back to a1 -> duplicate of the cut above, emitted once
    ]
    assert ids(reconstruct_threads(records)) == [["r", "a1"]]


def test_threads_with_fewer_than_two_messages_are_dropped():
    assert reconstruct_threads([rec("r", None, P), rec("p", "r", P), rec("a", "p", A)]) == []
    assert reconstruct_threads([rec("r", None, A), rec("p", "r", P), rec("a", "p", A)]) == []
    assert reconstruct_threads([rec("r", None, P)]) == []


def test_trees_in_first_appearance_order_and_tree_id_in_meta():
    records = [
        *[
            dict(
                r,
                message_tree_id="T2",
                message_id="2" + r["message_id"],
                parent_id=r["parent_id"] and "2" + r["parent_id"],
            )
            for r in BRANCHING
        ],
        *BRANCHING,
    ]
    out = reconstruct_threads(records)
    assert [s.meta["message_tree_id"] for s in out] == ["T2"] * 3 + ["t"] * 3


def test_text_is_normalized():
    out = reconstruct_threads([rec("r", None, P, text="e\u0301\x1b"), rec("a", "r", A, text="ok\r\n")])
    assert [m.content for m in out[0].messages] == ["\u00e9", "ok\n"]


# ---- an independent brute-force rule on random trees ----


def _reference(records, english_only, max_messages):
    """Every root->leaf path of the kept forest (children found by scanning the list), then the cuts."""
    kept = [r for r in records if not r["deleted"] and (not english_only or r.get("lang") == "en")]
    by_id = {r["message_id"]: r for r in kept}
    threads = []
    for leaf in kept:
        if any(r["parent_id"] == leaf["message_id"] for r in kept):
            continue
        path, node = [], leaf
        while node is not None:
            path.append(node)
            parent = node["parent_id"]
            node = by_id.get(parent) if parent is not None else None
            if parent is not None and node is None:
                path = None  # not connected to a root
                break
        if path is None:
            continue
        path.reverse()
        n = 0
        while n < len(path) and n < max_messages and path[n]["role"] == (P if n % 2 == 0 else A):
            n += 1
        while n and path[n - 1]["role"] != A:
            n -= 1
        if n >= 2:
            threads.append(tuple(r["message_id"] for r in path[:n]))
    return set(threads)


def _random_forest(rng, n_trees=30):
    records = []
    for t in range(n_trees):
        nodes = [rec(f"{t}.0", None, rng.choice([P, P, P, A]), tree=str(t))]
        for i in range(1, rng.randint(1, 25)):
            parent = rng.choice(nodes)
            role = A if parent["role"] == P else P
            if rng.random() < 0.1:
                role = parent["role"]  # breaks alternation
            nodes.append(
                rec(
                    f"{t}.{i}",
                    parent["message_id"],
                    role,
                    tree=str(t),
                    lang=rng.choice(["en"] * 8 + ["de", "es"]),
                    deleted=rng.random() < 0.05,
                )
            )
        records += nodes
    records.append(rec("orphan", "gone", A))
    rng.shuffle(records)
    return records


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("english_only,max_messages", [(True, 32), (False, 4), (True, 3)])
def test_matches_brute_force_reference(seed, english_only, max_messages):
    records = _random_forest(random.Random(seed))
    out = reconstruct_threads(records, english_only=english_only, max_messages=max_messages)
    got = [tuple(s.meta["message_ids"]) for s in out]
    assert len(got) == len(set(got))
    assert set(got) == _reference(records, english_only, max_messages)


# ---- the loader on local parquet in the hub schema ----


def _parquet(tmp_path, n_trees=6):
    return str(write_parquet(tmp_path / "train.parquet", rows_to_columns(oasst_rows(n_trees))))


def test_loader_reads_local_parquet_trees_in_order(tmp_path):
    out = list(iter_oasst1_sft(read=HubRead(DATASET_ID, data_files={"train": _parquet(tmp_path)}), shuffle_trees=False))
    assert [s.meta["message_tree_id"] for s in out] == [f"t{i}" for i in range(6) for _ in range(2)]
    assert out[0].meta["message_ids"] == ["t0", "t0-a1", "t0-p2", "t0-a3"]


def test_shuffle_trees_is_a_seeded_torch_permutation(tmp_path):
    import torch

    path = _parquet(tmp_path)
    read = HubRead(DATASET_ID, data_files={"train": path}, seed=5)
    a = list(iter_oasst1_sft(read=read))
    b = list(iter_oasst1_sft(read=read))
    assert a == b
    order = torch.randperm(6, generator=torch.Generator().manual_seed(5)).tolist()
    assert list(dict.fromkeys(s.meta["message_tree_id"] for s in a)) == [f"t{i}" for i in order]
    two = list(iter_oasst1_sft(read=read, take_trees=2))
    assert two == a[:4]  # whole trees, every thread of each


def test_a_read_given_whole_replaces_the_hub_keywords(tmp_path):
    read = HubRead(DATASET_ID, data_files=_parquet(tmp_path, n_trees=3), seed=5)
    prov: dict = {}
    out = list(iter_oasst1_sft(read=read, seed=999, provenance=prov))
    assert out == list(iter_oasst1_sft(read=HubRead(DATASET_ID, data_files={"train": read.data_files}, seed=5)))
    assert prov["seed"] == 5 and prov["trees"] == 3


@pytest.mark.parametrize("change", [{"shuffle": True}, {"take": 2}])
def test_a_read_that_shuffles_or_takes_rows_is_refused(tmp_path, change):
    read = HubRead(DATASET_ID, data_files=_parquet(tmp_path), **change)
    with pytest.raises(ValueError, match="shuffle_trees/take_trees"):
        next(iter_oasst1_sft(read=read))
