"""streams/sources.py: `build_sources` / `build_streams`, the one build path: reuse of current streams
and rebuilds of changed ones, gating, the length guard, "not built" records."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

from niels_gpt.batching import load_stream_cache
from niels_gpt.meta import is_built, read_meta
from niels_gpt.streams import build_sources_from_docs, build_streams, build_wiki_stream, stream_paths
from tests.support.streams import WIKI, stamps


def test_touching_a_roam_note_rebuilds_roam_only(inputs):
    build_sources_from_docs(inputs, wiki_docs=WIKI)
    before = stamps(inputs.cache_dir)
    for note in Path(inputs.roam_root).rglob("*.md"):
        os.utime(note, ns=(1_000_000_000, 1_000_000_000))
    build_sources_from_docs(inputs, wiki_docs=WIKI)
    after = stamps(inputs.cache_dir)
    assert {name for name in before if before[name] != after[name]} == {"roam_train.bin", "roam_val.bin"}


def test_changed_inputs_rebuild_their_streams(inputs):
    build_sources_from_docs(inputs, wiki_docs=WIKI)
    before = stamps(inputs.cache_dir)
    more_wiki = {**WIKI, "val": WIKI["val"] + ["one more line"]}
    build_sources_from_docs(inputs, wiki_docs=more_wiki)
    assert {n for n, s in stamps(inputs.cache_dir).items() if before[n] != s} == {"wiki_val.bin"}
    before = stamps(inputs.cache_dir)
    # a new seed moves dialogues and files between the splits
    train, val = build_sources_from_docs(replace(inputs, seed=7), wiki_docs=more_wiki)
    rebuilt = {n for n, s in stamps(inputs.cache_dir).items() if before[n] != s}
    assert {"primer_train.bin", "primer_val.bin"} <= rebuilt and not rebuilt & {"wiki_train.bin", "wiki_val.bin"}
    assert val["primer"] == Path(stream_paths(inputs.cache_dir, "primer", "val")[0]).read_bytes()


def test_truncated_bin_is_rebuilt(inputs):
    train, _ = build_sources_from_docs(inputs, wiki_docs=WIKI)
    bin_path = stream_paths(inputs.cache_dir, "wiki", "train")[0]
    Path(bin_path).write_bytes(train["wiki"][:10])
    train2, _ = build_sources_from_docs(inputs, wiki_docs=WIKI)
    assert train2["wiki"] == train["wiki"] == Path(bin_path).read_bytes()


def test_force_rebuild_rewrites_every_stream_identically(inputs):
    build_sources_from_docs(inputs, wiki_docs=WIKI)
    before = stamps(inputs.cache_dir)
    contents = {p.name: p.read_bytes() for p in Path(inputs.cache_dir).iterdir()}
    build_sources_from_docs(replace(inputs, force_rebuild=True), wiki_docs=WIKI)
    after = stamps(inputs.cache_dir)
    assert all(before[n] != after[n] for n in before)
    assert {p.name: p.read_bytes() for p in Path(inputs.cache_dir).iterdir()} == contents


def test_build_streams_says_which_streams_were_reused(inputs):
    first = build_streams(inputs, wiki_docs=WIKI)
    assert not any(s.reused for s in first.values()) and len(first) == 6
    second = build_streams(inputs, wiki_docs=WIKI)
    assert all(s.reused for s in second.values())
    assert {k: (s.data, s.meta) for k, s in second.items()} == {k: (s.data, s.meta) for k, s in first.items()}


def test_length_guard_lists_every_short_stream_and_writes_nothing(inputs):
    T = len(build_wiki_stream(WIKI["train"], sep="\n\n")) - 1  # wiki train just long enough, the rest not
    cfg = replace(inputs, T=T)
    with pytest.raises(ValueError) as e:
        build_sources_from_docs(cfg, wiki_docs=WIKI)
    msg = str(e.value)
    for name in ("wiki val", "roam train", "roam val", "primer train", "primer val"):
        assert name in msg
    assert "wiki train" not in msg and f"{T + 1:,} bytes" in msg
    assert not Path(inputs.cache_dir).exists()


def test_required_sources_must_be_enabled(inputs):
    with pytest.raises(ValueError, match=r"required_sources \['primer'\] are not in enabled_sources"):
        build_sources_from_docs(replace(inputs, enabled_sources=("wiki", "roam")), wiki_docs=WIKI)
    with pytest.raises(ValueError, match="unknown stream sources"):
        build_sources_from_docs(replace(inputs, enabled_sources=("wiki", "books")), wiki_docs=WIKI)


def test_only_enabled_sources_are_built(inputs, tmp_path):
    cfg = replace(inputs, roam_root=str(tmp_path / "nowhere"), enabled_sources=("wiki",), required_sources=("wiki",))
    train, val = build_sources_from_docs(cfg, wiki_docs=WIKI)
    assert list(train) == list(val) == ["wiki"]
    assert sorted(p.name for p in Path(inputs.cache_dir).glob("*.bin")) == ["wiki_train.bin", "wiki_val.bin"]


def test_missing_required_source_raises_and_optional_one_is_left_out(inputs, tmp_path):
    missing = replace(inputs, roam_root=str(tmp_path / "nowhere"))
    with pytest.raises(FileNotFoundError, match="nowhere"):
        build_sources_from_docs(missing, wiki_docs=WIKI)
    train, val = build_sources_from_docs(replace(missing, required_sources=("wiki", "primer")), wiki_docs=WIKI)
    assert sorted(train) == sorted(val) == ["primer", "wiki"]


def test_empty_required_split_raises(inputs):
    Path(inputs.primer_path).write_text("user: the only dialogue, long enough for T\nassistant: yes", encoding="utf-8")
    with pytest.raises(ValueError, match=r"primer val: 0 bytes \(empty, and the source is required\)"):
        build_sources_from_docs(inputs, wiki_docs=WIKI)
    train, val = build_sources_from_docs(replace(inputs, required_sources=("wiki", "roam")), wiki_docs=WIKI)
    assert "primer" not in train and "primer" not in val


def test_a_source_left_out_gets_a_not_built_record_over_its_old_stream(inputs, tmp_path):
    build_sources_from_docs(inputs, wiki_docs=WIKI)
    assert sorted(load_stream_cache(inputs.cache_dir, "train")) == ["primer", "roam", "wiki"]
    gone = replace(inputs, roam_root=str(tmp_path / "nowhere"), required_sources=("wiki", "primer"))
    build_sources_from_docs(gone, wiki_docs=WIKI)
    for split in ("train", "val"):
        bin_path, meta_path = stream_paths(inputs.cache_dir, "roam", split)
        meta = read_meta(meta_path)
        assert not is_built(meta) and "has no input" in meta["reason"] and "nowhere" in meta["reason"]
        assert Path(bin_path).read_bytes() == b""
    assert sorted(load_stream_cache(inputs.cache_dir, "train")) == ["primer", "wiki"]  # the old roam stream is gone


@pytest.mark.parametrize(
    ("train_line", "accepted"),
    [
        ("a" * 16, False),  # exactly T = 16 bytes: one byte short of a window and its target
        ("a" * 17, True),  # T + 1 bytes: the shortest stream a batch can be cut from
        ("ü" * 8, False),  # 8 characters, 16 bytes: the check counts bytes
        ("ü" * 8 + "a", True),  # 17 bytes
    ],
    ids=["T bytes", "T+1 bytes", "T bytes in 8 characters", "T+1 bytes in 9 characters"],
)
def test_a_stream_needs_exactly_T_plus_1_bytes(inputs, train_line, accepted):
    """The T+1 rule at its boundary, through the build: T = 16, a wiki train stream of one line."""
    cfg = replace(inputs, T=16, enabled_sources=("wiki",), required_sources=("wiki",))
    docs = {"train": [train_line], "val": ["a stone bridge crosses the river"]}
    if accepted:
        train, _ = build_sources_from_docs(cfg, wiki_docs=docs)
        assert train["wiki"] == train_line.encode("utf-8") and len(train["wiki"]) == 17
        return
    with pytest.raises(ValueError) as e:
        build_sources_from_docs(cfg, wiki_docs=docs)
    assert str(e.value).splitlines()[:2] == ["byte streams shorter than T+1 = 17 bytes:", "  - wiki train: 16 bytes"]
    assert not Path(inputs.cache_dir).exists()  # nothing written, not even the val stream that was long enough


def test_a_failed_publish_keeps_what_was_published_and_removes_the_rest(inputs, monkeypatch):
    """A stream that cannot be renamed into place stops the build: the streams published before it stay
    whole (meta.json and .bin), the others leave neither a meta.json nor a staged file."""
    from niels_gpt.atomic import StagedFile

    commit = StagedFile.commit

    def fail_on_roam(self):
        if self.path.name.startswith("roam_"):
            raise OSError("disk full")
        return commit(self)

    monkeypatch.setattr(StagedFile, "commit", fail_on_roam)
    with pytest.raises(OSError, match="disk full"):
        build_sources_from_docs(inputs, wiki_docs=WIKI)
    assert sorted(p.name for p in Path(inputs.cache_dir).iterdir()) == [
        "wiki_train.bin",
        "wiki_train.meta.json",
        "wiki_val.bin",
        "wiki_val.meta.json",
    ]
    assert sorted(load_stream_cache(inputs.cache_dir, "train")) == ["wiki"]
