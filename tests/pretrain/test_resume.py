"""A resumable stream build (pretrain/resume.py, writer.py's checkpoint, shards.py's restore): a build the
hub stops fails with one message and leaves nothing complete-looking; a rerun continues from the
checkpoint byte-identically (shards and meta.json), after a kill too; a checkpoint of another config,
or a stream that changed, starts afresh; the loaders' cleaning counts and part builds resume the same way."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from niels_gpt.config import prepare_config
from niels_gpt.data import resumable
from niels_gpt.data.source import SourceUnavailableError
from niels_gpt.layout import RESUME_DIR
from niels_gpt.pretrain import encode
from niels_gpt.pretrain.job import build_pretrain_source
from niels_gpt.pretrain.resume import CHECKPOINT, Checkpoint
from niels_gpt.pretrain.shards import ShardWriter
from tests.support.cache_files import file_hashes
from tests.support.corpus import tiny_corpus
from tests.support.hub_files import raw_gutenberg_book, write_parquet

pytestmark = pytest.mark.usefixtures("isolated_hf_cache")

DOCS_PER_BATCH = 20  # small batches: a checkpoint every few dozen documents


@pytest.fixture(autouse=True)
def small_batches(monkeypatch):
    monkeypatch.setattr(encode, "BATCH_DOCS", DOCS_PER_BATCH)


@pytest.fixture(scope="module")
def stream_files(tmp_path_factory) -> str:
    """600 documents in 5 parquet files, row groups of 25 rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = tmp_path_factory.mktemp("stream")
    docs = tiny_corpus(600, seed=2)
    for f in range(5):
        part = docs[f * 120 : (f + 1) * 120]
        table = pa.table({"text": part, "id": [f"{f}-{i}" for i in range(len(part))]})
        pq.write_table(table, folder / f"train-{f:05d}-of-00005.parquet", row_group_size=25)
    return f"{folder}/*.parquet"


def config(files: str, source: str = "fineweb_edu", split: str = "train", **settings) -> dict:
    """A demo config reading `files` as `split` of `source`: small budgets, shards and checkpoints, no retries."""
    section = {
        "enabled": True,
        "split": split,
        "demo_data_files": {split: files},
        "shuffle_buffer": 60,
        "max_train_tokens": 12_000,
        "max_val_tokens": 1_500,
        "val_doc_prob": 0.1,
        **settings,
    }
    return prepare_config(
        {
            "demo": True,
            "pretrain": {"shard_bytes": 2_000},
            "sources": {source: section},
            "hub": {"attempts": 1, "backoff_s": 0, "checkpoint_tokens": 1_000},
        }
    )


def build(cfg, out: Path, tokenizer_path: str, *, source="fineweb_edu", **kw) -> dict:
    return build_pretrain_source(
        cfg, source, tokenizer_path=tokenizer_path, out_dir=out, num_threads=1, log=lambda s: None, **kw
    )


def files_of(out: Path) -> dict[str, str]:
    """sha256 of every file of a cache (the checkpoint folder left out)."""
    return file_hashes(out, skip=RESUME_DIR)


def hub_down_after(monkeypatch, fetches: int):
    """Every stream read after the first `fetches` fails (a ConnectionError: the hub is down)."""
    real, calls = resumable._Group.fetch, [0]

    def fetch(self):
        calls[0] += 1
        if calls[0] > fetches:
            raise ConnectionError("injected: the hub is down")
        return real(self)

    monkeypatch.setattr(resumable._Group, "fetch", fetch)


@pytest.fixture(scope="module")
def reference(tmp_path_factory, stream_files, tiny_tokenizer_path) -> dict[str, str]:
    """The files of the build that never stopped."""
    out = tmp_path_factory.mktemp("reference")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(encode, "BATCH_DOCS", DOCS_PER_BATCH)
        build(config(stream_files), out, tiny_tokenizer_path)
    return files_of(out)


# ---------------------------------------------------------------- the shard writer


def test_a_shard_writer_continues_from_its_checkpoint(tmp_path):
    tokens = np.arange(1_000, dtype=np.uint16)
    whole = ShardWriter(tmp_path / "whole", shard_bytes=64, budget=900)
    whole.write(tokens)
    whole.finish()
    whole.commit()

    stage = tmp_path / "stage"
    first = ShardWriter(tmp_path / "out", shard_bytes=64, budget=900, stage_dir=stage)
    first.write(tokens[:100])
    first.n_documents = 7
    state = json.loads(json.dumps(first.checkpoint()))
    first.write(tokens[100:250])  # after the checkpoint: cut back by restore
    first.abort()
    assert sorted(p.name for p in stage.iterdir())[-1] == "shard_00007.bin"  # kept for the checkpoint
    again = ShardWriter(tmp_path / "out", shard_bytes=64, budget=900, stage_dir=stage)
    again.restore(state)
    assert (again.n_tokens, again.n_documents, len(again.shards)) == (100, 7, 3)
    again.write(tokens[100:])
    again.finish()
    again.commit()
    assert again.shards == whole.shards
    for s in whole.shards:
        assert (tmp_path / "out" / s["file"]).read_bytes() == (tmp_path / "whole" / s["file"]).read_bytes()
    assert list(stage.iterdir()) == []  # renamed into the output


def test_restore_refuses_a_staged_shard_shorter_than_its_checkpoint(tmp_path):
    stage = tmp_path / "stage"
    writer = ShardWriter(tmp_path / "out", shard_bytes=64, budget=None, stage_dir=stage)
    writer.write(np.arange(70, dtype=np.uint16))
    state = writer.checkpoint()
    writer.abort()
    (stage / "shard_00000.bin").write_bytes(b"\0" * 10)
    with pytest.raises(ValueError, match=r"shard_00000.bin: 10 bytes, the checkpoint counts 32 tokens"):
        ShardWriter(tmp_path / "out", shard_bytes=64, budget=None, stage_dir=stage).restore(state)


def test_a_checkpoint_of_another_key_or_an_unreadable_one_is_removed(tmp_path):
    saved = Checkpoint(tmp_path, {"seed": 1}, every_tokens=10)
    saved.save({"tokens": 5}, None)
    assert Checkpoint(tmp_path, {"seed": 1}, every_tokens=10).load()["tokens"] == 5
    assert Checkpoint(tmp_path, {"seed": 2}, every_tokens=10).load() is None
    assert not (tmp_path / RESUME_DIR).exists()
    saved.save({"tokens": 5}, None)
    (tmp_path / RESUME_DIR / CHECKPOINT).write_text("{not json")
    assert Checkpoint(tmp_path, {"seed": 1}, every_tokens=10).load() is None
    assert not (tmp_path / RESUME_DIR).exists()


# ---------------------------------------------------------------- builds


@pytest.mark.parametrize("fetches", [0, 9, 30])
def test_a_build_the_hub_stops_fails_with_one_message_and_a_rerun_continues(
    tmp_path, stream_files, tiny_tokenizer_path, reference, monkeypatch, capsys, fetches
):
    cfg = config(stream_files)
    hub_down_after(monkeypatch, fetches)
    with pytest.raises(SourceUnavailableError) as info:
        build(cfg, tmp_path, tiny_tokenizer_path)
    message = str(info.value)
    assert "\n" not in message and message.startswith("hub dataset 'HuggingFaceFW/fineweb-edu'")
    assert "a read of the stream failed 1 time in a row (0 retries in all" in message
    assert "injected: the hub is down" in message and "rows read so far" in message and "tokens written" in message
    assert f"the checkpoint in {tmp_path / RESUME_DIR} holds" in message and "run the same build again" in message
    assert not (tmp_path / "meta.json").exists()  # nothing looks complete
    assert [p for split in ("train", "val") for p in (tmp_path / split).iterdir()] == []
    assert (tmp_path / RESUME_DIR / CHECKPOINT).is_file()

    monkeypatch.undo()
    monkeypatch.setattr(encode, "BATCH_DOCS", DOCS_PER_BATCH)
    capsys.readouterr()
    build(cfg, tmp_path, tiny_tokenizer_path)
    assert files_of(tmp_path) == reference
    assert f"resuming from the checkpoint in {tmp_path / RESUME_DIR}" in capsys.readouterr().err
    assert not (tmp_path / RESUME_DIR).exists()


def test_a_killed_build_resumes_from_its_last_checkpoint(
    tmp_path, stream_files, tiny_tokenizer_path, reference, monkeypatch
):
    cfg = config(stream_files)
    cfg["hub"]["checkpoint_tokens"] = 4_000  # several batches between checkpoints
    real, writes = ShardWriter.write, [0]

    def write(self, tokens):
        done = real(self, tokens)
        writes[0] += (tmp_path / RESUME_DIR / CHECKPOINT).exists()
        if writes[0] == 3:  # Ctrl-C (or a kill) a few writes after the first checkpoint
            raise KeyboardInterrupt
        return done

    monkeypatch.setattr(ShardWriter, "write", write)
    with pytest.raises(KeyboardInterrupt):
        build(cfg, tmp_path, tiny_tokenizer_path)
    saved = json.loads((tmp_path / RESUME_DIR / CHECKPOINT).read_text())
    staged = sum(p.stat().st_size for p in (tmp_path / RESUME_DIR).rglob("shard_*.bin"))
    assert staged > 2 * saved["tokens"] > 0  # written after the last checkpoint: cut back by the rerun
    monkeypatch.undo()
    monkeypatch.setattr(encode, "BATCH_DOCS", DOCS_PER_BATCH)
    build(cfg, tmp_path, tiny_tokenizer_path)
    assert files_of(tmp_path) == reference


def test_a_checkpoint_of_another_config_is_dropped(tmp_path, stream_files, tiny_tokenizer_path, monkeypatch, capsys):
    hub_down_after(monkeypatch, 20)
    with pytest.raises(SourceUnavailableError):
        build(config(stream_files), tmp_path, tiny_tokenizer_path)
    monkeypatch.undo()
    monkeypatch.setattr(encode, "BATCH_DOCS", DOCS_PER_BATCH)
    other = config(stream_files, val_doc_prob=0.3)
    capsys.readouterr()
    build(other, tmp_path, tiny_tokenizer_path)
    err = capsys.readouterr().err
    assert "a checkpoint of another build" in err and "resuming" not in err
    fresh = tmp_path.parent / f"{tmp_path.name}-fresh"
    build(other, fresh, tiny_tokenizer_path)
    assert files_of(tmp_path) == files_of(fresh)


def test_a_stream_that_changed_since_the_checkpoint_starts_afresh(
    tmp_path, stream_files, tiny_tokenizer_path, monkeypatch, capsys
):
    import shutil

    files = tmp_path / "files"
    shutil.copytree(Path(stream_files).parent, files)
    cfg = config(f"{files}/*.parquet")
    hub_down_after(monkeypatch, 20)
    with pytest.raises(SourceUnavailableError):
        build(cfg, tmp_path / "out", tiny_tokenizer_path)
    monkeypatch.undo()
    monkeypatch.setattr(encode, "BATCH_DOCS", DOCS_PER_BATCH)
    first = sorted(files.iterdir())[0]
    write_parquet(first, {"text": tiny_corpus(120, seed=9), "id": [str(i) for i in range(120)]})  # new bytes
    capsys.readouterr()
    build(cfg, tmp_path / "out", tiny_tokenizer_path)
    assert "belongs to another stream (files, seed, buffer or revision); starting afresh" in capsys.readouterr().err
    build(cfg, tmp_path / "fresh", tiny_tokenizer_path)
    assert files_of(tmp_path / "out") == files_of(tmp_path / "fresh")


def test_the_loaders_cleaning_counts_survive_a_resume(tmp_path, tiny_tokenizer_path, monkeypatch):
    start, end = "*** START OF THE PROJECT GUTENBERG EBOOK X ***", "*** END OF THE PROJECT GUTENBERG EBOOK X ***"
    books = [raw_gutenberg_book(b, start, end) for b in tiny_corpus(300, seed=4)]
    path = write_parquet(tmp_path / "en-00000-of-00001.parquet", {"id": [str(i) for i in range(300)], "text": books})
    cfg = config(
        str(path), "gutenberg", "en", dataset_id="manu/project_gutenberg", shuffle_buffer=50, max_train_tokens=6_000
    )
    reference = build(cfg, tmp_path / "reference", tiny_tokenizer_path, source="gutenberg")
    assert reference["cleaning"]["boilerplate_books_stripped"] > 40
    hub_down_after(monkeypatch, 8)
    with pytest.raises(SourceUnavailableError):
        build(cfg, tmp_path / "out", tiny_tokenizer_path, source="gutenberg")
    monkeypatch.undo()
    monkeypatch.setattr(encode, "BATCH_DOCS", DOCS_PER_BATCH)
    resumed = build(cfg, tmp_path / "out", tiny_tokenizer_path, source="gutenberg")
    assert resumed["cleaning"] == reference["cleaning"]
    assert files_of(tmp_path / "out") == files_of(tmp_path / "reference")


def test_a_part_build_resumes_the_same_way(tmp_path, stream_files, tiny_tokenizer_path, monkeypatch):
    cfg = config(stream_files)
    cfg["pretrain"]["num_parts"] = 2
    build(cfg, tmp_path / "reference", tiny_tokenizer_path, num_parts=2, part=1)
    hub_down_after(monkeypatch, 12)
    with pytest.raises(SourceUnavailableError):
        build(cfg, tmp_path / "out", tiny_tokenizer_path, num_parts=2, part=1)
    monkeypatch.undo()
    monkeypatch.setattr(encode, "BATCH_DOCS", DOCS_PER_BATCH)
    build(cfg, tmp_path / "out", tiny_tokenizer_path, num_parts=2, part=1)
    assert files_of(tmp_path / "out") == files_of(tmp_path / "reference")


def test_a_disabled_source_drops_a_checkpoint_left_behind(tmp_path, stream_files, tiny_tokenizer_path, monkeypatch):
    hub_down_after(monkeypatch, 20)
    with pytest.raises(SourceUnavailableError):
        build(config(stream_files), tmp_path, tiny_tokenizer_path)
    assert (tmp_path / RESUME_DIR).is_dir()
    build(config(stream_files, enabled=False), tmp_path, tiny_tokenizer_path)
    assert not (tmp_path / RESUME_DIR).exists()


def test_an_error_of_the_data_removes_the_checkpoint(tmp_path, stream_files, tiny_tokenizer_path):
    from niels_gpt.pretrain.record import EmptySplitError

    with pytest.raises(EmptySplitError):  # no document goes to val: a rerun would fail the same way
        build(config(stream_files, val_doc_prob=0.0), tmp_path, tiny_tokenizer_path)
    assert not (tmp_path / RESUME_DIR).exists() and not list(tmp_path.rglob("shard_*"))
