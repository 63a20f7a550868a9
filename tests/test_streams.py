"""Acceptance: `build_sources` returns the wiki, roam and primer streams of both splits, writes a .bin
and a .meta.json per stream, and a second call with the same inputs loads them from the cache (a
modified input file rebuilds its stream). The rest of the stage: tests/streams/."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from niels_gpt.streams import build_sources, build_sources_from_docs, stream_paths
from tests.support.streams import WIKI, stamps, write_stream_inputs


@pytest.fixture
def inputs(tmp_path):
    return write_stream_inputs(tmp_path)


def test_build_sources_returns_every_stream_and_writes_cache(inputs):
    train, val = build_sources_from_docs(inputs, wiki_docs=WIKI)
    assert sorted(train) == sorted(val) == ["primer", "roam", "wiki"]
    assert train["wiki"] == "\n\n".join(WIKI["train"]).encode()
    assert val["wiki"] == "\n\n".join(WIKI["val"]).encode()
    assert train["roam"].count(b"# Note") == 9 and val["roam"].count(b"# Note") == 1
    assert train["primer"].count(b"assistant:") == 9 and val["primer"].count(b"assistant:") == 1
    for source in ("wiki", "roam", "primer"):
        for split, data in (("train", train[source]), ("val", val[source])):
            bin_path, meta_path = stream_paths(inputs.cache_dir, source, split)
            assert Path(bin_path).read_bytes() == data
            meta = json.loads(Path(meta_path).read_text())
            assert meta["source"] == source and meta["split"] == split and meta["n_bytes"] == len(data)
    wiki_meta = json.loads(Path(stream_paths(inputs.cache_dir, "wiki", "train")[1]).read_text())
    assert {k: wiki_meta[k] for k in ("n_docs", "total_chars", "sep")} == {
        "n_docs": 40,
        "total_chars": sum(map(len, WIKI["train"])),
        "sep": "\n\n",
    }
    roam_meta = json.loads(Path(stream_paths(inputs.cache_dir, "roam", "val")[1]).read_text())
    assert [sorted(f) for f in roam_meta["files"]] == [["mtime_ns", "path", "size"]] and roam_meta["sep"] == "\n\n"
    primer_meta = json.loads(Path(stream_paths(inputs.cache_dir, "primer", "train")[1]).read_text())
    assert primer_meta["path"] == inputs.primer_path and primer_meta["delimiter"] == "\n\n<dialogue>\n\n"
    assert {"mtime_ns", "size"} <= set(primer_meta)


def test_build_sources_loads_wikitext_through_the_loader(inputs, monkeypatch):
    import niels_gpt.data.wikitext as wikitext

    monkeypatch.setattr(wikitext, "load_wikitext", lambda: WIKI)
    train, _ = build_sources(inputs)
    assert train["wiki"] == "\n\n".join(WIKI["train"]).encode()


def test_second_call_loads_the_cache_without_rewriting(inputs):
    first = build_sources_from_docs(inputs, wiki_docs=WIKI)
    before = stamps(inputs.cache_dir)
    assert len(before) == 6
    second = build_sources_from_docs(inputs, wiki_docs=WIKI)
    assert second == first
    assert stamps(inputs.cache_dir) == before


def test_editing_a_roam_note_rebuilds_only_its_roam_stream(inputs):
    train, val = build_sources_from_docs(inputs, wiki_docs=WIKI)
    before = stamps(inputs.cache_dir)
    note = next(p for p in Path(inputs.roam_root).rglob("*.md") if p.read_bytes() in train["roam"])
    note.write_text(note.read_text() + "an edit\n", encoding="utf-8")
    train2, val2 = build_sources_from_docs(inputs, wiki_docs=WIKI)
    after = stamps(inputs.cache_dir)
    changed = {name for name in before if before[name] != after[name]}
    assert changed == {"roam_train.bin"}
    assert b"an edit" in train2["roam"] and val2 == val
