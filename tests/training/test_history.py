"""The read history of a MixedLoader (both modes): what steps A:B read (source, item, shard and token offsets,
text) and at which steps an item, a document or a text was read, from a replay, equal to the batches the loader
yields; the ledger's digests per step."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from niels_gpt.training.history import (
    Documents,
    digests,
    find_text,
    main,
    occurrences,
    reads,
    when_read,
    when_spans_read,
    where,
)
from niels_gpt.training.loader import MixedLoader
from tests.training.test_schedule import RAMP, loader


def test_reads_name_the_rows_the_batches_hold(loader_caches, tiny_tokenizer):
    mixed = loader(loader_caches, "epoch", rank=1, world_size=2)
    batches = [next(mixed) for _ in range(16)]
    entries = reads(loader(loader_caches, "epoch", rank=1, world_size=2), 12, 16, tokenizer=tiny_tokenizer)
    assert [(e["step"], e["row"]) for e in entries] == [(s, r) for s in range(12, 16) for r in range(8)]
    for e in entries:
        batch, source = batches[e["step"]], mixed.sources[e["source"]]
        assert mixed.names[int(batch.source[e["row"]])] == e["source"]
        assert torch.equal(batch.x[e["row"]], torch.from_numpy(source.rows(np.array([e["item"]]))[0][0]))
        shard = source.shard_paths.index(source.shards_dir / e["shard"])
        start, end = e["tokens"]
        assert batch.x[e["row"]].tolist() == np.asarray(source.maps[shard][start:end]).astype(np.int64).tolist()
        assert e["text"] == tiny_tokenizer.decode(batch.x[e["row"]].tolist())
        tokens = np.concatenate([np.asarray(m) for m in source.maps[:shard]] + [np.asarray(source.maps[shard][:start])])
        first_doc = int((tokens == tiny_tokenizer.eot_id).sum())  # eots before the window, counted plainly
        inside = int((np.asarray(source.maps[shard][start:end]) == tiny_tokenizer.eot_id).sum())
        assert e["documents"] == [first_doc, first_doc + inside]


def short(entry: dict) -> dict:
    return {key: entry[key] for key in ("step", "row", "item")}


def test_when_read_finds_every_step_that_read_an_item(loader_caches):
    entry = reads(loader(loader_caches, "epoch"), 20, 21)[3]
    found = [short(e) for e in when_read(loader(loader_caches, "epoch"), entry["source"], entry["item"], 0, 60)]
    assert {"step": 20, "row": 3, "item": entry["item"]} in found
    every = reads(loader(loader_caches, "epoch"), 0, 60)
    want = [
        {"step": e["step"], "row": e["row"], "item": e["item"]}
        for e in every
        if (e["source"], e["item"]) == (entry["source"], entry["item"])
    ]
    assert found == want and len(found) >= 2  # read once per epoch of its source


def test_the_command_prints_json_lines(loader_caches, capsys):
    common = ["pretrain", str(loader_caches), "--p", json.dumps(RAMP), "--T", "64", "--B", "8", "--seed", "7"]
    main([*common, "--steps", "12:14"])
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(lines) == 16 and lines[0]["step"] == 12 and {"source", "item", "shard", "tokens"} <= set(lines[0])
    main([*common, "--steps", "0:40", "--find", f"{lines[0]['source']}:{lines[0]['item']}"])
    assert {"step": 12, "row": 0, "item": lines[0]["item"]} in map(short, json.loads(capsys.readouterr().out)["read"])


def test_the_windows_of_a_document_are_those_holding_its_tokens(loader_caches, tiny_tokenizer):
    source = loader(loader_caches, "epoch").sources["wikitext"]
    documents = Documents(source, tiny_tokenizer.eot_id)
    spans = [where(source, item, documents)["documents"] for item in range(len(source))]
    crossing = [d for d in range(documents.count) if len(documents.spans(d)) > 1]
    assert crossing  # documents that begin in one shard and end in the next
    for document in range(documents.count):
        plain = [item for item, (a, b) in enumerate(spans) if a <= document <= b]  # a plain scan
        assert list(documents.windows(source, document)) == plain
    with pytest.raises(ValueError, match="is not in this split"):
        documents.windows(source, 10**6)


def test_the_spans_of_a_document_are_its_tokens_up_to_its_eot(loader_caches, tiny_tokenizer):
    source = loader(loader_caches, "epoch").sources["wikitext"]
    documents, eot = Documents(source, tiny_tokenizer.eot_id), tiny_tokenizer.eot_id
    flat = np.concatenate([np.asarray(m) for m in source.maps])
    starts = np.cumsum([0, *(len(m) for m in source.maps)])
    bounds = np.flatnonzero(flat == eot)
    for document in range(documents.count):
        first = int(bounds[document - 1]) + 1 if document else 0
        last = int(bounds[document]) if document < len(bounds) else len(flat) - 1
        joined = [int(starts[s]) + t for s, a, b in documents.spans(document) for t in range(a, b + 1)]
        assert joined == list(range(first, last + 1))


@pytest.mark.parametrize("rank, world_size", [(0, 1), (1, 2)])
def test_random_mode_reads_name_the_rows_the_batches_hold(loader_caches, tiny_tokenizer, rank, world_size):
    mixed = loader(loader_caches, "random", rank=rank, world_size=world_size)
    batches = [next(mixed) for _ in range(16)]
    entries = reads(loader(loader_caches, "random", rank=rank, world_size=world_size), 12, 16, tokenizer=tiny_tokenizer)
    assert [(e["step"], e["row"]) for e in entries] == [(s, r) for s in range(12, 16) for r in range(8)]
    for e in entries:
        batch, source = batches[e["step"]], mixed.sources[e["source"]]
        assert mixed.names[int(batch.source[e["row"]])] == e["source"] and "item" not in e
        shard = source.shard_paths.index(source.shards_dir / e["shard"])
        start, end = e["tokens"]
        assert batch.x[e["row"]].tolist() == np.asarray(source.maps[shard][start:end]).astype(np.int64).tolist()
        assert e["text"] == tiny_tokenizer.decode(batch.x[e["row"]].tolist())


@pytest.mark.parametrize("mode", ["random", "epoch"])
def test_the_rows_that_read_a_document_are_found_in_both_modes(loader_caches, tiny_tokenizer, mode):
    mixed = loader(loader_caches, mode)
    source = mixed.sources["wikitext"]
    documents = Documents(source, tiny_tokenizer.eot_id)
    every = reads(mixed, 0, 40, tokenizer=tiny_tokenizer)
    document = next(d for d in range(documents.count) if len(documents.spans(d)) > 1)  # in two shards
    plain = [
        (e["step"], e["row"])
        for e in every
        if e["source"] == "wikitext" and e["documents"][0] <= document <= e["documents"][1]
    ]
    found = when_spans_read(mixed, "wikitext", documents.spans(document), 0, 40)
    assert [(e["step"], e["row"]) for e in found] == plain and plain
    shards = {e["shard"] for e in every if (e["step"], e["row"]) in set(plain)}
    assert len(shards) == 2  # both parts were read: the one in the earlier shard too


def test_random_mode_finds_the_rows_holding_an_items_tokens(loader_caches, tiny_tokenizer):
    mixed = loader(loader_caches, "random")
    source = mixed.sources["gutenberg"]
    every = [e for e in reads(mixed, 0, 30) if e["source"] == "gutenberg"]
    e = every[0]
    item = next(
        i
        for i in range(len(source))
        if where(source, i)["shard"] == e["shard"]
        and where(source, i)["tokens"][0] <= e["tokens"][0] <= where(source, i)["tokens"][1]
    )
    lo, hi = where(source, item)["tokens"]
    want = [
        (x["step"], x["row"])
        for x in every
        if x["shard"] == e["shard"] and x["tokens"][0] <= hi and x["tokens"][1] >= lo
    ]
    found = when_read(mixed, "gutenberg", item, 0, 30)
    assert [(x["step"], x["row"]) for x in found] == want and (e["step"], e["row"]) in want


def test_a_text_is_found_in_the_documents_that_hold_it(loader_caches, tiny_tokenizer):
    mixed = loader(loader_caches, "random")
    source = mixed.sources["wikitext"]
    documents = Documents(source, tiny_tokenizer.eot_id)
    document = next(d for d in range(documents.count) if len(documents.spans(d)) > 1)
    tokens = np.concatenate([np.asarray(source.maps[s][a : b + 1]) for s, a, b in documents.spans(document)])
    text = tiny_tokenizer.decode(tokens[:-1].astype(np.int64).tolist())  # the document without its eot
    assert occurrences(source, tiny_tokenizer.encode(text))  # it runs from one shard into the next
    found = find_text(mixed, "wikitext", text, tiny_tokenizer, 0, 40)
    assert [d["document"] for d in found["documents"]] == [document]
    assert found["documents"][0]["read"] == when_spans_read(mixed, "wikitext", documents.spans(document), 0, 40)
    assert found["documents"][0]["read"]
    assert find_text(mixed, "wikitext", "zebra " * 9, tiny_tokenizer, 0, 40)["documents"] == []


def test_occurrences_are_found_within_and_across_shards():
    class Split:
        maps = [np.array([5, 1, 2, 3, 1], dtype=np.uint16), np.array([2, 9, 1, 2, 3], dtype=np.uint16)]

    assert occurrences(Split, [1, 2]) == [(0, 1), (0, 4), (1, 2)]
    assert occurrences(Split, [3, 1, 2, 9]) == [(0, 3)]
    with pytest.raises(ValueError, match="encodes to no token"):
        occurrences(Split, [])


@pytest.mark.parametrize("mode", ["random", "epoch"])
def test_the_digests_per_step_end_at_the_ledgers_marks(loader_caches, mode):
    mixed = loader(loader_caches, mode)
    for _ in range(N_STEPS):
        next(mixed)
    marks = mixed.state_dict()["ledger"]["marks"]
    listed = dict(digests(loader(loader_caches, mode), 0, N_STEPS))
    assert sorted(listed) == list(range(1, N_STEPS + 1))
    assert {str(n): listed[n] for n in map(int, marks)} == marks
    assert dict(digests(loader(loader_caches, mode), 5, 9)) == {n: listed[n] for n in range(6, 10)}


N_STEPS = 11


def test_the_command_finds_a_document(loader_caches, tiny_tokenizer, capsys):
    common = ["pretrain", str(loader_caches), "--p", json.dumps(RAMP), "--T", "64", "--B", "8", "--seed", "7"]
    main([*common, "--steps", "0:60", "--find-document", "wikitext:3", "--tokenizer", tiny_tokenizer.model_path])
    found = json.loads(capsys.readouterr().out)
    assert (
        found["document"] == 3
        and found["read"]
        and all(found["items"][0] <= r["item"] < found["items"][1] for r in found["read"])
    )


def test_the_command_finds_a_text_in_random_mode(loader_caches, tiny_tokenizer, capsys):
    common = ["pretrain", str(loader_caches), "--p", json.dumps(RAMP), "--T", "64", "--B", "8", "--seed", "7"]
    source = loader(loader_caches, "random").sources["wikitext"]
    window = np.asarray(source.maps[0][:40]).astype(np.int64).tolist()
    text = tiny_tokenizer.decode(window[: window.index(tiny_tokenizer.eot_id)][:12])  # the start of document 0
    tok = ["--tokenizer", tiny_tokenizer.model_path, "--mode", "random", "--steps", "0:40"]
    main([*common, *tok, "--find-text", text, "--source", "wikitext"])
    found = json.loads(capsys.readouterr().out)
    assert found["documents"][0]["document"] == 0 and found["documents"][0]["at"][0] == ["shard_00000.bin", 0]
    main([*common, *tok, "--find-document", "wikitext:0"])
    assert json.loads(capsys.readouterr().out)["read"] == found["documents"][0]["read"]
    main([*common, *tok, "--digests"])
    assert len(capsys.readouterr().out.splitlines()) == 40


def test_random_mode_sft_reads_and_finds_examples(loader_caches):
    p = {"oasst1": 0.5, "dolly15k": 0.5}
    mixed = MixedLoader.sft(loader_caches, p=p, T=64, B=8, seed=3, mode="random")
    batches = [next(mixed) for _ in range(10)]
    again = MixedLoader.sft(loader_caches, p=p, T=64, B=8, seed=3, mode="random")
    entries = reads(again, 0, 10)
    for e in entries:
        row = mixed.sources[e["source"]].rows(np.array([e["item"]]))
        assert torch.equal(batches[e["step"]].x[e["row"]], torch.from_numpy(row[0][0]))
    e = entries[5]
    found = when_read(again, e["source"], e["item"], 0, 10)
    want = [short(x) for x in entries if (x["source"], x["item"]) == (e["source"], e["item"])]
    assert found == want and short(e) in found


@pytest.mark.parametrize(
    "args, message",
    [
        (["--find-document", "wikitext:999999"], "document 999,999 is not in this split"),
        (["--find-document", "wikitext:x"], "wants SOURCE:D with D a document number"),
        (["--find", "nowhere:3"], "source 'nowhere' is not one of this loader's"),
        (["--find-text", "the", "--source", "nowhere"], "source 'nowhere' is not one of this loader's"),
    ],
)
def test_the_command_refuses_what_the_cache_does_not_hold_in_one_line(
    loader_caches, tiny_tokenizer, capsys, args, message
):
    common = ["pretrain", str(loader_caches), "--p", json.dumps(RAMP), "--T", "64", "--B", "8", "--seed", "7"]
    with pytest.raises(SystemExit):
        main([*common, "--steps", "0:4", "--tokenizer", tiny_tokenizer.model_path, *args])
    assert message in capsys.readouterr().err


def test_the_command_needs_a_tokenizer_for_documents(loader_caches, capsys):
    common = ["pretrain", str(loader_caches), "--p", json.dumps(RAMP), "--T", "64", "--B", "8", "--seed", "7"]
    with pytest.raises(SystemExit):
        main([*common, "--steps", "0:4", "--find-document", "wikitext:1"])
    assert "tokenizer/spm.model: no tokenizer model there" in capsys.readouterr().err


def test_digests_against_a_listing_name_the_exact_batch_where_histories_part(
    loader_caches, tmp_path, monkeypatch, capsys
):
    """A changed mixer: the ledger names a range of batches; the saving side's --digests listing, compared batch by
    batch, names the first batch whose rows differ (found here by comparing the rows themselves)."""
    from niels_gpt.training import round_robin
    from tests.training.test_ledger import round_robin_spread

    common = ["pretrain", str(loader_caches), "--p", json.dumps(RAMP), "--T", "64", "--B", "8", "--seed", "7"]
    listing = tmp_path / "saved.jsonl"
    lines = [json.dumps({"batches": n, "digest": d}) for n, d in digests(loader(loader_caches, "epoch"), 0, 12)]
    listing.write_text("\n".join(lines) + "\n")
    before = [(e["step"], e["source"], e["item"]) for e in reads(loader(loader_caches, "epoch"), 0, 12)]
    monkeypatch.setattr(round_robin, "spread", lambda counts: round_robin_spread(counts)[::-1].copy())
    after = [(e["step"], e["source"], e["item"]) for e in reads(loader(loader_caches, "epoch"), 0, 12)]
    first = next(b[0] for b, a in zip(before, after) if b != a)
    main([*common, "--steps", "0:12", "--digests", "--against", str(listing)])
    found = json.loads(capsys.readouterr().out)
    assert found["batch"] == first and found["listed"] == json.loads(lines[first])["digest"]
    listing.write_text("not json\n")
    with pytest.raises(SystemExit):
        main([*common, "--steps", "0:12", "--digests", "--against", str(listing)])
    assert "saved.jsonl, line 1: not a --digests line" in capsys.readouterr().err
