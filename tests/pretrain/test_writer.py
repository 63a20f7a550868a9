"""The pretrain writer (pretrain/writer.py): round trip, exact budgets, rotation, the split rule, blank
documents, empty splits, atomicity, meta.json and the "not built" record."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from niels_gpt.data.gutenberg import iter_gutenberg, strip_gutenberg_boilerplate
from niels_gpt.data.normalize import is_blank
from niels_gpt.data.source import HubRead
from niels_gpt.data.types import PretrainSample
from niels_gpt.hashing import sha256_file
from niels_gpt.layout import FORMAT_VERSION
from niels_gpt.meta import REQUIRED_PRETRAIN, check_required, read_meta
from niels_gpt.pretrain import encode as batch_encode
from niels_gpt.pretrain.dataset import PretrainTokenStreamDataset
from niels_gpt.pretrain.writer import build_pretrain_cache, build_pretrain_cache_presplit, write_not_built_meta
from niels_gpt.token_files import list_shards
from niels_gpt.tokenizer import workers
from tests.support.cache_files import documents, split_tokens
from tests.support.corpus import tiny_corpus
from tests.support.hub_files import raw_gutenberg_book, write_parquet


def build_presplit(train, val, out, tok, **kw):
    args = dict(tokenizer=tok, max_train_tokens=None, max_val_tokens=None, seed=1)
    args.update(kw)
    return build_pretrain_cache_presplit(train, val, str(out), **args)


def build_stream(texts, out, tok, **kw):
    args = dict(
        tokenizer=tok,
        max_train_tokens=None,
        max_val_tokens=None,
        shard_bytes=1 << 20,
        seed=7,
        shuffle_buffer=None,
        val_doc_prob=0.3,
    )
    args.update(kw)
    return build_pretrain_cache(texts, str(out), **args)


def test_presplit_roundtrip_decodes_every_document(tmp_path, tiny_tokenizer):
    train, val = tiny_corpus(40, seed=1), tiny_corpus(10, seed=2)
    meta = build_presplit(
        [PretrainSample(t, "x", {}) for t in train], val, tmp_path, tiny_tokenizer, shard_bytes=1 << 20
    )
    for split, texts in (("train", train), ("val", val)):
        tokens = split_tokens(tmp_path, split)
        assert tokens[-1] == tiny_tokenizer.eot_id  # eot after every document, the last included
        assert [tiny_tokenizer.decode(d) for d in documents(tokens, tiny_tokenizer.eot_id)] == texts
        assert meta[f"{split}_tokens"] == len(tokens) == sum(len(tiny_tokenizer.encode(t)) + 1 for t in texts)
        assert meta[f"{split}_documents"] == len(texts)
    check_required(meta, REQUIRED_PRETRAIN)
    check_required(meta)  # by its kind
    assert meta["built"] is True and read_meta(str(tmp_path / "meta.json")) == meta
    assert (meta["kind"], meta["format_version"], meta["seed"]) == ("pretrain", FORMAT_VERSION, 1)
    assert (meta["vocab_size"], meta["eot_id"]) == (tiny_tokenizer.vocab_size, tiny_tokenizer.eot_id)


def test_stream_split_follows_the_recorded_rule(tmp_path, tiny_tokenizer, monkeypatch):
    monkeypatch.setattr(batch_encode, "BATCH_DOCS", 7)  # draws span many batches
    texts = tiny_corpus(80, seed=3) + [""]  # the empty document still draws, but writes nothing
    meta = build_stream(texts, tmp_path, tiny_tokenizer, val_doc_prob=0.3, seed=11)
    g = np.random.default_rng(11)
    is_val = [g.random() < 0.3 for _ in texts]  # one draw per document, blank ones too
    want = {
        "train": [t for t, v in zip(texts, is_val) if not v and t],
        "val": [t for t, v in zip(texts, is_val) if v and t],
    }
    for split in ("train", "val"):
        got = [tiny_tokenizer.decode(d) for d in documents(split_tokens(tmp_path, split), tiny_tokenizer.eot_id)]
        assert got == want[split]
    assert "val_doc_prob=0.3" in meta["split_rule"] and "numpy.random.default_rng(seed)" in meta["split_rule"]
    assert meta["val_doc_prob"] == 0.3 and meta["documents_seen"] == len(texts)


def test_budgets_are_exact_and_the_crossing_document_is_cut(tmp_path, tiny_tokenizer):
    texts = tiny_corpus(120, seed=4)
    meta = build_stream(texts, tmp_path, tiny_tokenizer, max_train_tokens=1234, max_val_tokens=321, val_doc_prob=0.2)
    train, val = split_tokens(tmp_path, "train"), split_tokens(tmp_path, "val")
    assert (meta["train_tokens"], meta["val_tokens"]) == (len(train), len(val)) == (1234, 321)
    # the train stream is a prefix of the uncut train stream of an unlimited build
    full = build_stream(texts, tmp_path / "full", tiny_tokenizer, val_doc_prob=0.2)
    assert full["train_tokens"] > 1234
    assert np.array_equal(split_tokens(tmp_path / "full", "train")[:1234], train)
    # budgets above what is available: everything, exactly
    small = tiny_corpus(5, seed=5)
    meta = build_stream(
        small, tmp_path / "small", tiny_tokenizer, max_train_tokens=10**9, max_val_tokens=0, val_doc_prob=0.0
    )
    assert meta["train_tokens"] == sum(len(tiny_tokenizer.encode(t)) + 1 for t in small) and meta["val_tokens"] == 0


def test_presplit_budgets_are_exact(tmp_path, tiny_tokenizer):
    meta = build_presplit(
        tiny_corpus(50, seed=6), tiny_corpus(50, seed=7), tmp_path, tiny_tokenizer,
        max_train_tokens=777, max_val_tokens=0, shard_bytes=100,
    )  # fmt: skip
    assert meta["train_tokens"] == len(split_tokens(tmp_path, "train")) == 777
    assert meta["val_tokens"] == 0 and list_shards(tmp_path / "val") == []
    assert meta["empty_splits"] == {"val": "max_val_tokens is 0: built without val on purpose"}
    with pytest.raises(ValueError, match=r"val: this split is empty on purpose \(max_val_tokens is 0"):
        PretrainTokenStreamDataset(tmp_path / "val", T=4)


BLANK = ["", "   ", "\n\n\t\n", "\u00a0\u3000 \n"]


def test_blank_documents_are_skipped_and_counted(tmp_path, tiny_tokenizer):
    texts = tiny_corpus(30, seed=12)
    mixed = [d for pair in itertools.zip_longest(texts, BLANK * 3) for d in pair if d is not None]
    stream = build_stream(mixed, tmp_path / "s", tiny_tokenizer, val_doc_prob=0.3)
    presplit = build_presplit(mixed, BLANK + texts[:3], tmp_path / "p", tiny_tokenizer)
    eot = tiny_tokenizer.eot_id
    for out, meta, n_blank in ((tmp_path / "s", stream, 12), (tmp_path / "p", presplit, 16)):
        for split in ("train", "val"):
            tokens = split_tokens(out, split)
            assert tokens[0] != eot and not np.any((tokens[1:] == eot) & (tokens[:-1] == eot))  # no eot after nothing
            docs = [tiny_tokenizer.decode(d) for d in documents(tokens, eot)]
            assert all(d.strip() for d in docs) and meta[f"{split}_documents"] == len(docs)
        assert meta["cleaning"] == {"skipped_blank": n_blank}
        assert meta["documents_seen"] == len(mixed) + (len(BLANK) + 3 if out.name == "p" else 0)
    kept = [t for t in mixed if t.strip()]
    assert stream["train_documents"] + stream["val_documents"] == len(kept)


def test_a_split_that_would_be_empty_fails_with_one_message_and_leaves_nothing(tmp_path, tiny_tokenizer):
    books = tiny_corpus(4, seed=13) + ["  "]  # few long documents, a small val_doc_prob: no book goes to val
    prov = {"source": "gutenberg"}
    with pytest.raises(ValueError) as e:
        build_stream(
            books,
            tmp_path,
            tiny_tokenizer,
            val_doc_prob=0.02,
            max_val_tokens=1000,
            provenance=prov,
            split_setting="sources.gutenberg.val_doc_prob=0.02",
        )
    assert str(e.value) == (
        "gutenberg: the val split would hold 0 tokens (documents read: 5, blank: 1; split by "
        "sources.gutenberg.val_doc_prob=0.02). To fix: raise sources.gutenberg.val_doc_prob so val gets "
        "documents, or set sources.gutenberg.max_val_tokens: 0 to build without val on purpose"
    )
    assert not (tmp_path / "meta.json").exists() and not list(tmp_path.rglob("*.bin*"))
    with pytest.raises(ValueError, match=r"roam: the val split would hold 0 tokens \(documents read: 2, blank: 2"):
        build_presplit(
            books, ["", " \n"], tmp_path, tiny_tokenizer,
            provenance={"source": "roam"}, split_setting="sources.roam.val_frac=0.1",
        )  # fmt: skip
    assert not (tmp_path / "meta.json").exists() and not list(tmp_path.rglob("*.bin*"))


def test_reading_stops_once_both_budgets_are_full(tmp_path, tiny_tokenizer):
    pulled = itertools.count()
    corpus = tiny_corpus(50, seed=8)

    def endless():
        for i in itertools.count():
            next(pulled)
            yield corpus[i % len(corpus)]

    meta = build_stream(
        endless(), tmp_path, tiny_tokenizer, max_train_tokens=2000, max_val_tokens=200, val_doc_prob=0.25
    )
    assert (meta["train_tokens"], meta["val_tokens"]) == (2000, 200)
    in_flight = workers.AHEAD_PER_WORKER * workers.available_cpus()  # batches read ahead of the writer
    assert next(pulled) <= meta["documents_seen"] + (in_flight + 1) * batch_encode.BATCH_DOCS


@pytest.mark.parametrize("presplit", [False, True])
def test_shards_are_identical_for_one_two_and_three_workers(tmp_path, tiny_tokenizer, monkeypatch, presplit):
    monkeypatch.setattr(batch_encode, "BATCH_DOCS", 7)  # many batches: workers finish out of order
    texts = tiny_corpus(120, seed=21) + ["", "   "]
    hashes = []
    for n in (1, 2, 3):
        out = tmp_path / str(n)
        if presplit:
            meta = build_presplit(texts[:90], texts[90:], out, tiny_tokenizer, seed=7, shard_bytes=256, num_threads=n)
        else:
            meta = build_stream(texts, out, tiny_tokenizer, shard_bytes=256, num_threads=n)
        hashes.append({s: [x["sha256"] for x in meta["shards"][s]] for s in ("train", "val")})
        assert meta["train_tokens"] > 0 and meta["val_tokens"] > 0
    assert hashes[0] == hashes[1] == hashes[2]
    assert len(hashes[0]["train"]) > 3


def test_shards_rotate_at_shard_bytes_and_meta_lists_them(tmp_path, tiny_tokenizer):
    texts = tiny_corpus(30, seed=9)
    meta = build_stream(texts, tmp_path, tiny_tokenizer, shard_bytes=64, val_doc_prob=0.2)
    whole = build_stream(texts, tmp_path / "whole", tiny_tokenizer, shard_bytes=1 << 20, val_doc_prob=0.2)
    for split in ("train", "val"):
        listed = meta["shards"][split]
        paths = list_shards(tmp_path / split)
        assert (
            [s["file"] for s in listed] == [p.name for p in paths] == [f"shard_{i:05d}.bin" for i in range(len(paths))]
        )
        assert all(s["tokens"] == 32 for s in listed[:-1]) and 0 < listed[-1]["tokens"] <= 32
        for s, p in zip(listed, paths):
            assert s["sha256"] == sha256_file(p) and s["tokens"] * 2 == p.stat().st_size
        assert sum(s["tokens"] for s in listed) == meta[f"{split}_tokens"]
        assert np.array_equal(split_tokens(tmp_path, split), split_tokens(tmp_path / "whole", split))
    assert len(meta["shards"]["train"]) > 10 and len(whole["shards"]["train"]) == 1


def test_rebuild_removes_stale_shards_and_temporaries(tmp_path, tiny_tokenizer):
    texts = tiny_corpus(30, seed=10)
    build_stream(texts, tmp_path, tiny_tokenizer, shard_bytes=64)
    (tmp_path / "train" / "shard_00999.bin.tmp").write_bytes(b"\0\0")
    (tmp_path / "meta.json.tmp").write_text("{}")
    meta = build_stream(texts, tmp_path, tiny_tokenizer, shard_bytes=1 << 20)
    assert sorted(p.name for p in (tmp_path / "train").iterdir()) == ["shard_00000.bin"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["meta.json", "train", "val"]
    assert len(meta["shards"]["train"]) == 1


def test_interrupted_build_leaves_no_meta_and_no_final_shard(tmp_path, tiny_tokenizer, monkeypatch):
    monkeypatch.setattr(batch_encode, "BATCH_DOCS", 16)  # several shards are written before the failure
    texts = tiny_corpus(200, seed=12)
    build_stream(texts, tmp_path, tiny_tokenizer, shard_bytes=512)  # a complete previous build

    def breaks_midway():
        yield from texts[:150]
        raise RuntimeError("connection lost")

    with pytest.raises(RuntimeError, match="connection lost"):
        build_stream(breaks_midway(), tmp_path, tiny_tokenizer, shard_bytes=512)
    assert not (tmp_path / "meta.json").exists()
    left = [p.name for p in tmp_path.rglob("*") if p.is_file()]
    assert left == [], f"an interrupted build left {left}"


def test_shards_are_written_under_temporary_names_until_the_end(tmp_path, tiny_tokenizer, monkeypatch):
    monkeypatch.setattr(batch_encode, "BATCH_DOCS", 16)  # small batches: shards exist while input is read
    seen = []

    def watching():
        for i, text in enumerate(tiny_corpus(300, seed=13)):
            if i % 50 == 49:
                seen.append(sorted(p.name for p in (tmp_path / "train").iterdir()))
            yield text

    build_stream(watching(), tmp_path, tiny_tokenizer, shard_bytes=1024)
    assert any(names for names in seen), "expected shards to exist mid-build"
    assert all(name.endswith(".tmp") for names in seen for name in names)


def test_meta_is_canonical_json(tmp_path, tiny_tokenizer):
    meta = build_stream(tiny_corpus(10, seed=16), tmp_path, tiny_tokenizer, provenance={"note": "x"})
    text = (tmp_path / "meta.json").read_text()
    assert text == json.dumps(meta, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    assert meta["format_version"] >= 1 and meta["shard_bytes"] == 1 << 20 and meta["provenance"] == {"note": "x"}


@pytest.mark.parametrize("budget", [1, 37, 200, None])
def test_presplit_meta_counts_the_documents_read_up_to_the_cut(tmp_path, tiny_tokenizer, budget):
    """A document is read when it begins before the train budget is full; blank ones are read and skipped."""
    texts = [d for pair in zip(tiny_corpus(20, seed=3), BLANK * 5) for d in pair]
    val = tiny_corpus(5, seed=4)

    def build(out, train_budget):
        return build_presplit(
            texts, val, out, tiny_tokenizer, max_train_tokens=train_budget,
            dataset_name="someone/books", dataset_config="en",
        )  # fmt: skip

    build(tmp_path / "whole", None)
    whole = documents(split_tokens(tmp_path / "whole", "train"), tiny_tokenizer.eot_id)
    lengths = iter(len(d) + 1 for d in whole)
    sizes = np.array([next(lengths) if t.strip() else 0 for t in texts])  # tokens each document adds, eot included
    starts = np.cumsum(sizes) - sizes
    n_read = len(texts) if budget is None else int(np.count_nonzero(starts < budget))
    read = texts[:n_read]
    meta = build(tmp_path / "cut", budget)
    assert meta["documents_seen"] == n_read + len(val)
    assert meta["cleaning"] == {"skipped_blank": sum(not t.strip() for t in read)}
    assert meta["train_documents"] == sum(bool(t.strip()) for t in read) and meta["val_documents"] == len(val)
    assert (meta["dataset_name"], meta["dataset_config"]) == ("someone/books", "en")
    assert (meta["tokenizer_sha256"], meta["eot_id"]) == (tiny_tokenizer.sha256, tiny_tokenizer.eot_id)


def test_presplit_with_a_zero_train_budget_still_fills_val(tmp_path, tiny_tokenizer):
    meta = build_presplit(
        tiny_corpus(10, seed=8),
        tiny_corpus(10, seed=9),
        tmp_path,
        tiny_tokenizer,
        max_train_tokens=0,
        max_val_tokens=50,
    )
    assert (meta["train_tokens"], meta["val_tokens"]) == (0, len(split_tokens(tmp_path, "val"))) == (0, 50)


def test_a_disabled_source_writes_empty_splits_and_a_meta_that_says_why(tmp_path):
    out = tmp_path / "not" / "yet" / "wikitext"
    meta = write_not_built_meta(
        str(out), reason="disabled", dataset_name="someone/wiki", dataset_config="raw", seed=4, shard_bytes=4096,
        provenance={"source": "wikitext"},
    )  # fmt: skip
    assert read_meta(str(out / "meta.json")) == meta
    check_required(meta)  # a "not built" record: the header and its reason
    expected = {
        "kind": "pretrain", "format_version": FORMAT_VERSION, "seed": 4, "tokenizer_sha256": None, "vocab_size": None,
        "special_token_ids": None, "eot_id": None, "token_dtype": "uint16-le",
        "shard_bytes": 4096, "dataset_name": "someone/wiki", "dataset_config": "raw",
        "provenance": {"source": "wikitext"}, "built": False, "reason": "disabled", "split_rule": "not built",
        "train_tokens": 0, "val_tokens": 0, "train_documents": 0, "val_documents": 0,
        "shards": {"train": [], "val": []},
    }  # fmt: skip
    assert {k: meta[k] for k in expected} == expected
    assert list_shards(out / "train") == list_shards(out / "val") == []


def reference_stream(texts, tok, budgets: dict, p: float, seed: int):
    """route_batch's rule written out document by document: (tokens per split, read, blank, documents)."""
    g = np.random.default_rng(seed)
    room = {s: float("inf") if b is None else b for s, b in budgets.items()}
    tokens, docs, seen, blank = {"train": [], "val": []}, {"train": 0, "val": 0}, 0, 0
    for text in texts:
        if room["train"] <= 0 and (room["val"] <= 0 or p == 0):
            break
        draw, ids = g.random(), ([] if is_blank(text) else tok.encode(text))
        seen += 1
        if not ids:
            blank += 1
            continue
        dest = "val" if draw < p and room["val"] > 0 else ("train" if room["train"] > 0 else None)
        if dest is not None:
            piece = [*ids, tok.eot_id]
            tokens[dest] += piece[: int(min(room[dest], len(piece)))]  # the crossing document is cut
            room[dest] -= len(piece)
            docs[dest] += 1
    return tokens, seen, blank, docs


@pytest.mark.parametrize(
    "train_budget, val_budget, p",
    [
        (None, None, 0.3),
        (150, 40, 0.3),
        (150, 0, 0.0),
        (150, 0, 0.5),  # val's budget is 0: its draws go to train
        (120, None, 0.0),  # p = 0: reading stops once train is full, though val has room
        (None, 25, 0.9),
        (0, 60, 0.5),
        (30, 30, 1.0),
    ],
)
def test_the_stream_rule_document_by_document(tmp_path, tiny_tokenizer, train_budget, val_budget, p):
    texts = [d for pair in itertools.zip_longest(tiny_corpus(40, seed=21), BLANK * 4) for d in pair if d is not None]
    want, seen, blank, docs = reference_stream(texts, tiny_tokenizer, {"train": train_budget, "val": val_budget}, p, 7)
    budgets = {"max_train_tokens": train_budget, "max_val_tokens": val_budget}
    meta = build_stream(texts, tmp_path, tiny_tokenizer, **budgets, val_doc_prob=p, check_empty=False)
    for split in ("train", "val"):
        assert split_tokens(tmp_path, split).tolist() == want[split], split
        assert meta[f"{split}_documents"] == docs[split]
    assert (meta["documents_seen"], meta["cleaning"]) == (seen, {"skipped_blank": blank})


@pytest.mark.parametrize("p", [-0.1, 1.5])
def test_val_doc_prob_outside_zero_one_is_refused(tmp_path, tiny_tokenizer, p):
    with pytest.raises(ValueError, match=rf"^val_doc_prob must be in \[0, 1\], got {p}$"):
        build_stream(tiny_corpus(3, seed=1), tmp_path, tiny_tokenizer, val_doc_prob=p)


@pytest.mark.parametrize(
    "kw, message",
    [
        ({"max_train_tokens": -1}, "max_train_tokens must be a non-negative int or None (unlimited), got -1"),
        ({"max_val_tokens": -3}, "max_val_tokens must be a non-negative int or None (unlimited), got -3"),
        ({"max_train_tokens": 1.5}, "max_train_tokens must be a non-negative int or None (unlimited), got 1.5"),
        ({"shard_bytes": 1}, "shard_bytes must be >= 2, got 1"),
    ],
)
def test_bad_budgets_and_shard_sizes_are_refused_before_anything_is_written(tmp_path, tiny_tokenizer, kw, message):
    with pytest.raises(ValueError) as err:
        build_stream(tiny_corpus(3, seed=1), tmp_path / "out", tiny_tokenizer, **kw)
    assert str(err.value) == message and not (tmp_path / "out").exists()


def test_the_smallest_shard_holds_one_token(tmp_path, tiny_tokenizer):
    budgets = {"max_train_tokens": 5, "max_val_tokens": 0}  # val empty on purpose: 3 documents may all draw train
    meta = build_stream(tiny_corpus(3, seed=1), tmp_path, tiny_tokenizer, shard_bytes=2, **budgets)
    assert [s["tokens"] for s in meta["shards"]["train"]] == [1] * 5 and len(list_shards(tmp_path / "train")) == 5


@pytest.mark.parametrize("num_threads", [1, 2])
def test_a_loaders_cleaning_counts_are_those_of_the_documents_used_whatever_the_read_ahead(
    tmp_path, tiny_tokenizer, num_threads
):
    # the workers read batches ahead; the budget fills long before the stream ends, so the books read
    # ahead and never written must not be counted as stripped (the counts would follow num_threads)
    start, end = "*** START OF THE PROJECT GUTENBERG EBOOK {} ***", "*** END OF THE PROJECT GUTENBERG EBOOK {} ***"
    books = [
        raw_gutenberg_book(f"Book {i}.\n\n" + "The river ran past the mill. " * (3 + i % 5), start, end)
        if i % 3
        else f"A clean book {i} with no markers at all."
        for i in range(120)
    ]
    path = write_parquet(tmp_path / "en.parquet", {"id": [str(i) for i in range(len(books))], "text": books})
    prov: dict = {}
    texts = iter_gutenberg(
        read=HubRead("manu/project_gutenberg", split="en", data_files={"en": str(path)}), provenance=prov
    )
    budgets = dict(max_train_tokens=300, max_val_tokens=0, val_doc_prob=0.0)
    meta = build_stream(texts, tmp_path / "out", tiny_tokenizer, provenance=prov, num_threads=num_threads, **budgets)
    used = [b.replace("\r\n", "\n").lstrip("\ufeff") for b in books[: meta["documents_seen"]]]
    stripped = [b for b in used if "*** START" in b]
    removed = sum(len(b) - len(strip_gutenberg_boilerplate(b)) for b in stripped)
    assert 0 < meta["documents_seen"] < len(books) // 2
    counts = {"boilerplate_books_stripped": len(stripped), "boilerplate_chars_removed": removed}
    assert meta["provenance"]["cleaning"] == counts
    assert {key: meta["cleaning"][key] for key in counts} == counts
