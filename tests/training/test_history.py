"""The read history of an epoch-mode MixedLoader: what steps A:B read (source, item, shard and token offsets,
text) and at which steps an item was read, from a replay, equal to the batches the loader yields."""

from __future__ import annotations

import json

import numpy as np
import torch

from niels_gpt.training.history import main, reads, when_read
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
    assert {"step": 20, "row": 3} in found
    every = reads(loader(loader_caches, "epoch"), 0, 60)
    want = [
        {"step": e["step"], "row": e["row"]}
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
    assert {"step": 12, "row": 0} in json.loads(capsys.readouterr().out)["read"]
