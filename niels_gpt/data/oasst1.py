"""OpenAssistant/oasst1 message trees -> chat threads, root to leaf.

Each row is one message (`message_id`, `parent_id`, `message_tree_id`, `role` prompter|assistant,
`text`, `lang`, `deleted`). `reconstruct_threads(records)` rebuilds every root->leaf thread:

- linear: one pass builds `msg[message_id]` and `children[parent_id]`, then an iterative DFS from
  each root visits every kept message once (no scan of the record list per node);
- excluded, with their whole subtrees: deleted messages, non-English messages (`english_only`, where
  a `lang` field exists), messages with an unknown role; orphans (parent missing) are skipped;
- roles: prompter -> user, assistant -> assistant; no system message is invented;
- a thread alternates user, assistant, user, ...: where it would not, or where it would exceed
  `max_messages`, it is cut at the last valid message; then cut back to end with an assistant
  message; a thread left with < 2 messages is dropped; duplicates produced by cuts are emitted once.

meta: `message_tree_id`, `leaf_message_id` (the thread's last message), `message_ids`.
Tree order: first appearance; `shuffle_trees` permutes it with torch.randperm under a Generator
seeded with `seed` (torch RNG, like every other shuffle and split).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from niels_gpt.data.hub import iter_rows, open_dataset, row_order
from niels_gpt.data.normalize import normalize_text
from niels_gpt.data.source import HubRead
from niels_gpt.data.types import ChatMessage, ChatSample

DATASET_ID = "OpenAssistant/oasst1"
SOURCE = "oasst1"
ROLE_MAP = {"prompter": "user", "assistant": "assistant"}
COLUMNS = ("message_id", "parent_id", "message_tree_id", "role", "text", "lang", "deleted")


def _excluded(rec: Mapping, english_only: bool) -> str | None:
    """Why a message (and its subtree) is left out, or None."""
    if rec.get("deleted"):
        return "deleted"
    if english_only and "lang" in rec and rec["lang"] != "en":
        return "not_english"
    if rec.get("role") not in ROLE_MAP:
        return "unknown_role"
    return None


def _index(records: Iterable[Mapping], english_only: bool, counts: dict) -> tuple[dict, dict, list]:
    """One pass: kept messages by id, children ids by parent id (in record order), and the roots."""
    known: set = set()  # every message id, kept or not, to tell orphans from excluded subtrees
    msg: dict = {}
    children: dict = {}
    roots: list = []
    for rec in records:
        counts["records"] += 1
        known.add(rec["message_id"])
        why = _excluded(rec, english_only)
        if why:
            counts[why] += 1
            continue
        msg[rec["message_id"]] = rec
    for mid, rec in msg.items():  # dicts keep insertion order: children lists follow record order
        parent = rec.get("parent_id")
        if parent is None:
            roots.append(mid)
        else:
            children.setdefault(parent, []).append(mid)
            if parent not in known:
                counts["orphans"] += 1  # never reached from a root
    return msg, children, roots


def reconstruct_threads(
    records: Iterable[Mapping],
    *,
    english_only: bool = True,
    max_messages: int = 32,
    stats: dict | None = None,
) -> list[ChatSample]:
    """Every root->leaf thread of every tree, trees in first-appearance order, DFS order within one."""
    if max_messages < 2:
        raise ValueError(f"max_messages must be >= 2 (a thread is a user and an assistant message), got {max_messages}")
    counts = {"records": 0, "deleted": 0, "not_english": 0, "unknown_role": 0, "orphans": 0, "threads": 0}
    msg, children, roots = _index(records, english_only, counts)
    out: list[ChatSample] = []
    seen: set[tuple] = set()

    def emit(path: list, tree_id) -> None:
        end = len(path)
        while end and msg[path[end - 1]]["role"] != "assistant":
            end -= 1
        ids = tuple(path[:end])
        if end < 2 or ids in seen:
            return
        seen.add(ids)
        messages = [ChatMessage(ROLE_MAP[msg[i]["role"]], normalize_text(msg[i]["text"] or "")) for i in ids]
        meta = {"message_tree_id": tree_id, "leaf_message_id": ids[-1], "message_ids": list(ids)}
        out.append(ChatSample(messages=messages, source=SOURCE, meta=meta))

    for root in roots:
        if msg[root]["role"] != "prompter":
            continue  # a thread must start with the user
        tree_id = msg[root].get("message_tree_id") or root
        path: list = []
        stack = [(root, 0)]
        while stack:
            mid, depth = stack.pop()
            del path[depth:]
            path.append(mid)
            want = "assistant" if depth % 2 == 0 else "prompter"  # role the next message must have
            kids = children.get(mid, [])
            valid = [c for c in kids if msg[c]["role"] == want] if depth + 1 < max_messages else []
            if len(valid) < len(kids) or not kids:
                emit(path, tree_id)  # a leaf, or some branch is cut here
            for c in reversed(valid):
                stack.append((c, depth + 1))
    counts["threads"] = len(out)
    if stats is not None:
        stats.update(counts)
    return out


def order_trees(samples: list[ChatSample], *, shuffle_trees: bool, seed: int) -> list[list[ChatSample]]:
    """Threads grouped by tree: trees in first-appearance order, or torch.randperm-permuted."""
    trees: dict = {}
    for s in samples:
        trees.setdefault(s.meta["message_tree_id"], []).append(s)
    groups = list(trees.values())
    return [groups[i] for i in row_order(len(groups), shuffle=shuffle_trees, seed=seed)]


def iter_oasst1_sft(
    *,
    split: str = "train",
    seed: int = 42,
    shuffle_trees: bool = True,
    take_trees: int | None = None,
    english_only: bool = True,
    max_messages: int = 32,
    read: HubRead | None = None,
    provenance: dict | None = None,
) -> Iterator[ChatSample]:
    """Threads of `split`, tree by tree (at most `take_trees` trees). Reads the whole split (~85k rows).

    `split` and `seed` describe a read of the hub dataset; `read` (a HubRead: what the registry passes,
    or a test's local `data_files`) replaces them. Its rows are read whole and in order (trees are
    shuffled and taken, not rows): a read with `shuffle` or `take` is refused.
    """
    read = read or HubRead(DATASET_ID, split=split, seed=seed)
    if read.shuffle or read.take is not None:
        raise ValueError(
            "oasst1 reads every row to rebuild its trees; shuffle and take trees with shuffle_trees/take_trees"
        )
    ds = open_dataset(read, provenance)
    missing = [c for c in ("message_id", "parent_id", "role", "text") if c not in ds.column_names]
    if missing:
        raise ValueError(
            f"{read.dataset_id} split {read.split!r}: missing column(s) {missing}; columns: {ds.column_names}"
        )
    ds = ds.select_columns([c for c in COLUMNS if c in ds.column_names])
    records = (row for _, row in iter_rows(ds, read, provenance))
    stats: dict = {}
    samples = reconstruct_threads(records, english_only=english_only, max_messages=max_messages, stats=stats)
    trees = order_trees(samples, shuffle_trees=shuffle_trees, seed=read.seed)
    if provenance is not None:
        provenance.update(
            {
                "english_only": english_only,
                "max_messages": max_messages,
                "shuffle_trees": shuffle_trees,
                "seed": read.seed,
                "trees": len(trees),
                **{f"num_{k}": v for k, v in stats.items()},
            }
        )
    for tree in trees[:take_trees]:
        yield from tree
