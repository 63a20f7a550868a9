"""Config -> the report's files (job.py): the leakage.* keys, the gate, and what each family needs first."""

from __future__ import annotations

import json

import pytest

from niels_gpt.cache.cli import main
from niels_gpt.command_line import run_cli
from niels_gpt.report.job import summary_lines, write_figures
from tests.support.cache_tree import PLANTED_DOC, WIKI_SEGMENTS, WIKI_VAL
from tests.support.cli import cache_cli


def val_row(result: dict, name: str) -> dict:
    return next(v for v in result["val_splits"] if v["name"] == name)


def test_cli_writes_the_same_json_at_any_thread_count(planted_tree, tmp_path, capsys):
    outs = []
    for threads in (1, 2):
        out = tmp_path / f"leakage_{threads}.json"
        args = ["--set", f"cache_dir={planted_tree}", "--out", out, "--num-threads", threads]
        rc, _, stderr = cache_cli(capsys, "leakage", *args)
        assert rc == 0 and "pretrain/wikitext val:" in stderr
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]
    result = json.loads(outs[0])
    assert result["n"] == {"tokens": 13, "bytes": 50} and result["max_fraction"] is None
    assert [t["name"] for t in result["train_splits"]] == [
        "pretrain/wikitext",
        "pretrain/roam",
        "sft/primer",
        "streams/wiki",
        "streams/roam",
    ]


def test_cli_gate_exits_1_with_the_offenders_and_writes_nothing(planted_tree, tmp_path, capsys):
    out = tmp_path / "leakage.json"
    rc, _, err = cache_cli(
        capsys, "leakage", "--set", f"cache_dir={planted_tree}", "--set", "leakage.max_fraction=0.02", "--out", out
    )
    assert rc == 1 and not out.exists()
    assert "\nerror: leakage gate:" in err and "pretrain/wikitext val in pretrain/roam train" in err


def test_cli_ngram_lengths_and_listed_units_follow_the_leakage_keys(planted_tree, tmp_path, capsys, tiny_tokenizer):
    out = tmp_path / "leakage.json"
    settings = ["leakage.n_tokens=20", "leakage.n_bytes=80", "leakage.top_units=0"]
    rc, _, _ = cache_cli(
        capsys,
        "leakage",
        "--set",
        f"cache_dir={planted_tree}",
        *(a for s in settings for a in ("--set", s)),
        "--out",
        out,
    )
    assert rc == 0
    result = json.loads(out.read_text())
    assert result["n"] == {"tokens": 20, "bytes": 80}
    wiki = val_row(result, "pretrain/wikitext")
    assert wiki["ngrams"] == sum(max(len(tiny_tokenizer.encode(d)) - 19, 0) for d in WIKI_VAL)
    stream = val_row(result, "streams/wiki")
    assert stream["ngrams"] == sum(max(len(s.encode()) - 79, 0) for s in WIKI_SEGMENTS["val"])
    assert all(v["top"] == [] for v in result["val_splits"]) and wiki["fraction"]["pretrain/roam"] > 0
    assert cache_cli(capsys, "leakage", "--set", f"cache_dir={planted_tree}", "--out", out)[0] == 0
    default = json.loads(out.read_text())  # top_units 10: the affected documents are listed
    assert val_row(default, "pretrain/wikitext")["top"][0]["unit"] == PLANTED_DOC


def test_leakage_figures_need_the_audit_first(tmp_path, capsys):
    rc = run_cli(main, ["report-figures", "--family", "leakage", "--set", f"cache_dir={tmp_path}"])
    assert rc == 1 and "no leakage audit; run `python -m niels_gpt.cache.cli leakage` first" in capsys.readouterr().err


def test_summary_lines_name_the_train_split_with_the_most_of_each_val_split(results):
    lines = summary_lines(results[1])
    wiki = next(line for line in lines if line.startswith("pretrain/wikitext val: "))
    row = val_row(results[1], "pretrain/wikitext")
    assert f"{row['ngrams']:,} 13-grams in {row['units']:,} documents" in wiki and "(most: pretrain/roam " in wiki
    assert "left out: streams/primer: " in lines[-1]


def test_an_unknown_figure_family_is_refused(report_tree, tmp_path):
    with pytest.raises(ValueError, match="unknown report family 'nope'; expected one of pretrain, sft, tokenizer"):
        write_figures({"cache_dir": str(report_tree)}, "nope", tmp_path)
