"""Pretrain token-cache writer: a stream of documents -> uint16 shards + meta.json.

On disk (`out_dir`):
  train/shard_NNNNN.bin, val/shard_NNNNN.bin   raw little-endian uint16 ids; a shard holds
      shard_bytes // 2 tokens except the last of its split; a document may continue in the next shard
  meta.json   the common header (`niels_gpt.meta.header`: kind "pretrain", format version, seed, dataset,
      tokenizer sha256 / vocab size / special ids / eot id) + meta.REQUIRED_PRETRAIN: every shard's file,
      token count and sha256, the split rule, budgets, provenance (dataset revision, streaming)
Every non-blank document is followed by the eot id; blank documents (empty or whitespace-only) are
skipped and counted (`cleaning.skipped_blank`), so no eot ever follows nothing but whitespace. Budgets
are exact: `{split}_tokens == min(max_{split}_tokens, available)` (None = unlimited); the document that
crosses a budget is cut there (so it has no eot). Reading stops once both budgets are full.

Cleaning record: meta `cleaning` = `skipped_blank` plus the loader's own counts (its provenance's
`cleaning`, e.g. gutenberg's boilerplate_books_stripped / boilerplate_chars_removed) over the documents
routed: the ones read ahead for the workers once the budgets were full are taken back from counts that
can (`unread`), so the record does not depend on batch sizes or `num_threads`; `documents_seen` counts
every document routed, blank ones included.

No silently empty split: a split that would hold 0 tokens although its budget is not 0 stops the build
with one message (source, split, documents read, the setting that splits, the fix) and nothing is
published; a budget of 0 builds the split empty on purpose, recorded in meta `empty_splits`
({split: why}) so readers can say so. Part builds (pretrain.num_parts) leave the check to the merge.

Two ways in, one shard writer:
- `build_pretrain_cache(texts, ...)`: one stream split by a seeded per-document rule (fineweb_edu,
  gutenberg); `shuffle_buffer` is only recorded - the loader shuffles with `datasets`' shuffle(seed, buffer).
- `build_pretrain_cache_presplit(train_texts, val_texts, ...)`: sources with their own splits (wikitext, roam).

Streaming (encode.py): documents are read in batches and encoded to uint16 arrays by `num_threads`
worker processes while this process reads the next batches and writes the finished ones, in input
order, so memory holds a few batches whatever the budget (shards.py writes and hashes as tokens
arrive) and the bytes do not depend on the number of workers. Atomic (niels_gpt.atomic): every shard
is written as `shard_NNNNN.bin.tmp` and renamed only when the whole build succeeded, then meta.json is
written last; a previous build is taken down first, meta.json first (`meta.unpublish`), so a killed
build never leaves a meta.json beside incomplete shards.

Resuming (`checkpoint=`, pretrain/resume.py; the single-stream build): the shards are written in the
checkpoint folder and renamed into train/ and val/ at the end; the reading, in stretches between
checkpoints, and the message of a build the hub stops are stream.py's (`StreamBuild`). An interrupted
build keeps its last checkpoint; any other error (the data's or the config's: a rerun would meet it
again) removes the checkpoint folder.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np

from niels_gpt.data.resumable import StreamPosition
from niels_gpt.data.source import SourceUnavailableError
from niels_gpt.layout import FORMAT_VERSION, META, SPLITS
from niels_gpt.meta import header, not_built, write_meta
from niels_gpt.pretrain.encode import encoded_batches
from niels_gpt.pretrain.record import (
    ON_PURPOSE,
    check_splits_filled,
    cleaning_record,
    presplit_rule,
    shard_format,
    source_meta,
)
from niels_gpt.pretrain.resume import Checkpoint
from niels_gpt.pretrain.shards import DEFAULT_SHARD_BYTES, ShardWriter, prepare_out_dir, run_writers
from niels_gpt.pretrain.stream import STREAM_SPLIT_RULE, StreamBuild, budget_progress, wanted
from niels_gpt.token_files import TOKEN_BYTES
from niels_gpt.tokenizer.workers import EncodeWorkers

DEFAULT_VAL_DOC_PROB = 0.025  # config_schema: sources.fineweb_edu.val_doc_prob


def _check_budgets(max_train_tokens, max_val_tokens, shard_bytes) -> None:
    for name, b in (("max_train_tokens", max_train_tokens), ("max_val_tokens", max_val_tokens)):
        if b is not None and (not isinstance(b, int) or b < 0):
            raise ValueError(f"{name} must be a non-negative int or None (unlimited), got {b!r}")
    if shard_bytes < TOKEN_BYTES:
        raise ValueError(f"shard_bytes must be >= {TOKEN_BYTES}, got {shard_bytes}")


def _run(out_dir, writers: dict[str, ShardWriter], fill: Callable[[], dict], meta: dict, source: dict) -> dict:
    """Run `fill` (writes tokens, returns extra meta: `skipped_blank` among it), then rename shards and
    write meta.json last."""
    meta.update(run_writers(writers, fill))
    meta.update(source_meta(**source))
    meta["cleaning"] = cleaning_record(meta["provenance"], meta.pop("skipped_blank"))
    write_meta(Path(out_dir) / META, meta)
    return meta


def _check_filled(writers, read: dict, blank: dict, source: dict, split_setting: str) -> None:
    prov = source.get("provenance") or {}
    check_splits_filled(
        {split: w.n_tokens for split, w in writers.items()},
        {split: w.budget for split, w in writers.items()},
        source=prov.get("source") or source.get("dataset_name") or "pretrain cache",
        read=read,
        blank=blank,
        split_setting=split_setting,
    )


def _start(out_dir, tokenizer, budgets, shard_bytes: int, seed: int, shuffle_buffer, val_doc_prob, checkpoint=None):
    """Check budgets, clear the previous build, open one ShardWriter per split (staged in the checkpoint
    folder if there is one); returns (out, writers, meta)."""
    _check_budgets(*budgets, shard_bytes)
    out = prepare_out_dir(out_dir)
    writers = {
        split: ShardWriter(
            out / split, shard_bytes=shard_bytes, budget=b, stage_dir=checkpoint.stage(split) if checkpoint else None
        )
        for split, b in zip(SPLITS, budgets)
    }
    meta = {
        **header("pretrain", format_version=FORMAT_VERSION, seed=seed, tokenizer=tokenizer),
        **shard_format(shard_bytes),
    }
    meta.update(val_doc_prob=val_doc_prob, shuffle_buffer=shuffle_buffer)
    meta.update({f"max_{split}_tokens": b for split, b in zip(SPLITS, budgets)})
    meta["empty_splits"] = {split: ON_PURPOSE.format(split=split) for split, b in zip(SPLITS, budgets) if b == 0}
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
    split_setting: str | None = None,
    check_empty: bool = True,
    checkpoint: Checkpoint | None = None,
    position: StreamPosition | None = None,
) -> dict:
    """One stream of documents (str or PretrainSample) -> train/val shards by the seeded rule; returns meta.

    `split_setting` names what sends documents to val in the empty-split message (default
    `val_doc_prob=<p>`); `check_empty=False` skips that check (a part of a scale-out build).
    `checkpoint` (pretrain/resume.py) makes the build resumable (stream.py), `position` being the one
    handed to the loader of `texts` in its HubRead; `texts` must then be re-iterable (a fresh iteration
    reads from the start) to start afresh from a stale checkpoint."""
    if not 0.0 <= val_doc_prob <= 1.0:
        raise ValueError(f"val_doc_prob must be in [0, 1], got {val_doc_prob}")
    budgets = (max_train_tokens, max_val_tokens)
    out, writers, meta = _start(
        out_dir, tokenizer, budgets, shard_bytes, seed, shuffle_buffer, val_doc_prob, checkpoint
    )
    meta["split_rule"] = STREAM_SPLIT_RULE.format(p=val_doc_prob)
    source = dict(dataset_name=dataset_name, dataset_config=dataset_config, provenance=provenance)

    reading = StreamBuild(
        writers,
        seed=seed,
        val_doc_prob=val_doc_prob,
        checkpoint=checkpoint,
        position=position,
        provenance=provenance,
        desc=str(out),
    )

    def fill() -> dict:
        run = reading.fill(texts, tokenizer, num_threads)
        if check_empty:
            both = dict.fromkeys(SPLITS, run.seen), dict.fromkeys(SPLITS, run.blank)
            _check_filled(writers, *both, source, split_setting or f"val_doc_prob={val_doc_prob}")
        return {"documents_seen": run.seen, "skipped_blank": run.blank}

    try:
        meta = _run(out, writers, fill, meta, source)
    except Exception as e:
        if checkpoint is not None and not isinstance(e, SourceUnavailableError):
            checkpoint.clear()  # an error of the data or the config: rerunning the same build cannot continue
        raise
    if checkpoint is not None:
        checkpoint.clear()
    return meta


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
    split_setting: str | None = None,
) -> dict:
    """Sources with their own train/val documents -> shards (train first, then val); returns meta.

    `split_setting` names what decides the split in the empty-split message (default: the source's own split)."""
    budgets = (max_train_tokens, max_val_tokens)
    out, writers, meta = _start(out_dir, tokenizer, budgets, shard_bytes, seed, shuffle_buffer, None)
    source = dict(dataset_name=dataset_name, dataset_config=dataset_config, provenance=provenance)
    read, blank = dict.fromkeys(SPLITS, 0), dict.fromkeys(SPLITS, 0)

    def fill() -> dict:
        with (
            budget_progress((max_train_tokens, max_val_tokens), str(out)) as bar,
            EncodeWorkers(tokenizer, num_threads) as workers,
        ):
            for split, texts in (("train", train_texts), ("val", val_texts)):
                w = writers[split]
                if w.full:
                    continue  # a zero budget reads nothing
                for flat, lens in encoded_batches(workers, texts, wanted(w)):
                    written = w.write(flat)
                    bar.update(written)
                    lens = np.asarray(lens, dtype=np.int64)
                    sizes = lens + (lens > 0)  # tokens per document in flat, its eot included
                    starts = np.cumsum(sizes) - sizes
                    n_read = int(np.searchsorted(starts, written, side="left")) if w.full else len(lens)
                    w.n_documents += int(np.count_nonzero(lens[:n_read]))  # documents begun
                    read[split] += n_read
                    blank[split] += n_read - int(np.count_nonzero(lens[:n_read]))
                    if w.full:
                        break
        _check_filled(writers, read, blank, source, split_setting or "the source's own train/val split")
        return {
            "split_rule": presplit_rule(provenance or {}),  # after reading: loaders fill provenance late
            "documents_seen": sum(read.values()),
            "skipped_blank": sum(blank.values()),
        }

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
    """A disabled source's cache: empty train/ and val/, and the "not built" meta.json (`meta.not_built`:
    `built: false` and `reason`) with zero totals."""
    out = prepare_out_dir(out_dir)
    meta = {
        **not_built("pretrain", reason=reason, format_version=FORMAT_VERSION, seed=seed),
        **shard_format(shard_bytes),
    }
    meta.update(source_meta(dataset_name=dataset_name, dataset_config=dataset_config, provenance=provenance))
    meta.update(
        split_rule="not built",
        train_tokens=0,
        val_tokens=0,
        train_documents=0,
        val_documents=0,
        shards={"train": [], "val": []},
    )
    write_meta(out / META, meta)
    return meta
