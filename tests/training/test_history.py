"""The read history of an epoch-mode MixedLoader: what steps A:B read (source, item, shard and token offsets,
text) and at which steps an item was read, from a replay, equal to the batches the loader yields."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from niels_gpt.training.history import Documents, main, reads, when_read, where
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


def test_when_read_finds_every_step_that_read_an_item(loader_caches):
    entry = reads(loader(loader_caches, "epoch"), 20, 21)[3]
    found = when_read(loader(loader_caches, "epoch"), entry["source"], entry["item"], 0, 60)
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
    assert {"step": 12, "row": 0, "item": lines[0]["item"]} in json.loads(capsys.readouterr().out)["read"]


def test_the_windows_of_a_document_are_those_holding_its_tokens(loader_caches, tiny_tokenizer):
    source = loader(loader_caches, "epoch").sources["wikitext"]
    documents = Documents(source, tiny_tokenizer.eot_id)
    spans = [where(source, item, documents)["documents"] for item in range(len(source))]
    for document in (0, 3, 7):
        plain = [item for item, (a, b) in enumerate(spans) if a <= document <= b]  # a plain scan
        assert list(documents.windows(source, document)) == plain and plain
    with pytest.raises(ValueError, match="is not in this split"):
        documents.windows(source, 10**6)


def test_the_command_finds_a_document(loader_caches, tiny_tokenizer, capsys):
    common = ["pretrain", str(loader_caches), "--p", json.dumps(RAMP), "--T", "64", "--B", "8", "--seed", "7"]
    main([*common, "--steps", "0:60", "--find-document", "wikitext:3", "--tokenizer", tiny_tokenizer.model_path])
    found = json.loads(capsys.readouterr().out)
    assert (
        found["document"] == 3
        and found["read"]
        and all(found["items"][0] <= r["item"] < found["items"][1] for r in found["read"])
    )
