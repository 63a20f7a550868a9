"""streams/build.py: what each stream holds, its meta.json (the common header + inputs), the one T+1
check, writing a stream or its "not built" record, and the one "is it current" decision."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import pytest

from niels_gpt import meta
from niels_gpt.layout import STREAM_FORMAT_VERSION
from niels_gpt.streams import (
    build_primer_stream,
    build_roam_stream,
    build_sources_from_docs,
    build_wiki_stream,
    check_stream_lengths,
    read_current,
    stream_paths,
    write_not_built,
    write_stream,
)
from niels_gpt.streams.build import source_streams, stream_header
from tests.support.streams import DELIM, WIKI


def read_json(path) -> dict:
    return json.loads(Path(path).read_text(encoding="utf-8"))


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
        (source, split): read_json(stream_paths(inputs.cache_dir, source, split)[1])
        for source in ("wiki", "roam", "primer")
        for split in ("train", "val")
    }
    assert sum(m["skipped_blank"] for (s, _), m in metas.items() if s == "roam") == 3
    assert (metas[("primer", "train")]["skipped_blank"], metas[("primer", "val")]["skipped_blank"]) == (3, 0)
    assert (metas[("wiki", "train")]["skipped_blank"], metas[("wiki", "val")]["skipped_blank"]) == (2, 0)


def test_every_meta_starts_with_the_common_header(inputs):
    build_sources_from_docs(inputs, wiki_docs=WIKI, wiki_dataset=("Salesforce/wikitext", "wikitext-2-raw-v1"))
    dataset = {
        "wiki": (None, "Salesforce/wikitext", "wikitext-2-raw-v1"),
        "roam": (42, "roam", None),
        "primer": (42, inputs.primer_path, None),
    }
    for source, (seed, name, config) in dataset.items():
        for split in ("train", "val"):
            path = stream_paths(inputs.cache_dir, source, split)[1]
            m = read_json(path)
            meta.check_required(m, path=path)
            assert m["kind"] == "streams" and m["built"] is True and m["format_version"] == STREAM_FORMAT_VERSION
            assert (m["seed"], m["dataset_name"], m["dataset_config"]) == (seed, name, config)
            assert [m[k] for k in ("tokenizer_sha256", "vocab_size", "special_token_ids", "eot_id")] == [None] * 4
            assert m["encoding"] == "utf-8" and m["bin"] == f"{source}_{split}.bin"


def test_wiki_streams_name_the_default_wikitext_dataset_and_no_seed():
    from niels_gpt.data.wikitext import CONFIG, DATASET_ID
    from niels_gpt.streams import StreamBuildConfig

    header = stream_header(StreamBuildConfig(), "wiki")
    assert (header["dataset_name"], header["dataset_config"], header["seed"]) == (DATASET_ID, CONFIG, None)
    with pytest.raises(ValueError, match="unknown stream source 'books'"):
        stream_header(StreamBuildConfig(), "books")


def test_the_length_check_lists_every_short_stream_in_one_message():
    with pytest.raises(ValueError) as e:
        check_stream_lengths(
            {"wiki val": 12, "roam train": 17, "primer val": 0, "primer train": 0}, 16, required={"primer val"}
        )
    assert str(e.value) == (
        "byte streams shorter than T+1 = 17 bytes:\n"
        "  - wiki val: 12 bytes\n"
        "  - primer val: 0 bytes (empty, and the source is required)\n"
        "  - primer train: 0 bytes\n"
        "add text, lower T (streams.T), or drop the source from streams.enabled_sources / required_sources"
    )
    check_stream_lengths({"a": 17, "b": 1000}, 16)
    with pytest.raises(ValueError, match="T must be >= 1, got 0"):
        check_stream_lengths({"a": 17}, 0)


def test_write_stream_records_source_split_and_hash(tmp_path):
    m = write_stream(tmp_path, "wiki", "train", b"hello", {})
    assert read_json(stream_paths(tmp_path, "wiki", "train")[1]) == m
    assert (m["source"], m["split"], m["n_bytes"], m["skipped_blank"]) == ("wiki", "train", 5, 0)
    assert m["sha256"] == "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
    assert m["kind"] == "streams" and m["seed"] is None and m["format_version"] == STREAM_FORMAT_VERSION


def test_a_rewrite_takes_the_old_meta_down_first_and_a_failed_one_leaves_no_meta(tmp_path, monkeypatch):
    from niels_gpt.atomic import StagedFile

    write_stream(tmp_path, "roam", "val", b"old bytes", {})
    bin_path, meta_path = stream_paths(tmp_path, "roam", "val")

    def fail(self):
        assert not Path(meta_path).exists() and Path(self.tmp).read_bytes() == b"new bytes"  # meta down first
        raise OSError("disk full")

    monkeypatch.setattr(StagedFile, "commit", fail)
    with pytest.raises(OSError, match="disk full"):
        write_stream(tmp_path, "roam", "val", b"new bytes", {})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["roam_val.bin"]  # no meta.json: nothing looks complete


def test_not_built_record(tmp_path, inputs):
    header = stream_header(inputs, "roam")
    m = write_not_built(tmp_path / "out", "roam", "train", reason="no notes", header=header)
    bin_path, meta_path = stream_paths(tmp_path / "out", "roam", "train")
    assert Path(bin_path).read_bytes() == b"" and read_json(meta_path) == m
    assert m == {
        **meta.not_built(
            "streams", reason="no notes", format_version=STREAM_FORMAT_VERSION, seed=42, dataset_name="roam"
        ),
        "source": "roam",
        "split": "train",
    }
    assert not meta.is_built(m)
    meta.check_required(m)


def test_a_stream_is_current_when_its_meta_records_the_same_header_and_inputs(inputs):
    build_sources_from_docs(inputs, wiki_docs=WIKI)
    wiki_train = source_streams(inputs, "wiki", WIKI)[0]
    learned = {"n_docs": 40, "total_chars": sum(map(len, WIKI["train"]))}  # what the wiki stream learns as read
    on_disk = read_current(inputs.cache_dir, wiki_train, learned)
    assert on_disk["n_bytes"] == len(build_wiki_stream(WIKI["train"], sep="\n\n")) and on_disk["n_docs"] == 40
    assert read_current(inputs.cache_dir, wiki_train, {**learned, "n_docs": 41}) is None
    other_dataset = source_streams(inputs, "wiki", WIKI, ("Salesforce/wikitext", "wikitext-2-raw-v1"))[0]
    assert read_current(inputs.cache_dir, other_dataset, learned) is None
    bumped = dataclasses.replace(wiki_train, header={**wiki_train.header, "format_version": STREAM_FORMAT_VERSION + 1})
    assert read_current(inputs.cache_dir, bumped, learned) is None
    roam_train = source_streams(inputs, "roam")[0]  # its inputs are known before reading: the notes' stats
    assert roam_train.inputs_complete and read_current(inputs.cache_dir, roam_train)["files"]
    bin_path, meta_path = stream_paths(inputs.cache_dir, "wiki", "train")
    data = Path(bin_path).read_bytes()
    Path(bin_path).write_bytes(data[:-1])  # a .bin that is not whole
    assert read_current(inputs.cache_dir, wiki_train, learned) is None
    write_not_built(inputs.cache_dir, "wiki", "train", reason="gone", header=wiki_train.header)
    assert read_current(inputs.cache_dir, wiki_train) is None
    Path(meta_path).write_text("{not json")
    assert read_current(inputs.cache_dir, wiki_train) is None


def test_a_stream_is_written_as_its_documents_are_read(tmp_path):
    """The bytes reach the staged file while the documents are still being read (memory holds one
    write chunk, not the stream), and the count and sha256 are those of the whole file."""
    from niels_gpt.streams.build import WRITE_CHUNK_CHARS, stage_stream, write_documents

    staged_bin = tmp_path / "wiki_train.bin.tmp"
    size_midway = []

    def lines():
        for i in range(3000):  # 3000 lines of 1,000 bytes + separators: ~3 MB
            if i == 2500:
                size_midway.append(staged_bin.stat().st_size)
            yield "x" * 1000

    staged, written = stage_stream(tmp_path, "wiki", "train", lambda out: write_documents(out, lines(), "\n"))
    assert size_midway[0] >= 2 * WRITE_CHUNK_CHARS  # ASCII: a byte per character
    data = staged_bin.read_bytes()
    assert data == "\n".join(["x" * 1000] * 3000).encode() and written.n_bytes == len(data) == 3_002_999
    assert written.sha256 == hashlib.sha256(data).hexdigest() and written.inputs == {
        "n_docs": 3000,
        "total_chars": 3_000_000,
    }
    assert not Path(stream_paths(tmp_path, "wiki", "train")[0]).exists()  # staged, not published
    staged.discard()


@pytest.mark.parametrize("chunk_chars", [1, 3, 7, 1 << 20])
def test_documents_written_in_chunks_are_the_documents_joined(tmp_path, monkeypatch, chunk_chars):
    """Whatever the chunk size, the bytes are the non-blank documents joined with the separator, encoded."""
    import io

    from niels_gpt.streams import build

    monkeypatch.setattr(build, "WRITE_CHUNK_CHARS", chunk_chars)
    docs = ["", " = Alpha = ", "  \n", "Grüße aus Köln", "a", "\t", "日本語の文", "", "end"]
    out = io.BytesIO()
    written = build.write_documents(out, docs, "\n<sep>\n")
    kept = [" = Alpha = ", "Grüße aus Köln", "a", "日本語の文", "end"]
    assert out.getvalue() == "\n<sep>\n".join(kept).encode("utf-8")
    assert (written.n_bytes, written.sha256) == (len(out.getvalue()), hashlib.sha256(out.getvalue()).hexdigest())
    assert (written.skipped_blank, written.inputs) == (4, {"n_docs": 9, "total_chars": sum(map(len, docs))})
