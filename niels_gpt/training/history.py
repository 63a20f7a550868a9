"""Which data a MixedLoader read: at given steps, or where a given item, document or text was read.

Every answer comes from replaying the loader's plan (epoch mode: the round robin and the cursors; random mode:
each batch's draws, `MixedLoader.random_draws`), no row is read unless the text is asked for, so it holds for
any run with the same plan, schedule and caches (the ledger proves that a resumed run is one). A row of a
window source (pretrain split, byte stream) is reported with its shard and token offsets [start, start + T]
(epoch mode: also its stride-T item number; given the tokenizer, the numbers of the documents its first and
last token are in); a row of an SFT source with its example or packed-row number.

A document of a pretrain split is the tokens up to and including its eot, numbered from 0 over the shards in
order; it may begin in one shard and end in a later one (`Documents.spans`). A window holds a token of it when
its tokens [start, start + T] meet one of its spans.

    python -m niels_gpt.training.history pretrain cache --p '{"wikitext": 1.0}' --T 256 --B 8 --seed 0 \\
        --mode epoch --steps 100:102 [--rank 1 --world-size 2] [--text]
    python -m niels_gpt.training.history ... --steps 0:5000 --find wikitext:1234 | --find-document wikitext:17 \\
        | --find-text "the words to look for" --source wikitext | --digests [--against saved.jsonl]
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import numpy as np

from niels_gpt import layout
from niels_gpt.training.ledger import Ledger, replay_digests
from niels_gpt.training.loader import MODES, MixedLoader

KINDS = ("pretrain", "sft")


class Read:
    """What source `name` read in one step: `rows` of the batch, its `items` (epoch mode, and random-mode item
    sources; else None) and for window sources `views`, `starts` (the window's array and first token)."""

    __slots__ = ("step", "name", "rows", "items", "views", "starts")

    def __init__(self, step, name, rows, items, views=None, starts=None):
        self.step, self.name, self.rows, self.items, self.views, self.starts = step, name, rows, items, views, starts


def _replay(loader: MixedLoader, first: int, last: int) -> Iterator[Read]:
    """What every source read at steps first..last-1 of a fresh copy of `loader`, step by step."""
    if loader.mode == "random":
        for step in range(first, last):
            names, which, places = loader.random_draws(step, schedule=loader.history)
            for name, where in places:
                rows = np.flatnonzero(which == names.index(name))
                if isinstance(where, tuple):
                    yield Read(step, name, rows, None, *where)
                else:  # item numbers, or None for a source with get_batch alone
                    yield Read(step, name, rows, where)
        return
    mixer = loader.fresh().mixer
    mixer.skip(loader.B, 0, first)
    for step in range(first, last):
        which, counts = mixer.assign(loader.B, step)
        for k, count in enumerate(counts):
            if count:
                name, items = mixer.names[k], mixer.take(k, count)
                source = loader.sources[name]
                located = source.locate(items) if hasattr(source, "locate") else (None, None)
                yield Read(step, name, np.flatnonzero(which == k), items, *located)
        mixer.record(step, which)


def digests(loader: MixedLoader, first: int, last: int) -> Iterator[tuple[int, str]]:
    """(n, the ledger's running digest after n batches) for n = first+1..last, recomputed (no row read)."""
    if loader.mode == "random":
        ledger, job = Ledger(), partial(loader.batch_digests, rank=loader.rank, schedule=loader.history)
        ledger.add_digests(replay_digests(job, 0, first))  # split over processes when long
        for step in range(first, last):
            ledger.add_digest(job(step, step + 1))
            yield step + 1, ledger.digest.hex()
        return
    mixer = loader.fresh().mixer
    mixer.skip(loader.B, 0, first)
    for step in range(first, last):
        mixer.skip(loader.B, step, 1)
        yield step + 1, mixer.ledger.digest.hex()


def first_difference(loader: MixedLoader, listing, first: int, last: int) -> dict:
    """The first batch of first..last-1 after which this loader's ledger digest differs from the one `listing` (a
    file of `--digests` JSON lines, from where a state was saved) gives: {"batch": n (the batch that differs, 0-based),
    "digest": here, "listed": there}, or {"batch": None} when every listed batch of the range agrees."""
    listed = {}
    with open(listing, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            try:
                entry = json.loads(line)
                listed[int(entry["batches"])] = str(entry["digest"])
            except (ValueError, KeyError, TypeError):
                raise ValueError(f"{listing}, line {number}: not a --digests line ({line.strip()[:80]!r})") from None
    for n, digest in digests(loader, first, last):
        if n in listed and listed[n] != digest:
            return {"batch": n - 1, "digest": digest, "listed": listed[n]}
    return {"batch": None}


class Documents:
    """Document numbers of a pretrain split's tokens: documents end with eot, numbered from 0 over the shards in
    order; token i of shard s is in document (eots before shard s) + (eots in shard s before i)."""

    def __init__(self, source, eot_id: int):
        self.eots = [np.flatnonzero(np.asarray(tokens) == eot_id) for tokens in source.maps]  # one scan per shard
        self.lengths = [len(tokens) for tokens in source.maps]
        self.before = np.cumsum([0, *(len(e) for e in self.eots[:-1])]).tolist()
        # the documents shard s holds a token of: before[s] .. before[s] + len(eots[s]) - 1, and one more when
        # tokens follow its last eot (that document goes on in the next shard)
        self.ends = [
            b + len(e) + int(n > 0 and (not len(e) or e[-1] < n - 1))
            for b, e, n in zip(self.before, self.eots, self.lengths)
        ]
        self.count = max(self.ends, default=0)

    def of(self, shard: int, token: int) -> int:
        return self.before[shard] + int(np.searchsorted(self.eots[shard], token))

    def spans(self, document: int) -> list[tuple[int, int, int]]:
        """(shard, first token, last token) of every part of `document`, in order (a document may go on from
        one shard into the next)."""
        if not 0 <= document < self.count:
            raise ValueError(f"document {document:,} is not in this split (documents 0..{self.count - 1:,})")
        out = []
        for shard, (before, end) in enumerate(zip(self.before, self.ends)):
            if before <= document < end:
                local, eots = document - before, self.eots[shard]
                first = int(eots[local - 1]) + 1 if local else 0
                last = int(eots[local]) if local < len(eots) else self.lengths[shard] - 1
                out.append((shard, first, last))
        return out

    def windows(self, source, document: int) -> range:
        """The items (stride-T windows) of `source` that hold a token of `document` (maybe none): one range,
        since items are numbered shard by shard and a document's parts lie in consecutive shards."""
        spans = self.spans(document)
        (first_shard, first, _), (last_shard, _, last) = spans[0], spans[-1]
        usable = list(getattr(source, "usable_shards", range(len(source.maps))))

        def key(item: int) -> tuple[int, int]:  # (shard, start token) of a window: increasing in the item
            s, start = (int(v[0]) for v in source.locate(np.array([item], dtype=np.int64)))
            return usable[s], start

        def count(before) -> int:  # the number of items whose key is before(key)
            lo, hi = 0, len(source)
            while lo < hi:
                mid = (lo + hi) // 2
                lo, hi = (mid + 1, hi) if before(key(mid)) else (lo, mid)
            return lo

        low = count(lambda k: k[0] < first_shard or (k[0] == first_shard and k[1] + source.T < first))
        high = count(lambda k: k[0] < last_shard or (k[0] == last_shard and k[1] <= last))
        return range(low, high)


def _shard(source, view: int) -> int:
    """The shard (pretrain) or stream number of a source's window array `view`."""
    usable = getattr(source, "usable_shards", None)
    return usable[view] if usable is not None else view


def _position(source, view: int, start: int, documents: Documents | None) -> dict:
    shard, names = _shard(source, view), getattr(source, "names", None)
    label = _label(source, shard) if hasattr(source, "shards") else names[shard] if names else shard
    out = {"shard": label, "tokens": [start, start + source.T]}
    if documents is not None:
        out["documents"] = [documents.of(shard, start), documents.of(shard, start + source.T)]
    return out


def where(source, item: int, documents: Documents | None = None) -> dict:
    """Shard and token offsets [start, end] of window `item` of a window source, with `documents` the numbers
    of its first and last token's documents; {} for an SFT source."""
    if not hasattr(source, "locate"):
        return {}
    view, start = (int(v[0]) for v in source.locate(np.array([item], dtype=np.int64)))
    return _position(source, view, start, documents)


def reads(loader: MixedLoader, first: int, last: int, *, tokenizer=None) -> list[dict]:
    """One dict per row of steps first..last-1: step, row, source, item (epoch mode and SFT sources), shard and
    tokens (window sources); with `tokenizer` also documents (pretrain windows) and text (the row's input
    tokens decoded)."""
    out, documents = [], {}
    for read in _replay(loader, first, last):
        source = loader.sources[read.name]
        if tokenizer is not None and hasattr(source, "maps") and read.name not in documents:
            documents[read.name] = Documents(source, tokenizer.eot_id)
        for i, row in enumerate(read.rows.tolist()):
            entry = {"step": read.step, "row": row, "source": read.name}
            if read.items is not None:
                entry["item"] = int(read.items[i])
            if read.views is not None:
                view, start = int(read.views[i]), int(read.starts[i])
                entry |= _position(source, view, start, documents.get(read.name))
            if tokenizer is not None:
                if read.views is not None:
                    tokens = source.window_views[view][start][:-1]
                else:
                    tokens = source.rows(np.array([entry["item"]]))[0][0]
                entry["text"] = tokenizer.decode(np.asarray(tokens).astype(np.int64).tolist())
            out.append(entry)
    return sorted(out, key=lambda e: (e["step"], e["row"]))


def _check_source(loader: MixedLoader, name: str) -> None:
    if name not in loader.sources:
        raise ValueError(f"source {name!r} is not one of this loader's {loader.names}")


def when_read(loader: MixedLoader, name: str, item, first: int, last: int) -> list[dict]:
    """Every (step, row, item) of steps first..last-1 at which source `name` read `item` (an int, or several:
    a range or a list) on this loader's rank. Random mode draws windows at any token, not items: there a row of
    a window source counts when its window holds a token of item `item`'s window."""
    _check_source(loader, name)
    wanted = np.asarray([item] if isinstance(item, int) else list(item), dtype=np.int64)
    source = loader.sources[name]
    if loader.mode == "random" and hasattr(source, "locate"):
        if len(wanted) == 0:
            return []
        views, starts = source.locate(wanted)
        spans = [(_shard(source, int(v)), int(s), int(s) + source.T) for v, s in zip(views, starts)]
        return when_spans_read(loader, name, spans, first, last)
    return [
        entry
        for read in _replay(loader, first, last)
        if read.name == name and read.items is not None
        for entry in _entries(source, read, np.isin(read.items, wanted))
    ]


def when_spans_read(loader: MixedLoader, name: str, spans: list[tuple[int, int, int]], first: int, last: int) -> list:
    """Every row of steps first..last-1 at which window source `name` read a window holding a token of one of
    `spans` ((shard, first token, last token), shards as in source.maps)."""
    _check_source(loader, name)
    source = loader.sources[name]
    out = []
    for read in _replay(loader, first, last):
        if read.name != name or read.views is None:
            continue
        shards = np.asarray(getattr(source, "usable_shards", range(len(source.window_views))))[read.views]
        hits = np.zeros(len(read.rows), dtype=bool)
        for shard, lo, hi in spans:
            hits |= (shards == shard) & (read.starts <= hi) & (read.starts + source.T >= lo)
        out += _entries(source, read, hits)
    return out


def _entries(source, read: Read, hits: np.ndarray) -> list[dict]:
    out = []
    for i in np.flatnonzero(hits).tolist():
        entry = {"step": read.step, "row": int(read.rows[i])}
        if read.items is not None:
            entry["item"] = int(read.items[i])
        if read.views is not None:
            entry |= _position(source, int(read.views[i]), int(read.starts[i]), None)
        out.append(entry)
    return out


def occurrences(source, tokens: list[int]) -> list[tuple[int, int]]:
    """(shard, token) of every place a pretrain split holds the token sequence `tokens`, in order (also where it
    runs from one shard into the next): candidates for the first token, narrowed token by token (numpy)."""
    seq = np.asarray(tokens, dtype=np.int64)
    if not len(seq):
        raise ValueError("the text encodes to no token")
    L, found = len(seq), []
    maps = [np.asarray(m) for m in source.maps]

    def scan(arr: np.ndarray) -> np.ndarray:
        if len(arr) < L:
            return np.empty(0, dtype=np.int64)
        at = np.flatnonzero(arr[: len(arr) - L + 1] == seq[0])
        for j in range(1, L):
            at = at[arr[at + j] == seq[j]]
        return at

    for shard, arr in enumerate(maps):
        found += [(shard, int(t)) for t in scan(arr)]
        if L > 1 and shard + 1 < len(maps):  # a match that starts in the last L - 1 tokens and goes on
            tail = arr[max(0, len(arr) - L + 1) :]
            joined = np.concatenate([tail, maps[shard + 1][: L - 1]])
            found += [(shard, len(arr) - len(tail) + int(t)) for t in scan(joined) if t < len(tail)]
    return sorted(found)


def find_text(loader: MixedLoader, name: str, text: str, tokenizer, first: int, last: int) -> dict:
    """The documents of pretrain source `name` that hold `text` (encoded with `tokenizer`, the cache's: the same
    tokens as inside a document when the text starts at a word) and the rows of steps first..last-1 that read a
    token of each."""
    _check_source(loader, name)
    source = loader.sources[name]
    if not hasattr(source, "maps"):
        raise ValueError(f"--find-text searches a pretrain source's documents; {name!r} is not one")
    tokens = tokenizer.encode(text)
    documents = Documents(source, tokenizer.eot_id)
    at = occurrences(source, tokens)
    held = sorted({documents.of(shard, token) for shard, token in at})
    out = []
    for document in held:
        spans = documents.spans(document)
        out.append(
            {
                "document": document,
                "at": [[_label(source, shard), token] for shard, token in at if documents.of(shard, token) == document],
                "read": when_spans_read(loader, name, spans, first, last),
            }
        )
    return {"source": name, "text": text, "tokens": len(tokens), "documents": out}


def _label(source, shard: int):
    """A pretrain shard as its meta.json lists it (a manifest: the part shard's path)."""
    shards = getattr(source, "shards", None)
    return shards[shard].listed if shards else shard


def _steps(text: str) -> tuple[int, int]:
    first, _, last = text.partition(":")
    first, last = int(first), int(last) if last else int(first) + 1
    if not 0 <= first < last:
        raise argparse.ArgumentTypeError(f"--steps wants A:B with 0 <= A < B, got {text!r}")
    return first, last


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="What a MixedLoader read at steps A:B, or when it read an item or text")
    ap.add_argument("kind", choices=KINDS, help="MixedLoader.pretrain or MixedLoader.sft")
    ap.add_argument("cache", help="the cache folder (e.g. cache)")
    ap.add_argument("--split", default="train", help="default: train")
    ap.add_argument("--p", required=True, type=json.loads, help="the run's weights or schedule, as JSON")
    ap.add_argument("--T", type=int, required=True)
    ap.add_argument("--B", type=int, required=True)
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--mode", choices=MODES, default="epoch", help="the loader's mode (default: epoch)")
    ap.add_argument("--packing", action="store_true", help="sft: packed rows (default: off)")
    ap.add_argument("--rank", type=int, default=0, help="default 0")
    ap.add_argument("--world-size", type=int, default=1, help="default 1")
    ap.add_argument("--steps", type=_steps, required=True, help="A:B (steps A..B-1) or A")
    ap.add_argument("--find", help="SOURCE:ITEM: the steps and rows that read this item instead")
    ap.add_argument("--find-document", help="SOURCE:D: the steps and rows that read a token of document D")
    ap.add_argument("--find-text", help="the documents of --source holding this text, and the steps that read them")
    ap.add_argument("--source", help="the pretrain source --find-text searches")
    ap.add_argument("--digests", action="store_true", help="the ledger's running digest after each step of A:B")
    ap.add_argument(
        "--against", help="with --digests: a file of --digests lines from elsewhere; the first that differs"
    )
    ap.add_argument("--text", action="store_true", help="decode each row with the tokenizer")
    ap.add_argument("--tokenizer", help="the sentencepiece model (default: CACHE/tokenizer/spm.model)")
    args = ap.parse_args(argv)
    options = dict(p=args.p, T=args.T, B=args.B, seed=args.seed, rank=args.rank, world_size=args.world_size)
    if args.kind == "sft":
        options["packing"] = args.packing
    tokenizer = None
    if args.text or args.find_document or args.find_text:
        from niels_gpt.tokenizer import SentencePieceTokenizer

        model = args.tokenizer or layout.tokenizer_model(args.cache)
        if not Path(model).is_file():
            ap.error(
                f"{model}: no tokenizer model there (--text and --find-* read one); pass --tokenizer PATH/spm.model"
            )
        tokenizer = SentencePieceTokenizer(model)
        options["tokenizer"] = tokenizer  # the caches are checked against it
    loader = getattr(MixedLoader, args.kind)(args.cache, args.split, mode=args.mode, **options)
    try:
        _answer(args, loader, tokenizer, ap)
    except ValueError as e:  # a source, item, document or text this cache does not hold
        ap.error(str(e))


def _answer(args, loader: MixedLoader, tokenizer, ap: argparse.ArgumentParser) -> None:
    """Print the answer main's arguments ask for, as JSON (lines)."""
    if args.digests and args.against:
        print(json.dumps(first_difference(loader, args.against, *args.steps)))
        return
    if args.digests:
        for n, digest in digests(loader, *args.steps):
            print(json.dumps({"batches": n, "digest": digest}))
        return
    if args.find_text:
        if args.source is None:
            ap.error(f"--find-text needs --source, one of {loader.names}")
        print(json.dumps(find_text(loader, args.source, args.find_text, tokenizer, *args.steps)))
        return
    if args.find_document:
        name, _, number = args.find_document.rpartition(":")
        if not number.isdigit():
            ap.error(f"--find-document wants SOURCE:D with D a document number, got {args.find_document!r}")
        if name not in loader.sources or not hasattr(loader.sources[name], "maps"):
            ap.error(f"--find-document names a pretrain source of this loader ({loader.names}), got {name!r}")
        source = loader.sources[name]
        documents = Documents(source, tokenizer.eot_id)
        spans = documents.spans(int(number))
        found = when_spans_read(loader, name, spans, *args.steps)
        answer = {
            "source": name,
            "document": int(number),
            "spans": [[_label(source, s), a, b + 1] for s, a, b in spans],
        }
        if args.mode == "epoch":
            items = documents.windows(source, int(number))
            answer["items"] = [items.start, items.stop]
        print(json.dumps({**answer, "read": found}))
        return
    if args.find:
        name, _, item = args.find.rpartition(":")
        if not item.isdigit():
            ap.error(f"--find wants SOURCE:ITEM with ITEM an item number, got {args.find!r}")
        found = when_read(loader, name, int(item), *args.steps)
        print(json.dumps({"source": name, "item": int(item), "read": found}))
        return
    for entry in reads(loader, *args.steps, tokenizer=tokenizer):
        print(json.dumps(entry))


if __name__ == "__main__":
    main()
