"""Pretrain token-cache writer: a stream of documents -> uint16 shards + meta.json.

On disk (`out_dir`):
  train/shard_NNNNN.bin, val/shard_NNNNN.bin   raw little-endian uint16 ids; a shard holds
      shard_bytes // 2 tokens except the last of its split; a document may continue in the next shard
  meta.json   meta.REQUIRED_PRETRAIN + every shard's file, token count and sha256,
      the split rule, budgets, provenance (dataset id/config/revision, streaming), `built: true`
Every non-empty document is followed by the eot id; empty documents are skipped. Budgets are exact:
`{split}_tokens == min(max_{split}_tokens, available)` (None = unlimited); the document that crosses a
budget is cut there (so it has no eot). Reading stops once both budgets are full.

Two ways in, one shard writer:
- `build_pretrain_cache(texts, ...)`: one stream split by a seeded per-document rule (fineweb_edu,
  gutenberg); `shuffle_buffer` is only recorded - the loader shuffles with `datasets`' shuffle(seed, buffer).
- `build_pretrain_cache_presplit(train_texts, val_texts, ...)`: sources with their own splits (wikitext, roam).

Streaming (encode.py): documents are read in batches and encoded to uint16 arrays by `num_threads`
worker processes while this process reads the next batches and writes the finished ones, in input
order, so memory holds a few batches whatever the budget (shards.py writes and hashes as tokens
arrive) and the bytes do not depend on the number of workers. Atomic: every shard is
written as `shard_NNNNN.bin.tmp` and renamed only when the whole build succeeded, then meta.json is
written last; a stale meta.json is removed before anything else, so a killed build never leaves a
meta.json beside incomplete shards.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np

from niels_gpt.cache.meta import write_meta
from niels_gpt.layout import FORMAT_VERSION, META, SPLITS
from niels_gpt.pretrain.encode import encoded_batches
from niels_gpt.pretrain.shards import DEFAULT_SHARD_BYTES, ShardWriter, prepare_out_dir, run_writers
from niels_gpt.token_files import TOKEN_BYTES, TOKEN_DTYPE_NAME
from niels_gpt.tokenizer.workers import EncodeWorkers

DEFAULT_VAL_DOC_PROB = 0.025  # config_schema: sources.fineweb_edu.val_doc_prob
# With little budget left, batches shrink to (remaining tokens * this) chars so reading stops soon
# after the budgets fill; 16 chars/token is above any subword tokenizer's average.
MAX_CHARS_PER_TOKEN = 16
STREAM_SPLIT_RULE = (
    "single stream: g = torch.Generator().manual_seed(seed); every document, in stream order, draws "
    "torch.rand(1, generator=g); it goes to val if the draw < val_doc_prob={p} and the val budget is not "
    "full, else to train while the train budget is not full, else it is skipped; reading stops when both "
    "budgets are full"
)
PRESPLIT_RULE = "pre-split by the source: its train documents -> train, its val documents -> val, in source order"
STREAMING_DETERMINISM = (
    "best effort: the bytes follow the upstream stream's order (datasets shuffle(seed, buffer_size), consumed in order)"
)


def _progress(budgets: tuple[int | None, ...], desc: str):
    from tqdm import tqdm

    total = None if any(b is None for b in budgets) else sum(budgets)
    return tqdm(total=total, desc=desc, unit="tok", unit_scale=True, disable=None)


def _wanted(writer: ShardWriter, other: ShardWriter | None = None, other_share: float = 1.0) -> Callable[[], float]:
    """Chars worth reading now: the remaining budgets at MAX_CHARS_PER_TOKEN; `other` fills at
    `other_share` of the documents (val_doc_prob), so it needs 1/other_share times the text."""

    def remaining(w: ShardWriter, share: float) -> float:
        if w.full or share == 0:
            return 0.0
        return float("inf") if w.budget is None else (w.budget - w.n_tokens) / share

    def wanted() -> float:
        chars = remaining(writer, 1.0) + (remaining(other, other_share) if other else 0.0)
        return max(chars, 1.0) * MAX_CHARS_PER_TOKEN

    return wanted


def route_batch(lens: list[int], g, train: ShardWriter, val: ShardWriter, val_doc_prob: float):
    """The single-stream rule over one encoded batch: ([writer, start, stop, documents] runs of the
    batch's flat tokens, documents seen, both budgets full).

    Document by document, in order: stop if both budgets are full; else one draw torch.rand(1,
    generator=g); an empty document goes nowhere; else val if draw < val_doc_prob and val is not full,
    else train if not full, else nowhere. "Full" counts what this batch has routed so far, so writing
    the runs afterwards (ShardWriter.write cuts at the budget) gives the bytes of writing each document
    in turn; adjacent documents bound for one writer form one run (one write instead of many).
    """
    import torch

    room = {w: float("inf") if w.budget is None else w.budget - w.n_tokens for w in (train, val)}
    runs: list[list] = []
    pos = seen = 0
    # One draw per document: torch's CPU uniform sampler takes the generator's values one per element, in
    # order, so one call for the batch gives the values of one torch.rand(1, generator=g) per document
    # (test_stream_split_follows_the_recorded_rule checks the bytes against single draws).
    draws = torch.rand(len(lens), generator=g).tolist()
    for n, draw in zip(lens, draws):
        if room[train] <= 0 and (room[val] <= 0 or val_doc_prob == 0):
            return runs, seen, True
        seen += 1
        if n == 0:
            continue
        start, pos = pos, pos + n + 1  # the document and its eot
        dest = val if draw < val_doc_prob and room[val] > 0 else (train if room[train] > 0 else None)
        if dest is None:
            continue
        room[dest] -= n + 1
        if runs and runs[-1][0] is dest and runs[-1][2] == start:
            runs[-1][2:] = [pos, runs[-1][3] + 1]
        else:
            runs.append([dest, start, pos, 1])
    return runs, seen, room[train] <= 0 and (room[val] <= 0 or val_doc_prob == 0)


def _check_budgets(max_train_tokens, max_val_tokens, shard_bytes) -> None:
    for name, b in (("max_train_tokens", max_train_tokens), ("max_val_tokens", max_val_tokens)):
        if b is not None and (not isinstance(b, int) or b < 0):
            raise ValueError(f"{name} must be a non-negative int or None (unlimited), got {b!r}")
    if shard_bytes < TOKEN_BYTES:
        raise ValueError(f"shard_bytes must be >= {TOKEN_BYTES}, got {shard_bytes}")


def _run(out_dir, writers: dict[str, ShardWriter], fill: Callable[[], dict], meta: dict, source: dict) -> dict:
    """Run `fill` (writes tokens, returns extra meta), then rename shards and write meta.json last."""
    meta.update(run_writers(writers, fill))
    meta["built"] = True
    meta.update(source_meta(**source))
    write_meta(str(Path(out_dir) / META), meta)
    return meta


def _hub_record(provenance: dict) -> dict:
    """The loader's record of what it opened (its "stream" or "train" entry, else the provenance itself)."""
    for rec in (provenance.get("stream"), provenance.get("train"), provenance):
        if isinstance(rec, dict) and "dataset_id" in rec:
            return rec
    return {}


def source_meta(*, dataset_name, dataset_config, provenance) -> dict:
    """Provenance fields; read only after the input was consumed (loaders fill provenance while read)."""
    provenance = copy.deepcopy(dict(provenance or {}))
    hub = _hub_record(provenance)
    streaming = bool(hub.get("streaming", provenance.get("streaming", False)))
    return {
        "dataset_name": dataset_name if dataset_name is not None else hub.get("dataset_id"),
        "dataset_config": dataset_config if dataset_config is not None else hub.get("config"),
        "dataset_revision": hub.get("revision", provenance.get("revision_requested")),
        "streaming": streaming,
        "determinism": STREAMING_DETERMINISM if streaming else "exact: same input order + seed => same bytes",
        "provenance": provenance,
    }


def presplit_rule(provenance: dict) -> str:
    """PRESPLIT_RULE plus the source's own split names / rule when the loader recorded them."""
    names = [
        f"{split} = source split {provenance[split]['split']!r}"
        for split in ("train", "val")
        if isinstance(provenance.get(split), dict) and "split" in provenance[split]
    ]
    details = names + ([provenance["split_rule"]] if provenance.get("split_rule") else [])
    return PRESPLIT_RULE + (f" ({'; '.join(details)})" if details else "")


def base_meta(*, tokenizer, seed, shard_bytes) -> dict:
    """Fields every pretrain meta.json carries, built or not (tokenizer None when not built)."""
    return {
        "format_version": FORMAT_VERSION,
        "seed": seed,
        "token_dtype": TOKEN_DTYPE_NAME,
        "tokenizer_sha256": tokenizer.sha256 if tokenizer is not None else None,
        "vocab_size": tokenizer.vocab_size if tokenizer is not None else None,
        "special_token_ids": dict(tokenizer.special_ids) if tokenizer is not None else None,
        "eot_id": tokenizer.eot_id if tokenizer is not None else None,
        "document_separator": "eot id after every non-empty document; the document crossing a budget is cut",
        "shard_bytes": shard_bytes,
    }


def _start(out_dir, tokenizer, budgets, shard_bytes: int, seed: int, shuffle_buffer, val_doc_prob):
    """Check budgets, clear the previous build, open one ShardWriter per split; returns (out, writers, meta)."""
    _check_budgets(*budgets, shard_bytes)
    out = prepare_out_dir(out_dir)
    writers = {split: ShardWriter(out / split, shard_bytes=shard_bytes, budget=b) for split, b in zip(SPLITS, budgets)}
    meta = base_meta(tokenizer=tokenizer, seed=seed, shard_bytes=shard_bytes)
    meta.update(val_doc_prob=val_doc_prob, shuffle_buffer=shuffle_buffer)
    meta.update({f"max_{split}_tokens": b for split, b in zip(SPLITS, budgets)})
    return out, writers, meta


def build_pretrain_cache(
    texts: Iterable,
    out_dir: str,
    *,
    tokenizer,
    max_train_tokens: int | None,
    max_val_tokens: int | None,
    shard_bytes: int = DEFAULT_SHARD_BYTES,
    seed: int,
    shuffle_buffer: int | None,
    val_doc_prob: float = DEFAULT_VAL_DOC_PROB,
    dataset_name: str | None = None,
    dataset_config: str | None = None,
    provenance: dict | None = None,
    num_threads: int = -1,
) -> dict:
    """One stream of documents (str or PretrainSample) -> train/val shards by the seeded rule; returns meta."""
    import torch

    if not 0.0 <= val_doc_prob <= 1.0:
        raise ValueError(f"val_doc_prob must be in [0, 1], got {val_doc_prob}")
    budgets = (max_train_tokens, max_val_tokens)
    out, writers, meta = _start(out_dir, tokenizer, budgets, shard_bytes, seed, shuffle_buffer, val_doc_prob)
    train, val = writers["train"], writers["val"]
    meta["split_rule"] = STREAM_SPLIT_RULE.format(p=val_doc_prob)
    source = dict(dataset_name=dataset_name, dataset_config=dataset_config, provenance=provenance)

    def fill() -> dict:
        g = torch.Generator().manual_seed(seed)
        seen = 0
        if train.full and (val.full or val_doc_prob == 0):
            return {"documents_seen": seen}  # zero budgets: read nothing
        with _progress((max_train_tokens, max_val_tokens), str(out)) as bar, EncodeWorkers(tokenizer, num_threads) as w:
            for flat, lens in encoded_batches(w, texts, _wanted(train, val, val_doc_prob)):
                runs, n_seen, done = route_batch(lens, g, train, val, val_doc_prob)
                seen += n_seen
                for dest, start, stop, n_docs in runs:
                    bar.update(dest.write(flat[start:stop]))
                    dest.n_documents += n_docs
                if done:
                    break
        return {"documents_seen": seen}

    return _run(out, writers, fill, meta, source)


def build_pretrain_cache_presplit(
    train_texts: Iterable,
    val_texts: Iterable,
    out_dir: str,
    *,
    tokenizer,
    max_train_tokens: int | None,
    max_val_tokens: int | None,
    shard_bytes: int = DEFAULT_SHARD_BYTES,
    seed: int,
    shuffle_buffer: int | None = None,
    dataset_name: str | None = None,
    dataset_config: str | None = None,
    provenance: dict | None = None,
    num_threads: int = -1,
) -> dict:
    """Sources with their own train/val documents -> shards (train first, then val); returns meta."""
    budgets = (max_train_tokens, max_val_tokens)
    out, writers, meta = _start(out_dir, tokenizer, budgets, shard_bytes, seed, shuffle_buffer, None)
    source = dict(dataset_name=dataset_name, dataset_config=dataset_config, provenance=provenance)

    def fill() -> dict:
        with (
            _progress((max_train_tokens, max_val_tokens), str(out)) as bar,
            EncodeWorkers(tokenizer, num_threads) as ew,
        ):
            for split, texts in (("train", train_texts), ("val", val_texts)):
                w = writers[split]
                if w.full:
                    continue  # a zero budget reads nothing
                for flat, lens in encoded_batches(ew, texts, _wanted(w)):
                    written = w.write(flat)
                    bar.update(written)
                    starts = np.cumsum([0] + [n + 1 for n in lens if n][:-1])  # doc starts in flat
                    w.n_documents += int(np.searchsorted(starts, written, side="left"))  # docs begun
                    if w.full:
                        break
        return {"split_rule": presplit_rule(provenance or {})}  # after reading: loaders fill provenance late

    return _run(out, writers, fill, meta, source)


def write_not_built_meta(
    out_dir: str,
    *,
    reason: str,
    dataset_name: str | None,
    dataset_config: str | None,
    seed: int,
    shard_bytes: int,
    provenance: dict | None = None,
) -> dict:
    """A disabled source's cache: empty train/ and val/, meta.json with `built: false` and zero totals."""
    out = prepare_out_dir(out_dir)
    meta = base_meta(tokenizer=None, seed=seed, shard_bytes=shard_bytes)
    meta.update(source_meta(dataset_name=dataset_name, dataset_config=dataset_config, provenance=provenance))
    meta.update(
        built=False,
        reason=reason,
        split_rule="not built",
        train_tokens=0,
        val_tokens=0,
        train_documents=0,
        val_documents=0,
        shards={"train": [], "val": []},
    )
    write_meta(str(out / META), meta)
    return meta
