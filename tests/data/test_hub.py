"""hub.open_dataset / iter_rows: hub call shape, local files, take, shuffle, revision, unreachable hub."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from niels_gpt.cache.meta import sha256_file
from niels_gpt.data import hub
from niels_gpt.data.fineweb_edu import iter_fineweb_edu
from niels_gpt.data.hub import SourceUnavailableError, open_dataset, resolved_revision
from tests.support.hub_files import write_jsonl, write_parquet

pytestmark = pytest.mark.usefixtures("isolated_hf_cache")
SHA = "0123456789abcdef0123456789abcdef01234567"


def _counting_hub(monkeypatch, n_rows=10_000, fail_after=None):
    """Replace datasets.load_dataset by a generator-backed stream; returns (calls, rows_read)."""
    import datasets

    calls, read = [], [0]

    def gen(files):
        for i in range(n_rows):
            if fail_after is not None and i == fail_after:
                from huggingface_hub.utils import httpx

                raise httpx.ConnectError("name resolution failed")
            read[0] += 1
            yield {"text": f"doc {i}", "id": str(i)}

    def fake_load_dataset(*args, **kwargs):
        calls.append((args, kwargs))
        files = [f"hf://datasets/HuggingFaceFW/fineweb-edu@{SHA}/data/CC-MAIN-2024-10/train-00000.parquet"]
        return datasets.IterableDataset.from_generator(gen, gen_kwargs={"files": files})

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    return calls, read


def test_default_calls_load_dataset_with_hub_id_config_split_streaming_revision(monkeypatch):
    calls, _ = _counting_hub(monkeypatch)
    next(iter_fineweb_edu(take=1, shuffle=False, revision="v1"))
    assert calls == [
        (("HuggingFaceFW/fineweb-edu", "CC-MAIN-2024-10"), {"split": "train", "streaming": True, "revision": "v1"})
    ]


def test_take_stops_reading_the_stream(monkeypatch):
    _, read = _counting_hub(monkeypatch)
    samples = list(iter_fineweb_edu(take=3, shuffle=False))
    assert [s.text for s in samples] == ["doc 0", "doc 1", "doc 2"]
    assert read[0] <= 4  # not the 10,000 rows behind it


def test_revision_is_read_from_the_data_file_urls(monkeypatch):
    _counting_hub(monkeypatch)
    prov = {}
    list(iter_fineweb_edu(take=1, shuffle=False, provenance=prov))
    assert prov["revision"] == SHA and prov["revision_from"] == "data file urls"
    assert prov["dataset_id"] == "HuggingFaceFW/fineweb-edu" and prov["local"] is False


def test_revision_from_a_prepared_datasets_arrow_cache_path():
    class Prepared:
        cache_files = [{"filename": f"/c/datasets/databricks___dolly/default/0.0.0/{SHA}/dolly-train.arrow"}]

    assert resolved_revision(Prepared(), "databricks/dolly")["revision"] == SHA
    assert resolved_revision(object(), "x")["revision"] is None


def test_connection_error_while_streaming_becomes_source_unavailable(monkeypatch):
    _counting_hub(monkeypatch, fail_after=2)
    with pytest.raises(SourceUnavailableError, match=r"fineweb-edu.*demo=true.*--demo"):
        list(iter_fineweb_edu(shuffle=False))


def test_shuffle_is_seeded_and_take_applies_after_it(tmp_path):
    path = str(write_parquet(tmp_path / "x.parquet", {"text": [f"row {i}" for i in range(200)]}))

    def texts(**kw):
        return [s.text for s in iter_fineweb_edu(data_files={"train": path}, shuffle_buffer_size=50, **kw)]

    a, b, c = texts(seed=1), texts(seed=1), texts(seed=2)
    assert a == b != c
    assert sorted(a) == sorted(f"row {i}" for i in range(200))
    assert texts(seed=1, take=7) == a[:7]
    assert texts(shuffle=False, take=3) == ["row 0", "row 1", "row 2"]


def test_local_files_read_in_sorted_order_with_sha256(tmp_path):
    write_parquet(tmp_path / "b.parquet", {"text": ["b"]})
    write_parquet(tmp_path / "a.parquet", {"text": ["a"]})
    prov = {}
    out = [
        s.text
        for s in iter_fineweb_edu(data_files={"train": str(tmp_path / "*.parquet")}, shuffle=False, provenance=prov)
    ]
    assert out == ["a", "b"]
    assert [os.path.basename(f["path"]) for f in prov["data_files"]] == ["a.parquet", "b.parquet"]
    assert prov["data_files"][0]["sha256"] == sha256_file(tmp_path / "a.parquet")
    assert prov["local"] is True and prov["builder"] == "parquet"


def test_builder_follows_the_extension(tmp_path):
    path = write_jsonl(tmp_path / "rows.jsonl", [{"text": "j"}])
    ds = open_dataset("any/id", split="train", streaming=True, data_files={"train": str(path)})
    assert [r["text"] for r in ds] == ["j"]
    with pytest.raises(ValueError, match="unsupported data file type"):
        hub.builder_for("notes.txt")


def test_missing_local_files_name_the_glob(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"nothing-\*\.parquet.*split 'train'"):
        open_dataset("x/y", split="train", streaming=True, data_files={"train": str(tmp_path / "nothing-*.parquet")})
    with pytest.raises(ValueError, match="no split 'validation'"):
        open_dataset("x/y", split="validation", streaming=True, data_files={"train": "a.parquet"})


def test_unreachable_hub_raises_source_unavailable_offline(tmp_path):
    """The real datasets code path with HF_HUB_OFFLINE=1 and a dataset id that exists nowhere."""
    code = textwrap.dedent("""
        from niels_gpt.data.hub import SourceUnavailableError
        from niels_gpt.data.dolly import iter_dolly_sft
        try:
            next(iter_dolly_sft(dataset_id="no-such-org/no-such-dataset-1f3a"))
        except SourceUnavailableError as e:
            assert isinstance(e, ConnectionError)
            print("OK", e)
    """)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("OK")
    assert "no-such-org/no-such-dataset-1f3a" in res.stdout and "demo=true" in res.stdout and "--demo" in res.stdout


def _table(path, columns: dict, schema=None):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table(columns, schema=schema), path)
    return path


@pytest.mark.parametrize("streaming", [True, False])
def test_fineweb_files_with_and_without_a_date_column_read_as_one_split(tmp_path, streaming):
    # the file without `date` first: datasets alone would cast the second file to its schema and fail
    _table(tmp_path / "train-00000.parquet", {"text": ["no date"], "id": ["<urn:1>"], "url": ["u1"]})
    _table(tmp_path / "train-00001.parquet", {"text": ["dated"], "id": ["<urn:2>"], "url": ["u2"], "date": ["2024"]})
    files = {"train": str(tmp_path / "*.parquet")}
    ds = open_dataset("HuggingFaceFW/fineweb-edu", split="train", streaming=streaming, data_files=files)
    assert [(r["text"], r["date"]) for r in ds] == [("no date", None), ("dated", "2024")]
    samples = list(iter_fineweb_edu(data_files=files, shuffle=False))
    assert [(s.text, s.meta["id"]) for s in samples] == [("no date", "<urn:1>"), ("dated", "<urn:2>")]


def _oasst_pair(tree: str, emojis, detoxify) -> dict:
    return {
        "message_id": [tree, tree + "-a"],
        "parent_id": [None, tree],
        "message_tree_id": [tree, tree],
        "role": ["prompter", "assistant"],
        "text": [f"question {tree}", f"answer {tree}"],
        "lang": ["en", "en"],
        "deleted": [False, False],
        "emojis": emojis,
        "detoxify": detoxify,
    }


def test_nested_columns_that_are_structs_in_one_file_and_null_in_another_read_as_one_split(tmp_path):
    import pyarrow as pa

    from niels_gpt.data.oasst1 import iter_oasst1_sft

    emojis = pa.struct([("name", pa.list_(pa.string())), ("count", pa.list_(pa.int32()))])
    detoxify = pa.struct([("toxicity", pa.float64())])
    # a flat export without annotations first: its nested columns are all null (pyarrow type null)
    _table(tmp_path / "train-00000.parquet", _oasst_pair("r", [None, None], [None, None]))
    nested = _oasst_pair(
        "s",
        pa.array([{"name": ["+1"], "count": [2]}, None], type=emojis),
        pa.array([None, {"toxicity": 0.01}], type=detoxify),
    )
    _table(tmp_path / "train-00001.parquet", nested)
    threads = list(iter_oasst1_sft(data_files={"train": str(tmp_path / "*.parquet")}, shuffle_trees=False))
    assert [[m.content for m in t.messages] for t in threads] == [
        ["question r", "answer r"],
        ["question s", "answer s"],
    ]


def test_files_whose_columns_conflict_name_the_files(tmp_path):
    _table(tmp_path / "a.parquet", {"text": ["x"], "id": ["1"]})
    _table(tmp_path / "b.parquet", {"text": ["y"], "id": [2]})
    with pytest.raises(ValueError, match=r"a\.parquet, .*b\.parquet: the files' columns cannot be read as one table"):
        open_dataset("x/y", split="train", streaming=True, data_files={"train": str(tmp_path / "*.parquet")})
