"""Which data an epoch-mode MixedLoader read: at given steps, or where a given item was read.

Both answers come from replaying the loader's plan (round robin and cursors; no row is read unless the text is
asked for), so they hold for any run with the same plan, schedule and caches (the ledger proves that a resumed
run is one). An item is a stride-T window of a pretrain split or byte stream (reported with its shard and token
offsets [start, start + T], and given the tokenizer the numbers of the documents its first and last token are in)
or an SFT example / packed row number.

    python -m niels_gpt.training.history pretrain cache --p '{"wikitext": 1.0}' --T 256 --B 8 --seed 0 \\
        --mode epoch --steps 100:102 [--rank 1 --world-size 2] [--text --tokenizer tokenizer/spm.model]
    python -m niels_gpt.training.history ... --find wikitext:1234 --steps 0:5000
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator

import numpy as np

from niels_gpt.training.loader import MixedLoader

KINDS = ("pretrain", "sft")


def _replay(loader: MixedLoader, first: int, last: int) -> Iterator[tuple[int, str, np.ndarray, np.ndarray]]:
    """(step, source, its rows in the batch, its items) for steps first..last-1 of a fresh copy of `loader`."""
    if loader.mode != "epoch":
        raise ValueError("the read history is for mode='epoch' (a random-mode batch is batch_at(step))")
    mixer = loader.fresh().mixer
    mixer.skip(loader.B, 0, first)
    for step in range(first, last):
        which, counts = mixer.assign(loader.B, step)
        for k, count in enumerate(counts):
            if count:
                yield step, mixer.names[k], np.flatnonzero(which == k), mixer.take(k, count)
        mixer.record(step, which)


class Documents:
    """Document numbers of a pretrain split's tokens: documents end with eot, numbered from 0 over the shards in
    order; token i of shard s is in document (eots before shard s) + (eots in shard s before i)."""

    def __init__(self, source, eot_id: int):
        self.eots = [np.flatnonzero(np.asarray(tokens) == eot_id) for tokens in source.maps]  # one scan per shard
        self.before = np.cumsum([0, *(len(e) for e in self.eots[:-1])]).tolist()

    def of(self, shard: int, token: int) -> int:
        return self.before[shard] + int(np.searchsorted(self.eots[shard], token))

    def windows(self, source, document: int) -> range:
        """The items (stride-T windows) of `source` that hold a token of `document` (maybe none)."""
        last_shard = len(source.maps[-1])
        total = self.before[-1] + len(self.eots[-1]) + int(not len(self.eots[-1]) or self.eots[-1][-1] < last_shard - 1)
        if not 0 <= document < total:
            raise ValueError(f"document {document:,} is not in this split (documents 0..{total - 1:,})")
        shard = int(np.searchsorted(self.before, document, side="right")) - 1  # the shard it ends in
        local, eots = document - self.before[shard], self.eots[shard]
        first = int(eots[local - 1]) + 1 if local else 0
        last = int(eots[local]) if local < len(eots) else len(source.maps[shard]) - 1
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

        low = count(lambda k: k[0] < shard or (k[0] == shard and k[1] + source.T < first))
        high = count(lambda k: k[0] < shard or (k[0] == shard and k[1] <= last))
        return range(low, high)


def where(source, item: int, documents: Documents | None = None) -> dict:
    """Shard and token offsets [start, end] of window `item` of a window source, with `documents` the numbers
    of its first and last token's documents; {} for an SFT source."""
    if not hasattr(source, "locate"):
        return {}
    shard, start = (int(v[0]) for v in source.locate(np.array([item], dtype=np.int64)))
    usable = getattr(source, "usable_shards", None)
    shard = usable[shard] if usable is not None else shard
    shards = getattr(source, "shards", None)  # as meta.json lists them (a manifest: the part shard's path)
    out = {"shard": shards[shard].listed if shards else shard, "tokens": [start, start + source.T]}
    if documents is not None:
        out["documents"] = [documents.of(shard, start), documents.of(shard, start + source.T)]
    return out


def reads(loader: MixedLoader, first: int, last: int, *, tokenizer=None) -> list[dict]:
    """One dict per row of steps first..last-1: step, row, source, item, shard and tokens (window sources);
    with `tokenizer` also documents (pretrain windows) and text (the row's input tokens decoded)."""
    out, documents = [], {}
    for step, name, rows, items in _replay(loader, first, last):
        source = loader.sources[name]
        if tokenizer is not None and hasattr(source, "maps") and name not in documents:
            documents[name] = Documents(source, tokenizer.eot_id)
        for row, item in zip(rows.tolist(), items.tolist()):
            entry = {"step": step, "row": row, "source": name, "item": item, **where(source, item, documents.get(name))}
            if tokenizer is not None:
                entry["text"] = tokenizer.decode(source.rows(np.array([item]))[0][0].tolist())
            out.append(entry)
    return sorted(out, key=lambda e: (e["step"], e["row"]))


def when_read(loader: MixedLoader, name: str, item, first: int, last: int) -> list[dict]:
    """Every (step, row, item) of steps first..last-1 at which source `name` read `item` (an int, or several:
    a range or a list) on this loader's rank."""
    if name not in loader.sources:
        raise ValueError(f"source {name!r} is not one of this loader's {loader.names}")
    wanted = np.asarray([item] if isinstance(item, int) else list(item), dtype=np.int64)
    return [
        {"step": step, "row": int(rows[hit]), "item": int(items[hit])}
        for step, source, rows, items in _replay(loader, first, last)
        if source == name
        for hit in np.flatnonzero(np.isin(items, wanted)).tolist()
    ]


def _steps(text: str) -> tuple[int, int]:
    first, _, last = text.partition(":")
    first, last = int(first), int(last) if last else int(first) + 1
    if not 0 <= first < last:
        raise argparse.ArgumentTypeError(f"--steps wants A:B with 0 <= A < B, got {text!r}")
    return first, last


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(
        description="What an epoch-mode MixedLoader read at steps A:B, or when it read an item"
    )
    ap.add_argument("kind", choices=KINDS, help="MixedLoader.pretrain or MixedLoader.sft")
    ap.add_argument("cache", help="the cache folder (e.g. cache)")
    ap.add_argument("--split", default="train", help="default: train")
    ap.add_argument("--p", required=True, type=json.loads, help="the run's weights or schedule, as JSON")
    ap.add_argument("--T", type=int, required=True)
    ap.add_argument("--B", type=int, required=True)
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--packing", action="store_true", help="sft: packed rows (default: off)")
    ap.add_argument("--rank", type=int, default=0, help="default 0")
    ap.add_argument("--world-size", type=int, default=1, help="default 1")
    ap.add_argument("--steps", type=_steps, required=True, help="A:B (steps A..B-1) or A")
    ap.add_argument("--find", help="SOURCE:ITEM: the steps and rows that read this item instead")
    ap.add_argument("--find-document", help="SOURCE:D: the steps and rows that read document D (needs --tokenizer)")
    ap.add_argument("--text", action="store_true", help="decode each row (needs --tokenizer)")
    ap.add_argument("--tokenizer", help="the sentencepiece model, for --text (default: none)")
    args = ap.parse_args(argv)
    options = dict(p=args.p, T=args.T, B=args.B, seed=args.seed, rank=args.rank, world_size=args.world_size)
    if args.kind == "sft":
        options["packing"] = args.packing
    loader = getattr(MixedLoader, args.kind)(args.cache, args.split, mode="epoch", **options)
    if args.find_document:
        if not args.tokenizer:
            ap.error("--find-document counts documents by their eot: pass --tokenizer PATH/spm.model")
        from niels_gpt.tokenizer import SentencePieceTokenizer

        name, _, number = args.find_document.rpartition(":")
        if name not in loader.sources or not hasattr(loader.sources[name], "maps"):
            ap.error(f"--find-document names a pretrain source of this loader ({loader.names}), got {name!r}")
        source = loader.sources[name]
        items = Documents(source, SentencePieceTokenizer(args.tokenizer).eot_id).windows(source, int(number))
        found = when_read(loader, name, items, *args.steps)
        print(json.dumps({"source": name, "document": int(number), "items": [items.start, items.stop], "read": found}))
        return
    if args.find:
        name, _, item = args.find.rpartition(":")
        found = when_read(loader, name, int(item), *args.steps)
        print(json.dumps({"source": name, "item": int(item), "read": found}))
        return
    tokenizer = None
    if args.text:
        if not args.tokenizer:
            ap.error("--text decodes the rows with a tokenizer: pass --tokenizer PATH/spm.model")
        from niels_gpt.tokenizer import SentencePieceTokenizer

        tokenizer = SentencePieceTokenizer(args.tokenizer)
    for entry in reads(loader, *args.steps, tokenizer=tokenizer):
        print(json.dumps(entry))


if __name__ == "__main__":
    main()
