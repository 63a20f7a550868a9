import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from niels_gpt.curation.benchmarks import BenchmarkError, benchmark_texts


def test_jsonl_gives_every_string_at_any_depth(tmp_path):
    path = tmp_path / "qa.jsonl"
    rows = [{"question": "q1", "choices": ["a", "b"], "meta": {"id": 3, "note": "n"}}, "plain", {"x": 1}]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n", encoding="utf-8")
    assert benchmark_texts(path) == ["q1", "a", "b", "n", "plain"]


def test_txt_is_one_text_and_parquet_gives_its_string_columns(tmp_path):
    (tmp_path / "essay.txt").write_text("one\ntwo\n", encoding="utf-8")
    assert benchmark_texts(tmp_path / "essay.txt") == ["one\ntwo\n"]
    pq.write_table(pa.table({"text": ["x", None, "y"], "n": [1, 2, 3]}), tmp_path / "t.parquet")
    assert benchmark_texts(tmp_path / "t.parquet") == ["x", "y"]
    pq.write_table(pa.table({"n": [1]}), tmp_path / "nums.parquet")
    with pytest.raises(BenchmarkError, match=r"nums.parquet: no string column \(columns: \['n'\]\)"):
        benchmark_texts(tmp_path / "nums.parquet")


def test_bad_files_are_named_with_what_was_expected(tmp_path):
    with pytest.raises(BenchmarkError, match=r"eval.csv: expected a .jsonl, .txt, .parquet file, got suffix '.csv'"):
        benchmark_texts(tmp_path / "eval.csv")
    with pytest.raises(BenchmarkError, match=r"missing.jsonl: file not found"):
        benchmark_texts(tmp_path / "missing.jsonl")
    (tmp_path / "bad.jsonl").write_text('{"a": "b"}\n{oops\n', encoding="utf-8")
    with pytest.raises(BenchmarkError, match=r"bad.jsonl, line 2: not JSON .*expected one JSON value per line"):
        benchmark_texts(tmp_path / "bad.jsonl")
