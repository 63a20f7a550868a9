"""The reading of a single-stream pretrain build: the seeded split rule, and stretches between checkpoints.

`StreamBuild(writers, seed=, val_doc_prob=, checkpoint=, position=, provenance=)` is what
`writer.build_pretrain_cache` holds while it reads; `fill(texts, tokenizer, num_threads)` writes the
stream's documents into the writers by the rule (`route_batch`) until both budgets are full or the stream
ends. The rule: `rule.g` draws one uniform per document, in stream order (`STREAM_SPLIT_RULE`).

Resuming (with a `checkpoint`, pretrain/resume.py): the checkpoint's state is loaded first (the writers
restored, the rule's generator and counts, the stream's saved position put in `position.start`, which
the loader's stream starts from: `resumable.StreamPosition`, handed to it in its HubRead). Reading is
then split into stretches: every `checkpoint.every_tokens` tokens the stream stops being read, the
batches in flight are written (so everything read is written), and the position is saved - the writers,
documents seen / blank, the rule's generator, the loaders' cleaning counts, the stream's position (the
rows read but not yet used included). A hub failure that outlasts the retries ends the stretch the same
way, is saved, and stops the build with one message (`stopped`). A saved position of another stream
(StaleStreamState) drops the checkpoint and reads again from the start, once. Reading is split into
these stretches in every resumable build, so a resumed build and one that never stopped write the same.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import numpy as np

from niels_gpt.data.resumable import StaleStreamState, StreamPosition, StreamUnavailable
from niels_gpt.data.source import SourceUnavailableError
from niels_gpt.log import log, progress
from niels_gpt.pretrain.encode import encoded_batches
from niels_gpt.pretrain.record import add_counts, loader_counts
from niels_gpt.pretrain.resume import Checkpoint
from niels_gpt.pretrain.shards import ShardWriter
from niels_gpt.tokenizer.workers import EncodeWorkers

# With little budget left, batches shrink to (remaining tokens * this) chars so reading stops soon
# after the budgets fill; 16 chars/token is above any subword tokenizer's average.
MAX_CHARS_PER_TOKEN = 16
STREAM_SPLIT_RULE = (
    "single stream: g = numpy.random.default_rng(seed); every document, in stream order, draws "
    "g.random(); it goes to val if the draw < val_doc_prob={p} and the val budget is not "
    "full, else to train while the train budget is not full, else it is skipped; reading stops when both "
    "budgets are full"
)


def budget_progress(budgets: tuple[int | None, ...], desc: str):
    total = None if any(b is None for b in budgets) else sum(budgets)
    return progress(total=total, desc=desc, unit="tok", unit_scale=True)


def wanted(writer: ShardWriter, other: ShardWriter | None = None, other_share: float = 1.0) -> Callable[[], float]:
    """Chars worth reading now: the remaining budgets at MAX_CHARS_PER_TOKEN; `other` fills at
    `other_share` of the documents (val_doc_prob), so it needs 1/other_share times the text."""

    def remaining(w: ShardWriter, share: float) -> float:
        if w.full or share == 0:
            return 0.0
        return float("inf") if w.budget is None else (w.budget - w.n_tokens) / share

    def chars() -> float:
        total = remaining(writer, 1.0) + (remaining(other, other_share) if other else 0.0)
        return max(total, 1.0) * MAX_CHARS_PER_TOKEN

    return chars


@dataclass
class SplitRule:
    """The rule's state: its generator (numpy.random.default_rng(seed): PCG64, one float64 per draw, so
    one call for a batch gives the draws of one call per document), documents read, blank ones among them."""

    g: np.random.Generator
    seen: int = 0
    blank: int = 0


def route_batch(lens: list[int], g, train: ShardWriter, val: ShardWriter, val_doc_prob: float):
    """The single-stream rule over one encoded batch: ([writer, start, stop, documents] runs of the
    batch's flat tokens, documents read, blank ones among them, both budgets full).

    Document by document, in order: stop if both budgets are full; else one draw g.random(), blank
    documents too; a blank document (no tokens) goes nowhere; else val if draw <
    val_doc_prob and val is not full, else train if not full, else nowhere. "Full" counts what this
    batch has routed so far, so writing the runs afterwards (ShardWriter.write cuts at the budget) gives
    the bytes of writing each document in turn; adjacent documents bound for one writer form one run.
    """
    room = {w: float("inf") if w.budget is None else w.budget - w.n_tokens for w in (train, val)}
    runs: list[list] = []
    pos = seen = blank = 0
    draws = g.random(len(lens)).tolist()  # one draw per document, in order
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


def cleaning_counts(provenance: dict | None, base: dict) -> dict:
    """{entry: counts} of the loaders' cleaning counts in `provenance`, plus `base` (a checkpoint's)."""
    out = {}
    for key, counts in loader_counts(provenance):
        total = add_counts([base.get(key), counts])
        if total:
            out[key] = total
    return out


def unread(provenance: dict | None, n: int) -> None:
    """Take the last `n` documents read back from the loaders' counts that can (`unread`, e.g.
    gutenberg's): the documents read ahead for the workers and never routed (the budgets were full)."""
    for _, counts in loader_counts(provenance):
        if n and hasattr(counts, "unread"):
            counts.unread(n)


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


class StreamBuild:
    """The reading of one single-stream build (module docstring): `rule` (the split rule's state) once
    `fill` is done; with a `checkpoint`, resumable through `position` (the loader's stream registers there)."""

    def __init__(
        self,
        writers: dict[str, ShardWriter],
        *,
        seed: int,
        val_doc_prob: float,
        checkpoint: Checkpoint | None = None,
        position: StreamPosition | None = None,
        provenance: dict | None = None,
        desc: str = "",
    ):
        self.writers, self.seed, self.val_doc_prob = writers, seed, val_doc_prob
        self.checkpoint, self.position, self.provenance, self.desc = checkpoint, position, provenance, desc
        self.rule = SplitRule(np.random.default_rng(seed))
        self.base: dict = {}  # a checkpoint's cleaning counts (the loaders count from zero)
        self.saving = checkpoint is not None
        self.saved_at: int | None = None
        self.last = 0

    def tokens(self) -> int:
        return sum(w.n_tokens for w in self.writers.values())

    # ---------------------------------------------------------------- reading

    def fill(self, texts: Iterable, tokenizer, num_threads: int) -> SplitRule:
        """Read the stream into the writers, from the checkpoint if there is one; returns the rule's state.
        A checkpoint of another stream is dropped and the stream read again from the start (once; `texts`
        must then be re-iterable)."""
        for attempt in (1, 2):
            if self.checkpoint is not None:
                self._resume()
            try:
                ahead = self._read(texts, tokenizer, num_threads)
            except StaleStreamState as e:
                if attempt == 2 or iter(texts) is texts:
                    raise
                log(f"{self.checkpoint.dir}: {e}; starting afresh")
                self._afresh()
                continue
            unread(self.provenance, ahead)
            self._add_cleaning()
            return self.rule
        raise AssertionError("unreachable: the second attempt returns or raises")

    def _read(self, texts: Iterable, tokenizer, num_threads: int) -> int:
        """Write the documents by the rule until both budgets are full or the stream ends, in stretches that
        each end with a checkpoint when resumable. Returns how many documents were read ahead for the
        workers and never routed (the budgets filled first)."""
        train, val, p = self.writers["train"], self.writers["val"], self.val_doc_prob
        if train.full and (val.full or p == 0):
            return 0  # zero budgets: read nothing
        it, seen = _Counted(texts), self.rule.seen
        catch = (SourceUnavailableError, StaleStreamState) if self.checkpoint is not None else ()
        with budget_progress((train.budget, val.budget), self.desc) as bar, EncodeWorkers(tokenizer, num_threads) as w:
            bar.update(train.n_tokens + val.n_tokens)
            while True:
                stretch, done = _Stretch(it, self._due, catch), False
                for flat, lens in encoded_batches(w, stretch, wanted(train, val, p)):
                    runs, n_seen, n_blank, done = route_batch(lens, self.rule.g, train, val, p)
                    self.rule.seen, self.rule.blank = self.rule.seen + n_seen, self.rule.blank + n_blank
                    for dest, start, stop, n_docs in runs:
                        bar.update(dest.write(flat[start:stop]))
                        dest.n_documents += n_docs
                    if done:
                        break
                if done or stretch.ended:
                    return it.n - (self.rule.seen - seen)
                if isinstance(stretch.error, StaleStreamState):
                    raise stretch.error
                self._save()
                if stretch.error is not None:
                    raise self.stopped(stretch.error) from stretch.error

    # ---------------------------------------------------------------- checkpoints

    def _due(self) -> bool:
        return self.saving and self.tokens() - self.last >= self.checkpoint.every_tokens

    def _resume(self) -> None:
        """Start from the checkpoint: the writers restored, the rule's state and counts, the stream's saved
        position in `position.start`; a fresh start if there is none or it does not fit the staged files."""
        saved = self.checkpoint.load()
        start = None
        if saved is not None:
            try:
                for split, w in self.writers.items():
                    w.restore(saved["writers"][split])
                g = np.random.default_rng(self.seed)
                g.bit_generator.state = saved["split_draws"]
                self.rule = SplitRule(g, saved["documents_seen"], saved["skipped_blank"])
                self.base, start = saved["cleaning"], (saved["stream"], saved["stream_table"])
                self.saved_at = saved["tokens"]
                log(
                    f"{self.desc}: resuming from the checkpoint in {self.checkpoint.dir}: {saved['tokens']:,} "
                    f"tokens from {self.rule.seen:,} documents already written"
                )
            except (ValueError, KeyError) as e:
                log(f"{self.checkpoint.dir}: the checkpoint does not match its files ({e}); starting afresh")
                self._afresh()
        else:
            self._afresh()
        self.last = self.tokens()
        if self.position is not None:
            self.position.start, self.position.stream = start, None

    def _afresh(self) -> None:
        """Drop what a checkpoint held: the writers' restored shards, the rule's state, the folder."""
        for w in self.writers.values():
            w.reset()
        self.checkpoint.clear()
        self.rule, self.base, self.saved_at = SplitRule(np.random.default_rng(self.seed)), {}, None
        if self.position is not None:
            self.position.start, self.position.stream = None, None

    def _save(self) -> None:
        stream = self.position.stream if self.position is not None else None
        if stream is None:
            if self.rule.seen:  # read by datasets itself: hub.iter_rows logged why, meta.json records it
                self.saving = False
            return  # else the stream never opened: nothing to save yet
        info, table = stream.state()
        state = {
            "tokens": self.tokens(),
            "writers": {split: w.checkpoint() for split, w in self.writers.items()},
            "documents_seen": self.rule.seen,
            "skipped_blank": self.rule.blank,
            "split_draws": self.rule.g.bit_generator.state,
            "cleaning": cleaning_counts(self.provenance, self.base),
            "stream": info,
        }
        self.checkpoint.save(state, table)
        self.last = self.saved_at = state["tokens"]
        log(f"checkpoint: {state['tokens']:,} tokens from {self.rule.seen:,} documents -> {self.checkpoint.dir}")

    def _add_cleaning(self) -> None:
        """Fold the checkpoint's cleaning counts into `provenance` (after reading)."""
        if not self.base or self.provenance is None:
            return
        for key, counts in cleaning_counts(self.provenance, self.base).items():
            entry = self.provenance if key == "" else self.provenance.setdefault(key, {})
            entry["cleaning"] = counts

    def stopped(self, error: BaseException) -> SourceUnavailableError:
        """The one message of a build stopped by the hub: what failed, what was read, how to go on."""
        if self.saved_at is not None:
            saved = (
                f"the checkpoint in {self.checkpoint.dir} holds {self.saved_at:,} tokens: run the same build "
                "again (snakemake or build-pretrain) to continue from there"
            )
        elif not self.saving:
            saved = "this stream cannot be resumed: run the same build again once the hub answers (from the start)"
        else:
            saved = "nothing was saved yet"
        read = "" if isinstance(error, StreamUnavailable) else f"; {self.rule.seen:,} documents read"
        w = self.writers
        return SourceUnavailableError(
            f"{error}{read}; {self.tokens():,} tokens written ({w['train'].n_tokens:,} train, "
            f"{w['val'].n_tokens:,} val); {saved}"
        )
