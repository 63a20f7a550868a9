"""The numbers behind the report's figures, measured from the caches and their meta.json only.

Nothing is re-tokenized: document lengths come from eot positions, SFT example lengths from the
offsets, supervised tokens from the loss mask the dataset uses (`loss_mask_from_tokens`, windows.py
for what a row of T_max+1 tokens keeps), bytes per token from the tokenizer's per-id byte lengths
times an id histogram. One function per report family (pretrain, sft, tokenizer, streams), each
returning plain JSON-able dicts; token files are read in fixed chunks, so memory stays flat
whatever the cache size.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from niels_gpt import layout
from niels_gpt.chat_template import loss_mask_from_tokens
from niels_gpt.inspection.scan import example_blocks, example_lengths
from niels_gpt.report.corpora import Split, find_splits
from niels_gpt.sft.windows import kept_segments, kept_targets
from niels_gpt.token_files import MAX_VOCAB, DiskSequence, open_tokens

# Length histograms: 4 bins per doubling from 1 to 2**26 tokens, the same edges for every source so
# that panels compare; a log axis shows short chat turns and book-length documents in one figure.
LENGTH_EDGES = np.logspace(0, 26, 26 * 4 + 1, base=2.0)


def length_histogram(lengths: np.ndarray) -> np.ndarray:
    return np.histogram(np.asarray(lengths), bins=LENGTH_EDGES)[0].astype(np.int64)


def document_stats(files: Sequence, eot: int) -> dict:
    """Tokens, documents (a budget-cut last one included), empty documents and the length histogram
    (eot excluded, empty documents left out) of one pretrain split."""
    hist = np.zeros(len(LENGTH_EDGES) - 1, dtype=np.int64)
    start = total = docs = empty = 0  # start: position where the current document began
    for chunk in DiskSequence(files).chunks():
        ends = np.flatnonzero(chunk == eot) + total
        if len(ends):
            lengths = ends - np.concatenate(([start], ends[:-1] + 1))
            hist += length_histogram(lengths[lengths > 0])
            docs, empty, start = docs + len(lengths), empty + int(np.count_nonzero(lengths == 0)), int(ends[-1]) + 1
        total += len(chunk)
    if total > start:
        hist += length_histogram([total - start])
        docs += 1
    return {"tokens": total, "documents": docs, "empty": empty, "length_hist": hist.tolist()}


def _by_family(cache_dir, family: str) -> tuple[dict[str, dict[str, Split]], list[dict]]:
    """{source name: {split: Split}} of one family, in registry order, and what is skipped."""
    splits, skipped = find_splits(cache_dir)
    out: dict[str, dict[str, Split]] = {}
    for s in splits:
        if s.family == family:
            out.setdefault(s.source, {})[s.split] = s
    return out, [k for k in skipped if k["name"].startswith(family + "/")]


def pretrain_family(cache_dir) -> dict:
    """Per pretrain source and split: tokens, budget (meta's max_{split}_tokens), documents, lengths."""
    caches, skipped = _by_family(cache_dir, "pretrain")
    sources = []
    for source, splits in caches.items():
        rows = {}
        for name, s in splits.items():
            rows[name] = {
                **document_stats(s.files, s.meta["eot_id"]),
                "budget": s.meta.get(f"max_{name}_tokens"),
            }
        sources.append({"name": source, "splits": rows})
    return {"length_edges": LENGTH_EDGES.tolist(), "sources": sources, "skipped": skipped}


def sft_split_stats(s: Split) -> dict:
    """One SFT split: examples, tokens, loss-active tokens (whole examples), the targets a T_max row
    keeps (windows.py), examples cut (longer than T_max+1) and dropped at build time, lengths."""
    t_max, truncation = s.meta["T_max"], s.meta["truncation"]
    tokens = open_tokens(s.files[0])
    offsets, _ = s.unit_bounds(tokens)
    labels = kept = 0
    for lo, hi, starts in example_blocks(offsets, len(tokens)):
        mask = loss_mask_from_tokens(tokens[lo:hi], s.meta["special_token_ids"], example_starts=starts)
        labels += int(mask.sum())
        seg = kept_segments(mask, starts, example_lengths(starts, hi - lo), t_max, truncation)
        kept += int(kept_targets(mask, seg).sum())
    lengths = example_lengths(offsets, len(tokens))
    return {
        "examples": len(offsets),
        "tokens": len(tokens),
        "labels": labels,
        "kept_targets": kept,
        "cut": int(np.count_nonzero(lengths > t_max + 1)),
        "dropped": int((s.meta.get("num_dropped") or {}).get(s.split, 0)),
        "length_hist": length_histogram(lengths).tolist(),
    }


def mixture_shares(weights: Mapping[str, float], per_row: Mapping[str, float], cached: Mapping[str, float]) -> dict:
    """Per source: configured weight, the share of the mixed batches' content it makes up (weight x
    content per row, normalized), and its share of the caches' content (what uniform sampling gives)."""
    implied = {k: w * per_row.get(k, 0.0) for k, w in weights.items()}
    total_implied, total_cached = sum(implied.values()), sum(cached.values())
    return {
        k: {
            "weight": w,
            "implied_share": implied[k] / total_implied if total_implied else 0.0,
            "cache_share": cached.get(k, 0.0) / total_cached if total_cached else 0.0,
        }
        for k, w in weights.items()
    }


def sft_family(cache_dir, mix: Mapping[str, float]) -> dict:
    """Per SFT source and split: sft_split_stats; and sft.mix beside the supervised-token shares it implies."""
    caches, skipped = _by_family(cache_dir, "sft")
    sources, per_row, cached = [], {}, {}
    for source, splits in caches.items():
        meta = next(iter(splits.values())).meta
        rows = {name: sft_split_stats(s) for name, s in splits.items()}
        sources.append({"name": source, "t_max": meta["T_max"], "truncation": meta["truncation"], "splits": rows})
        train = rows.get("train")
        if train and train["examples"]:
            per_row[source] = train["kept_targets"] / train["examples"]  # rows draw examples uniformly
            cached[source] = train["kept_targets"]
    return {
        "length_edges": LENGTH_EDGES.tolist(),
        "sources": sources,
        "mix": mixture_shares(mix, per_row, cached),
        "skipped": skipped,
    }


def id_counts(files: Sequence) -> np.ndarray:
    """How often each id (0..65535) occurs in the token files."""
    counts = np.zeros(MAX_VOCAB, dtype=np.int64)
    for chunk in DiskSequence(files).chunks():
        counts += np.bincount(chunk, minlength=MAX_VOCAB)
    return counts


def tokenizer_family(cache_dir, piece_bytes: Sequence[int]) -> dict:
    """Per token cache: ids of the vocabulary it uses (both splits); per split: ordinary tokens and the
    UTF-8 bytes they decode to (sum of piece_bytes over the id histogram: bytes per token)."""
    pb = np.asarray(piece_bytes, dtype=np.int64)
    splits, skipped = find_splits(cache_dir)
    caches: dict[str, dict] = {}
    for s in (s for s in splits if s.space == "tokens"):
        counts = id_counts(s.files)[: len(pb)]
        row = caches.setdefault(s.name, {"name": s.name, "splits": {}, "_ids": np.zeros(len(pb), dtype=bool)})
        row["_ids"] |= counts > 0
        row["splits"][s.split] = {
            "tokens": int(counts.sum()),
            "ordinary_tokens": int(counts[pb > 0].sum()),
            "bytes": int((counts * pb).sum()),
        }
    for row in caches.values():
        row["ids_used"] = int(np.count_nonzero(row.pop("_ids")))
    skipped = [k for k in skipped if not k["name"].startswith("streams/")]
    return {"vocab_size": len(pb), "caches": list(caches.values()), "skipped": skipped}


def streams_family(cache_dir, p_train: Mapping[str, float]) -> dict:
    """Bytes per stream and split, and streams.p_train beside each stream's share of the train bytes
    (a row is T bytes of one stream, so the byte share a mixture implies is its weight)."""
    caches, skipped = _by_family(cache_dir, "streams")
    streams = [
        {"name": source, "splits": {name: int(s.meta["n_bytes"]) for name, s in splits.items()}}
        for source, splits in caches.items()
    ]
    cached = {row["name"]: row["splits"].get(layout.SPLITS[0], 0) for row in streams}
    return {
        "streams": streams,
        "mix": mixture_shares(p_train, dict.fromkeys(p_train, 1.0), cached),
        "skipped": skipped,
    }
