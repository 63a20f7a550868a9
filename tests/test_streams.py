"""Byte streams: building, meta-based cache reuse and invalidation, gating, length guard, CLI."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest

from niels_gpt.config import deep_merge, prepare_config
from niels_gpt.streams import (
    StreamBuildConfig,
    build_primer_stream,
    build_roam_stream,
    build_sources,
    build_sources_from_docs,
    build_stream_from_config,
    build_wiki_stream,
    stream_paths,
)
from tests.support.hub_files import write_demo_tree

DELIM = "\n\n<dialogue>\n\n"
WIKI = {
    "train": [" = Alpha = ", " The river runs north past the old mill ."] * 20,
    "val": [" = Beta = ", " A stone bridge crosses it ."] * 10,
    "test": ["unused"],
}


@pytest.fixture
def inputs(tmp_path):
    """Ten roam notes and a primer with ten dialogues, in a temp dir; returns the StreamBuildConfig."""
    root = tmp_path / "roam"
    for i in range(10):
        note = root / ("daily" if i % 2 else "") / f"note{i}.md"
        note.parent.mkdir(parents=True, exist_ok=True)
        note.write_text(f"# Note {i}\n\n- point {i} with some text in it\n", encoding="utf-8")
    primer = tmp_path / "primer.txt"
    primer.write_text(DELIM.join(f"user: question {i}?\nassistant: answer {i}." for i in range(10)), encoding="utf-8")
    return StreamBuildConfig(
        roam_root=str(root), primer_path=str(primer), cache_dir=str(tmp_path / "cache"), seed=42, T=16
    )


def stamps(cache_dir) -> dict[str, tuple[int, int]]:
    """(inode, mtime_ns) of every .bin: an atomic rewrite changes the inode."""
    return {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in sorted(Path(cache_dir).glob("*.bin"))}


def test_stream_builders_encode_utf8_and_join():
    assert build_wiki_stream(["a", "ü"], sep="\n\n") == "a\n\nü".encode()
    assert build_roam_stream(["x"], sep="|") == b"x"
    assert build_primer_stream("user: hi\n\n<dialogue>\n\n") == b"user: hi\n\n<dialogue>\n\n"


def test_blank_documents_are_left_out_and_counted(inputs):
    root = Path(inputs.roam_root)
    for i, blank in enumerate(["", "   \n", "\ufeff\r\n\t\r\n"]):  # blank once normalized (BOM, CRLF)
        (root / f"empty{i}.md").write_bytes(blank.encode())
    primer = Path(inputs.primer_path)
    primer.write_text(DELIM + "  " + DELIM + primer.read_text(encoding="utf-8") + DELIM, encoding="utf-8")
    cfg = dataclasses.replace(inputs, roam_val_frac=0.3)
    train, val = build_sources_from_docs(cfg, wiki_docs={**WIKI, "train": ["  ", *WIKI["train"], "\n"]})
    assert train["wiki"] == "\n\n".join(WIKI["train"]).encode()
    for source, sep in (("roam", "\n\n"), ("primer", DELIM), ("wiki", "\n\n")):
        for data in (train[source], val[source]):
            assert all(part.strip() for part in data.decode().split(sep))  # a separator never next to nothing
    metas = {
        (source, split): json.loads(Path(stream_paths(inputs.cache_dir, source, split)[1]).read_text())
        for source in ("wiki", "roam", "primer")
        for split in ("train", "val")
    }
    assert sum(m["skipped_blank"] for (s, _), m in metas.items() if s == "roam") == 3
    assert (metas[("primer", "train")]["skipped_blank"], metas[("primer", "val")]["skipped_blank"]) == (3, 0)
    assert (metas[("wiki", "train")]["skipped_blank"], metas[("wiki", "val")]["skipped_blank"]) == (2, 0)


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
    assert primer_meta["path"] == inputs.primer_path and primer_meta["delimiter"] == DELIM
    assert {"mtime_ns", "size"} <= set(primer_meta)


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


def test_touching_a_roam_note_rebuilds_roam_only(inputs):
    build_sources_from_docs(inputs, wiki_docs=WIKI)
    before = stamps(inputs.cache_dir)
    for note in Path(inputs.roam_root).rglob("*.md"):
        os.utime(note, ns=(1_000_000_000, 1_000_000_000))
    build_sources_from_docs(inputs, wiki_docs=WIKI)
    after = stamps(inputs.cache_dir)
    assert {name for name in before if before[name] != after[name]} == {"roam_train.bin", "roam_val.bin"}


def test_changed_inputs_rebuild_their_streams(inputs):
    from dataclasses import replace

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
    from dataclasses import replace

    build_sources_from_docs(inputs, wiki_docs=WIKI)
    before = stamps(inputs.cache_dir)
    contents = {p.name: p.read_bytes() for p in Path(inputs.cache_dir).iterdir()}
    build_sources_from_docs(replace(inputs, force_rebuild=True), wiki_docs=WIKI)
    after = stamps(inputs.cache_dir)
    assert all(before[n] != after[n] for n in before)
    assert {p.name: p.read_bytes() for p in Path(inputs.cache_dir).iterdir()} == contents


def test_length_guard_lists_every_short_stream_and_writes_nothing(inputs):
    from dataclasses import replace

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
    from dataclasses import replace

    with pytest.raises(ValueError, match=r"required_sources \['primer'\] are not in enabled_sources"):
        build_sources_from_docs(replace(inputs, enabled_sources=("wiki", "roam")), wiki_docs=WIKI)
    with pytest.raises(ValueError, match="unknown stream sources"):
        build_sources_from_docs(replace(inputs, enabled_sources=("wiki", "books")), wiki_docs=WIKI)


def test_only_enabled_sources_are_built(inputs, tmp_path):
    from dataclasses import replace

    cfg = replace(inputs, roam_root=str(tmp_path / "nowhere"), enabled_sources=("wiki",), required_sources=("wiki",))
    train, val = build_sources_from_docs(cfg, wiki_docs=WIKI)
    assert list(train) == list(val) == ["wiki"]
    assert sorted(p.name for p in Path(inputs.cache_dir).glob("*.bin")) == ["wiki_train.bin", "wiki_val.bin"]


def test_missing_required_source_raises_and_optional_one_is_left_out(inputs, tmp_path):
    from dataclasses import replace

    missing = replace(inputs, roam_root=str(tmp_path / "nowhere"))
    with pytest.raises(FileNotFoundError, match="nowhere"):
        build_sources_from_docs(missing, wiki_docs=WIKI)
    train, val = build_sources_from_docs(replace(missing, required_sources=("wiki", "primer")), wiki_docs=WIKI)
    assert sorted(train) == sorted(val) == ["primer", "wiki"]


def test_empty_required_split_raises(inputs):
    from dataclasses import replace

    Path(inputs.primer_path).write_text("user: the only dialogue, long enough for T\nassistant: yes", encoding="utf-8")
    with pytest.raises(ValueError, match=r"primer val: 0 bytes \(empty, and the source is required\)"):
        build_sources_from_docs(inputs, wiki_docs=WIKI)
    train, val = build_sources_from_docs(replace(inputs, required_sources=("wiki", "roam")), wiki_docs=WIKI)
    assert "primer" not in train and "primer" not in val


def test_build_sources_loads_wikitext_through_the_loader(inputs, monkeypatch):
    import niels_gpt.data.wikitext as wikitext

    monkeypatch.setattr(wikitext, "load_wikitext", lambda: WIKI)
    train, _ = build_sources(inputs)
    assert train["wiki"] == "\n\n".join(WIKI["train"]).encode()


# ---- config-driven entry point (Snakemake rule, build-all) ----


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    root = tmp_path_factory.mktemp("demo")
    return prepare_config(deep_merge(write_demo_tree(root), {"streams": {"T": 8}, "cache_dir": str(root / "cache")}))


@pytest.mark.usefixtures("isolated_hf_cache")
@pytest.mark.parametrize("source", ["wiki", "roam", "primer"])
def test_build_stream_from_config_is_deterministic(demo, source, tmp_path):
    metas = [build_stream_from_config(demo, source, tmp_path / run) for run in ("a", "b")]
    assert metas[0] == metas[1]
    for split in ("train", "val"):
        files = [Path(stream_paths(tmp_path / run, source, split)[0]).read_bytes() for run in ("a", "b")]
        assert files[0] == files[1] and len(files[0]) == metas[0][split]["n_bytes"] >= 9


def test_roam_stream_reads_only_roam_files(demo, tmp_path, monkeypatch):
    from niels_gpt.data import registry

    monkeypatch.setattr(registry, "wikitext_lines", lambda cfg: pytest.fail("roam must not load wikitext"))
    cfg = deep_merge(demo, {"sources": {"primer": {"text": str(tmp_path / "missing.txt")}}})
    metas = build_stream_from_config(cfg, "roam", tmp_path)
    assert sorted(os.listdir(tmp_path)) == [
        "roam_train.bin",
        "roam_train.meta.json",
        "roam_val.bin",
        "roam_val.meta.json",
    ]
    assert all(f["path"].startswith(demo["sources"]["roam"]["demo_root"]) for f in metas["train"]["files"])


def test_optional_source_without_input_gets_empty_streams(demo, tmp_path):
    from niels_gpt.batching import load_stream_cache

    cfg = deep_merge(demo, {"sources": {"primer": {"text": str(tmp_path / "missing.txt")}}})
    cfg["streams"]["required_sources"] = ["wiki", "roam"]
    metas = build_stream_from_config(cfg, "primer", tmp_path)
    assert metas["train"]["n_bytes"] == metas["val"]["n_bytes"] == 0 and "empty_reason" in metas["val"]
    assert load_stream_cache(tmp_path, "train") == {}
    cfg["streams"]["required_sources"] = ["wiki", "roam", "primer"]
    with pytest.raises(FileNotFoundError, match="missing.txt"):
        build_stream_from_config(cfg, "primer", tmp_path)


def test_cli_build_streams(demo, tmp_path, monkeypatch, capsys):
    from niels_gpt.cache.cli import main
    from niels_gpt.command_line import run_cli

    monkeypatch.chdir(tmp_path)  # no config.yaml here: built-in defaults + flags
    primer = demo["sources"]["primer"]["text"]
    out = tmp_path / "streams"
    args = [
        "build-streams",
        "--source",
        "primer",
        "--out-dir",
        str(out),
        "--set",
        f"sources.primer.text={primer}",
        "--set",
        "streams.T=8",
    ]
    assert run_cli(main, args + ["--set", "sources.primer.val_frac=0.3", "--set", "seed=1"]) == 0
    assert "primer val:" in capsys.readouterr().err
    meta = json.loads((out / "primer_val.meta.json").read_text())
    assert meta["val_frac"] == 0.3 and meta["seed"] == 1
    assert (out / "primer_val.bin").read_bytes().count(b"assistant:") == 3
    assert run_cli(main, args + ["--set", "streams.T=100000"]) == 1
    assert "shorter than T+1 = 100,001 bytes" in capsys.readouterr().err


@pytest.mark.usefixtures("isolated_hf_cache")
@pytest.mark.parametrize("source", ["wiki", "roam"])
def test_doc_separator_joins_the_documents_of_wiki_and_roam(demo, source, tmp_path):
    from niels_gpt.data.registry import wikitext_lines
    from niels_gpt.data.roam import load_texts

    sep = "\n<doc>\n"
    cfg = deep_merge(demo, {"streams": {"doc_separator": sep}})
    metas = build_stream_from_config(cfg, source, tmp_path)
    for split in ("train", "val"):
        if source == "wiki":
            docs = wikitext_lines(cfg)[split]
        else:
            docs = load_texts([f["path"] for f in metas[split]["files"]])
        assert len(docs) >= (2 if split == "train" else 1) and metas[split]["sep"] == sep
        assert Path(stream_paths(tmp_path, source, split)[0]).read_bytes() == sep.join(docs).encode()


def test_primer_delimiter_splits_the_text_into_the_dialogues_held_out_whole(demo, tmp_path):
    from niels_gpt.splits import val_mask

    delimiter = "\n===\n"
    dialogues = [f"user: question {i}?\nassistant: answer {i}." for i in range(10)]
    (tmp_path / "primer.txt").write_text(delimiter.join(dialogues), encoding="utf-8")
    primer = {"text": str(tmp_path / "primer.txt"), "delimiter": delimiter, "val_frac": 0.2}
    cfg = deep_merge(demo, {"seed": 3, "sources": {"primer": primer}})
    metas = build_stream_from_config(cfg, "primer", tmp_path / "out")
    held_out = [d for d, v in zip(dialogues, val_mask(10, 0.2, 3)) if v]
    assert Path(stream_paths(tmp_path / "out", "primer", "val")[0]).read_bytes() == delimiter.join(held_out).encode()
    assert metas["val"]["delimiter"] == delimiter and len(held_out) == 2
    default = deep_merge(cfg, {"sources": {"primer": {"delimiter": DELIM}}})  # the whole file is one dialogue
    with pytest.raises(ValueError, match=r"primer val: 0 bytes \(empty, and the source is required\)"):
        build_stream_from_config(default, "primer", tmp_path / "default")


def test_a_stream_not_in_enabled_sources_is_refused_naming_the_setting(demo, tmp_path):
    cfg = deep_merge(demo, {"streams": {"enabled_sources": ["wiki", "primer"], "required_sources": ["wiki"]}})
    with pytest.raises(
        ValueError, match=r"stream source 'roam' is not in streams.enabled_sources \['wiki', 'primer'\]"
    ):
        build_stream_from_config(cfg, "roam", tmp_path)
    assert not tmp_path.joinpath("roam_train.bin").exists()
