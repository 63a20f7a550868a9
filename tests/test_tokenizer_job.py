"""build_tokenizer: trains on the enabled pretrain sources (demo sample), records what it used, adopts a model."""

from __future__ import annotations

import json

import pytest

from niels_gpt.cache.cli import main
from niels_gpt.config import prepare_config
from niels_gpt.tokenizer import SentencePieceTokenizer
from niels_gpt.tokenizer.job import build_tokenizer

SMALL = {"demo": True, "tokenizer": {"vocab_size": 500, "sample_chars": 120_000}}


def test_trains_on_enabled_sources_and_writes_meta_last(tmp_path, isolated_hf_cache):
    cfg = prepare_config({**SMALL, "sources": {"roam": {"enabled": False}}})
    meta = build_tokenizer(cfg, tmp_path)
    assert sorted(meta["trained_on"]["sources"]) == ["fineweb_edu", "wikitext"]
    assert all(0 < s["chars"] <= 60_000 for s in meta["trained_on"]["sources"].values())
    on_disk = json.loads((tmp_path / "meta.json").read_text())
    tok = SentencePieceTokenizer(tmp_path / "spm.model")
    assert on_disk["sha256"] == tok.sha256 and on_disk["vocab_size"] == 504
    assert on_disk["special_token_ids"] == tok.special_ids


def test_same_config_gives_the_same_model(tmp_path, isolated_hf_cache):
    cfg = prepare_config(SMALL)
    a = build_tokenizer(cfg, tmp_path / "a")["sha256"]
    b = build_tokenizer(cfg, tmp_path / "b")["sha256"]
    assert a == b


def test_model_path_is_adopted_not_trained(tmp_path, tiny_tokenizer_path, tiny_tokenizer):
    cfg = prepare_config({"tokenizer": {"model_path": tiny_tokenizer_path}})
    meta = build_tokenizer(cfg, tmp_path)
    assert meta["sha256"] == tiny_tokenizer.sha256
    assert meta["trained_on"] == {"adopted_from": tiny_tokenizer_path}


def test_adopting_a_model_without_the_specials_fails_and_leaves_nothing(tmp_path):
    import sentencepiece as spm
    from conftest import tiny_corpus

    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(tiny_corpus(100)), model_prefix=str(tmp_path / "plain"), vocab_size=150, minloglevel=2
    )
    out = tmp_path / "out"
    cfg = prepare_config({"tokenizer": {"model_path": str(tmp_path / "plain.model")}})
    with pytest.raises(ValueError, match="control symbol"):
        build_tokenizer(cfg, out)
    assert not (out / "spm.model").exists() and not (out / "meta.json").exists()


def test_cli_reports_a_missing_model_path_in_one_line(tmp_path, capsys):
    from niels_gpt.command_line import run_cli

    rc = run_cli(
        main,
        ["build-tokenizer", "--out-dir", str(tmp_path), "--set", f"tokenizer.model_path={tmp_path / 'nope.model'}"],
    )
    assert rc == 1
    err = capsys.readouterr().err
    assert err.startswith("error: tokenizer.model_path") and "Traceback" not in err
