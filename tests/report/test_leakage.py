"""The leakage audit: a planted duplicate is found and named far above the baseline; the gate fails with it."""

from __future__ import annotations

import json

import numpy as np
import pytest

from niels_gpt.cache.cli import main
from niels_gpt.command_line import run_cli
from niels_gpt.report.leakage import LeakageError, audit, check_gate
from tests.support.report_tree import PLANTED_DOC, PLANTED_SEGMENT, WIKI_SEGMENTS, WIKI_VAL, build_report_tree

N = {"n_tokens": 13, "n_bytes": 50}


@pytest.fixture(scope="module")
def trees(tmp_path_factory, tiny_tokenizer, tiny_tokenizer_path):
    """(clean tree, tree with the planted duplicates)."""
    return tuple(
        build_report_tree(tmp_path_factory.mktemp(name), tiny_tokenizer, tiny_tokenizer_path, plant=plant)
        for name, plant in (("clean", False), ("planted", True))
    )


@pytest.fixture(scope="module")
def results(trees, tiny_tokenizer):
    return tuple(audit(t, **N, top=3, tokenizer=tiny_tokenizer, log=lambda _: None) for t in trees)


def val_row(result: dict, name: str) -> dict:
    return next(v for v in result["val_splits"] if v["name"] == name)


def test_planted_val_document_is_named_with_the_train_split_that_holds_it(results, tiny_tokenizer):
    clean, planted = (val_row(r, "pretrain/wikitext") for r in results)
    worst = planted["top"][0]
    assert (worst["unit"], worst["fraction"], worst["worst_train"]) == (PLANTED_DOC, 1.0, "pretrain/roam")
    assert worst["by_train"]["pretrain/roam"] == 1.0
    assert worst["ngrams"] == len(tiny_tokenizer.encode(WIKI_VAL[PLANTED_DOC])) - 12
    assert " ".join(WIKI_VAL[PLANTED_DOC].split())[:40] in worst["excerpt"]
    share = worst["ngrams"] / planted["ngrams"]
    assert planted["fraction"]["pretrain/roam"] >= share - 1e-6  # JSON fractions keep 6 digits
    assert planted["fraction"]["pretrain/roam"] > 20 * max(clean["fraction"]["pretrain/roam"], 1e-3)


def test_planted_stream_segment_is_named_in_the_byte_space(results):
    clean, planted = (val_row(r, "streams/wiki") for r in results)
    worst = planted["top"][0]
    assert (worst["unit"], worst["fraction"], worst["worst_train"]) == (PLANTED_SEGMENT, 1.0, "streams/roam")
    assert worst["excerpt"].startswith(" ".join(WIKI_SEGMENTS["val"][PLANTED_SEGMENT].split())[:40])
    assert planted["fraction"]["streams/roam"] > 20 * max(clean["fraction"]["streams/roam"], 1e-3)
    assert set(planted["fraction"]) == {"streams/wiki", "streams/roam"}  # bytes never meet token splits


def test_ngrams_never_span_two_documents_or_examples(results, tiny_tokenizer):
    wiki = val_row(results[0], "pretrain/wikitext")
    assert wiki["units"] == len(WIKI_VAL)
    assert wiki["ngrams"] == sum(max(len(tiny_tokenizer.encode(d)) - 12, 0) for d in WIKI_VAL)
    primer = val_row(results[0], "sft/primer")
    assert primer["unit"] == "example" and set(primer["fraction"]) == {
        "pretrain/wikitext",
        "pretrain/roam",
        "sft/primer",
    }


def test_caches_not_built_are_listed_not_dropped(results):
    skipped = {k["name"]: k["reason"] for k in results[0]["skipped"]}
    assert skipped["pretrain/fineweb_edu"] == "not built: sources.fineweb_edu.enabled is false"
    assert "sft/dolly15k" in skipped and "streams/primer" in skipped


def test_gate_fails_naming_the_worst_pair_and_document(results):
    planted = dict(results[1], max_fraction=0.02)
    with pytest.raises(LeakageError) as err:
        check_gate(planted)
    message = str(err.value)
    assert "leakage.max_fraction = 2%" in message
    assert "pretrain/wikitext val in pretrain/roam train" in message
    assert f"document {PLANTED_DOC} (100.0% of its" in message
    check_gate(dict(results[1], max_fraction=None))  # report only
    check_gate(dict(results[1], max_fraction=1.0))


def cli(capsys, *args) -> tuple[int, str, str]:
    rc = run_cli(main, [*map(str, args)])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_cli_writes_the_same_json_at_any_thread_count(trees, tmp_path, capsys):
    outs = []
    for threads in (1, 2):
        out = tmp_path / f"leakage_{threads}.json"
        rc, stdout, _ = cli(capsys, "leakage", "--set", f"cache_dir={trees[1]}", "--out", out, "--num-threads", threads)
        assert rc == 0 and "pretrain/wikitext val:" in stdout
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


def test_cli_gate_exits_1_with_the_offenders_and_writes_nothing(trees, tmp_path, capsys):
    out = tmp_path / "leakage.json"
    rc, _, err = cli(
        capsys, "leakage", "--set", f"cache_dir={trees[1]}", "--set", "leakage.max_fraction=0.02", "--out", out
    )
    assert rc == 1 and not out.exists()
    assert "\nerror: leakage gate:" in err and "pretrain/wikitext val in pretrain/roam train" in err


def test_fractions_count_ngram_positions_not_distinct_ngrams(trees, tiny_tokenizer):
    """A val n-gram that occurs twice counts twice: the fraction is a share of the val text."""
    result = audit(trees[1], **N, top=0, tokenizer=None, log=lambda _: None)
    wiki = val_row(result, "pretrain/wikitext")
    assert wiki["top"] == []
    tokens = np.concatenate([tiny_tokenizer.encode(d) for d in WIKI_VAL]).size
    assert wiki["ngrams"] <= tokens


def test_cli_ngram_lengths_and_listed_units_follow_the_leakage_keys(trees, tmp_path, capsys, tiny_tokenizer):
    out = tmp_path / "leakage.json"
    settings = ["leakage.n_tokens=20", "leakage.n_bytes=80", "leakage.top_units=0"]
    rc, _, _ = cli(
        capsys, "leakage", "--set", f"cache_dir={trees[1]}", *(a for s in settings for a in ("--set", s)), "--out", out
    )
    assert rc == 0
    result = json.loads(out.read_text())
    assert result["n"] == {"tokens": 20, "bytes": 80}
    wiki = val_row(result, "pretrain/wikitext")
    assert wiki["ngrams"] == sum(max(len(tiny_tokenizer.encode(d)) - 19, 0) for d in WIKI_VAL)
    stream = val_row(result, "streams/wiki")
    assert stream["ngrams"] == sum(max(len(s.encode()) - 79, 0) for s in WIKI_SEGMENTS["val"])
    assert all(v["top"] == [] for v in result["val_splits"]) and wiki["fraction"]["pretrain/roam"] > 0
    assert cli(capsys, "leakage", "--set", f"cache_dir={trees[1]}", "--out", out)[0] == 0
    default = json.loads(out.read_text())  # top_units 10: the affected documents are listed
    assert val_row(default, "pretrain/wikitext")["top"][0]["unit"] == PLANTED_DOC
