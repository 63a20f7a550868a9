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
checkpoint folder and renamed into train/ and val/ at the end. Every `checkpoint.every_tokens` tokens
the stream stops being read, the batches in flight are written (so everything read is written), and
the position is saved: the writers, documents seen / blank, the split rule's generator, the loaders'
cleaning counts, the stream's position (data/resumable.py: the rows read but not yet used included).
A hub failure that outlasts the retries ends the reading the same way, is saved, and stops the build
with one message (the dataset, documents and tokens read, the retries); a rerun loads the checkpoint
and continues byte-identically. An interrupted build keeps its last checkpoint too; any other error
(the data's or the config's: a rerun would meet it again) removes the checkpoint folder. Reading is
split into these stretches in every resumable build, so a resumed build and one that never stopped
read and write the same things.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from niels_gpt.data.resumable import StaleStreamState, StreamUnavailable, Tracker, tracking
from niels_gpt.data.source import SourceUnavailableError
from niels_gpt.layout import FORMAT_VERSION, META, SPLITS
from niels_gpt.log import log, progress
from niels_gpt.meta import header, not_built, write_meta
from niels_gpt.pretrain.encode import encoded_batches
from niels_gpt.pretrain.record import (
    ON_PURPOSE,
    add_counts,
    check_splits_filled,
    cleaning_record,
    loader_counts,
    presplit_rule,
    shard_format,
    source_meta,
)
from niels_gpt.pretrain.resume import Checkpoint
from niels_gpt.pretrain.shards import DEFAULT_SHARD_BYTES, ShardWriter, prepare_out_dir, run_writers
from niels_gpt.pretrain.uniform import TorchUniform
from niels_gpt.token_files import TOKEN_BYTES
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


def _progress(budgets: tuple[int | None, ...], desc: str):
    total = None if any(b is None for b in budgets) else sum(budgets)
    return progress(total=total, desc=desc, unit="tok", unit_scale=True)


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


def _cleaning(provenance: dict | None, base: dict) -> dict:
    """{entry: counts} of the loaders' cleaning counts in `provenance`, plus `base` (a checkpoint's)."""
    out = {}
    for key, counts in loader_counts(provenance):
        total = add_counts([base.get(key), counts])
        if total:
            out[key] = total
    return out


def _unread(provenance: dict | None, n: int) -> None:
    """Take the last `n` documents read back from the loaders' counts that can (`unread`, e.g.
    gutenberg's): the documents read ahead for the workers and never routed (the budgets were full)."""
    for _, counts in loader_counts(provenance):
        if n and hasattr(counts, "unread"):
            counts.unread(n)


def _add_cleaning(provenance: dict | None, base: dict) -> None:
    """Fold a checkpoint's cleaning counts into `provenance` (after reading: the loaders count from zero)."""
    if not base or provenance is None:
        return
    for key, counts in _cleaning(provenance, base).items():
        entry = provenance if key == "" else provenance.setdefault(key, {})
        entry["cleaning"] = counts


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


def route_batch(lens: list[int], g, train: ShardWriter, val: ShardWriter, val_doc_prob: float):
    """The single-stream rule over one encoded batch: ([writer, start, stop, documents] runs of the
    batch's flat tokens, documents read, blank ones among them, both budgets full).

    Document by document, in order: stop if both budgets are full; else one draw torch.rand(1,
    generator=g), blank documents too; a blank document (no tokens) goes nowhere; else val if draw <
    val_doc_prob and val is not full, else train if not full, else nowhere. "Full" counts what this
    batch has routed so far, so writing the runs afterwards (ShardWriter.write cuts at the budget) gives
    the bytes of writing each document in turn; adjacent documents bound for one writer form one run.
    """
    room = {w: float("inf") if w.budget is None else w.budget - w.n_tokens for w in (train, val)}
    runs: list[list] = []
    pos = seen = blank = 0
    # One draw per document: `g` (uniform.TorchUniform) gives torch.rand's values one per element, in
    # order, so one call for the batch gives the values of one torch.rand(1, generator=g) per document
    # (test_stream_split_follows_the_recorded_rule checks the bytes against single torch draws).
    draws = g.draw(len(lens)).tolist()
    for n, draw in zip(lens, draws):
        if room[train] <= 0 and (room[val] <= 0 or val_doc_prob == 0):
            return runs, seen, blank, True
        seen += 1
        if n == 0:
            blank += 1
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
    return runs, seen, blank, room[train] <= 0 and (room[val] <= 0 or val_doc_prob == 0)


@dataclass
class _Run:
    """The single-stream rule's state: its generator (torch.Generator().manual_seed(seed)'s torch.rand
    stream, without importing torch), documents read, blank ones among them."""

    g: TorchUniform
    seen: int = 0
    blank: int = 0


class _Counted:
    """An iterator that counts the items taken from it (`n`)."""

    def __init__(self, items: Iterable):
        self.it, self.n = iter(items), 0

    def __iter__(self):
        return self

    def __next__(self):
        item = next(self.it)
        self.n += 1
        return item


class _Stretch:
    """The documents of `it` until `due()` (a checkpoint is due) or the end (`ended`); an error of
    `catch` ends it too (`error`) instead of propagating, so what was read before it is still written."""

    def __init__(self, it: Iterator, due: Callable[[], bool], catch: tuple):
        self.it, self.due, self.catch = it, due, catch
        self.ended, self.error = False, None

    def __iter__(self):
        while not self.due():
            try:
                item = next(self.it)
            except StopIteration:
                self.ended = True
                return
            except self.catch as e:
                self.error = e
                return
            yield item


class _Saver:
    """Saves a resumable stream build's position into its checkpoint (pretrain/resume.py)."""

    def __init__(self, checkpoint: Checkpoint, tracker: Tracker, writers: dict, run: _Run, provenance, base: dict):
        self.checkpoint, self.tracker, self.writers, self.run = checkpoint, tracker, writers, run
        self.provenance, self.base = provenance, base
        self.enabled = True
        self.saved_at = self.tokens() if checkpoint.seq else None  # a checkpoint was loaded
        self.last = self.tokens()

    def tokens(self) -> int:
        return sum(w.n_tokens for w in self.writers.values())

    def due(self) -> bool:
        return self.enabled and self.tokens() - self.last >= self.checkpoint.every_tokens

    def save(self) -> None:
        stream = self.tracker.stream
        if stream is None:  # read by datasets itself (hub.iter_rows logged why and meta records it)
            self.enabled = False
            return
        info, table = stream.state()
        state = {
            "tokens": self.tokens(),
            "writers": {split: w.checkpoint() for split, w in self.writers.items()},
            "documents_seen": self.run.seen,
            "skipped_blank": self.run.blank,
            "split_draws": self.run.g.state(),
            "cleaning": _cleaning(self.provenance, self.base),
            "stream": info,
        }
        self.checkpoint.save(state, table)
        self.last = self.saved_at = state["tokens"]
        log(f"checkpoint: {state['tokens']:,} tokens from {self.run.seen:,} documents -> {self.checkpoint.dir}")

    def stopped(self, error: BaseException) -> SourceUnavailableError:
        """The one message of a build stopped by the hub: what failed, what was read, how to go on."""
        w = self.writers
        saved = (
            f"the checkpoint in {self.checkpoint.dir} holds {self.saved_at:,} tokens: run the same build again "
            "(snakemake or build-pretrain) to continue from there"
            if self.saved_at is not None
            else "nothing was saved: run the same build again once the hub answers"
        )
        read = "" if isinstance(error, StreamUnavailable) else f"; {self.run.seen:,} documents read"
        return SourceUnavailableError(
            f"{error}{read}; {self.tokens():,} tokens written ({w['train'].n_tokens:,} train, "
            f"{w['val'].n_tokens:,} val); {saved}"
        )


def _never() -> bool:
    return False


def _read_stream(
    texts,
    tokenizer,
    writers: dict,
    val_doc_prob: float,
    run: _Run,
    num_threads: int,
    desc: str,
    saver: _Saver | None = None,
):
    """Write the stream's documents by the seeded rule until both budgets are full or it ends; with a
    `saver`, in stretches that each end with a checkpoint (module docstring). Returns how many documents
    were read ahead for the workers and never routed (the budgets filled first)."""
    train, val = writers["train"], writers["val"]
    if train.full and (val.full or val_doc_prob == 0):
        return 0  # zero budgets: read nothing
    it, seen = _Counted(texts), run.seen
    catch = (SourceUnavailableError, StaleStreamState) if saver else ()
    with _progress((train.budget, val.budget), desc) as bar, EncodeWorkers(tokenizer, num_threads) as workers:
        bar.update(train.n_tokens + val.n_tokens)
        while True:
            stretch, done = _Stretch(it, saver.due if saver else _never, catch), False
            for flat, lens in encoded_batches(workers, stretch, _wanted(train, val, val_doc_prob)):
                runs, n_seen, n_blank, done = route_batch(lens, run.g, train, val, val_doc_prob)
                run.seen, run.blank = run.seen + n_seen, run.blank + n_blank
                for dest, start, stop, n_docs in runs:
                    bar.update(dest.write(flat[start:stop]))
                    dest.n_documents += n_docs
                if done:
                    break
            if done or stretch.ended:
                return it.n - (run.seen - seen)
            if isinstance(stretch.error, StaleStreamState):
                raise stretch.error
            saver.save()
            if stretch.error is not None:
                raise saver.stopped(stretch.error) from stretch.error


def _resumed(checkpoint: Checkpoint, writers: dict, seed: int, desc: str):
    """(run, cleaning base, stream start) from the checkpoint, the writers restored; a fresh start
    (Run at `seed`, {}, None) if there is none or it does not fit the staged files (then removed)."""
    saved = checkpoint.load()
    if saved is not None:
        try:
            for split, w in writers.items():
                w.restore(saved["writers"][split])
            run = _Run(TorchUniform.at(seed, saved["split_draws"]), saved["documents_seen"], saved["skipped_blank"])
            log(
                f"{desc}: resuming from the checkpoint in {checkpoint.dir}: {saved['tokens']:,} tokens from "
                f"{run.seen:,} documents already written"
            )
            return run, saved["cleaning"], (saved["stream"], saved["stream_table"])
        except (ValueError, KeyError) as e:
            log(f"{checkpoint.dir}: the checkpoint does not match its files ({e}); starting afresh")
    _afresh(checkpoint, writers)
    return _Run(TorchUniform(seed)), {}, None


def _afresh(checkpoint: Checkpoint, writers: dict) -> None:
    """Drop what a checkpoint held: the writers' restored shards and the checkpoint folder."""
    for w in writers.values():
        w.reset()
    checkpoint.clear()


def _fill_stream(texts, tokenizer, writers, val_doc_prob, seed, num_threads, desc, checkpoint, provenance) -> _Run:
    """Read the stream into the writers, from the checkpoint if there is one; returns the rule's state."""
    if checkpoint is None:
        run = _Run(TorchUniform(seed))
        _unread(provenance, _read_stream(texts, tokenizer, writers, val_doc_prob, run, num_threads, desc))
        return run
    run, base, start = _resumed(checkpoint, writers, seed, desc)
    try:
        with tracking(start) as tracker:
            saver = _Saver(checkpoint, tracker, writers, run, provenance, base)
            ahead = _read_stream(texts, tokenizer, writers, val_doc_prob, run, num_threads, desc, saver)
            _unread(provenance, ahead)
    except StaleStreamState as e:
        if iter(texts) is texts:
            raise
        log(f"{checkpoint.dir}: {e}; starting afresh")
        _afresh(checkpoint, writers)
        return _fill_stream(texts, tokenizer, writers, val_doc_prob, seed, num_threads, desc, checkpoint, provenance)
    _add_cleaning(provenance, base)
    return run


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
) -> dict:
    """One stream of documents (str or PretrainSample) -> train/val shards by the seeded rule; returns meta.

    `split_setting` names what sends documents to val in the empty-split message (default
    `val_doc_prob=<p>`); `check_empty=False` skips that check (a part of a scale-out build).
    `checkpoint` (pretrain/resume.py) makes the build resumable (module docstring); `texts` must then
    be re-iterable (a fresh iteration reads from the start) to start afresh from a stale checkpoint."""
    if not 0.0 <= val_doc_prob <= 1.0:
        raise ValueError(f"val_doc_prob must be in [0, 1], got {val_doc_prob}")
    budgets = (max_train_tokens, max_val_tokens)
    out, writers, meta = _start(
        out_dir, tokenizer, budgets, shard_bytes, seed, shuffle_buffer, val_doc_prob, checkpoint
    )
    meta["split_rule"] = STREAM_SPLIT_RULE.format(p=val_doc_prob)
    source = dict(dataset_name=dataset_name, dataset_config=dataset_config, provenance=provenance)

    def fill() -> dict:
        run = _fill_stream(texts, tokenizer, writers, val_doc_prob, seed, num_threads, str(out), checkpoint, provenance)
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
            _progress((max_train_tokens, max_val_tokens), str(out)) as bar,
            EncodeWorkers(tokenizer, num_threads) as workers,
        ):
            for split, texts in (("train", train_texts), ("val", val_texts)):
                w = writers[split]
                if w.full:
                    continue  # a zero budget reads nothing
                for flat, lens in encoded_batches(workers, texts, _wanted(w)):
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
