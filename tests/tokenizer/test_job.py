"""build_tokenizer (tokenizer/job.py): trains on the enabled pretrain sources (demo sample), records what it
used in the common header and its own fields, adopts a model."""

from __future__ import annotations

import json

import pytest

from niels_gpt.config import prepare_config
from niels_gpt.layout import TOKENIZER_FORMAT_VERSION
from niels_gpt.meta import check_required
from niels_gpt.tokenizer import SentencePieceTokenizer
from niels_gpt.tokenizer.job import build_tokenizer

SMALL = {"demo": True, "tokenizer": {"vocab_size": 500, "sample_chars": 120_000}}


def test_trains_on_enabled_sources_and_writes_meta_last(tmp_path, isolated_hf_cache):
    cfg = prepare_config({**SMALL, "sources": {"roam": {"enabled": False}}})
    meta = build_tokenizer(cfg, tmp_path)
    assert sorted(meta["trained_on"]["sources"]) == ["fineweb_edu", "wikitext"]
    # sample_chars split evenly between the two enabled sources (each has far more text than that)
    assert [s["chars"] for s in meta["trained_on"]["sources"].values()] == [60_000, 60_000]
    on_disk = json.loads((tmp_path / "meta.json").read_text())
    tok = SentencePieceTokenizer(tmp_path / "spm.model")
    assert on_disk["sha256"] == tok.sha256 and on_disk["vocab_size"] == tok.vocab_size == 504
    assert on_disk["special_token_ids"] == tok.special_ids
    check_required(on_disk)
    assert (
        on_disk["kind"] == "tokenizer"
        and on_disk["format_version"] == TOKENIZER_FORMAT_VERSION
        and on_disk["built"] is True
    )
    assert (on_disk["tokenizer_sha256"], on_disk["eot_id"], on_disk["seed"]) == (tok.sha256, tok.eot_id, 42)
    assert on_disk["dataset_name"] == "fineweb_edu, wikitext"  # the sources sampled


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
    assert meta["dataset_name"] == tiny_tokenizer_path and meta["tokenizer_sha256"] == tiny_tokenizer.sha256


def test_adopting_a_model_without_the_specials_fails_and_leaves_nothing(tmp_path, tiny_tokenizer_path):
    import sentencepiece as spm

    from tests.support.corpus import tiny_corpus

    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(tiny_corpus(100)), model_prefix=str(tmp_path / "plain"), vocab_size=150, minloglevel=2
    )
    out = tmp_path / "out"
    cfg = prepare_config({"tokenizer": {"model_path": str(tmp_path / "plain.model")}})
    build_tokenizer(prepare_config({"tokenizer": {"model_path": tiny_tokenizer_path}}), out)  # a previous build
    with pytest.raises(ValueError, match="control symbol"):
        build_tokenizer(cfg, out)
    assert not (out / "spm.model").exists() and not (out / "meta.json").exists()


def trained(tmp_path, name: str, **tokenizer) -> tuple:
    """(meta, the trained model as a SentencePieceProcessor) of the SMALL config with `tokenizer` keys."""
    import sentencepiece as spm

    cfg = prepare_config({**SMALL, "tokenizer": {**SMALL["tokenizer"], **tokenizer}})
    meta = build_tokenizer(cfg, tmp_path / name)
    return meta, spm.SentencePieceProcessor(model_file=str(tmp_path / name / "spm.model"))


def learned_scores(sp) -> list[float]:
    """Scores of the learned pieces (not <unk>, the specials, byte pieces, or the 0-scored \\n and \\t)."""
    fixed = (sp.is_unknown, sp.is_control, sp.is_byte)
    return [sp.get_score(i) for i in range(sp.get_piece_size()) if not any(f(i) for f in fixed) and sp.get_score(i)]


@pytest.mark.usefixtures("isolated_hf_cache")
def test_model_type_bpe_trains_a_bpe_model(tmp_path):
    # a BPE model scores its merges by rank (-1, -2, ...); a unigram model by log probability
    _, unigram = trained(tmp_path, "unigram")
    meta, bpe = trained(tmp_path, "bpe", model_type="bpe")
    assert meta["model_type"] == "bpe"
    assert all(s == int(s) for s in learned_scores(bpe)) and len(learned_scores(bpe)) > 200
    assert not all(s == int(s) for s in learned_scores(unigram))
    text = "  Lossless\ttoo: 漢字, code\n    indented\n"
    tok = SentencePieceTokenizer(tmp_path / "bpe" / "spm.model")
    assert tok.decode(tok.encode(text)) == text and tok.vocab_size == 504


@pytest.mark.usefixtures("isolated_hf_cache")
def test_character_coverage_decides_which_rare_characters_fall_back_to_bytes(tmp_path):
    from niels_gpt.data.registry import tokenizer_texts

    cfg = prepare_config(SMALL)
    sources = ("fineweb_edu", "wikitext", "roam")  # enabled: the training sample is 40,000 chars of each
    sample = "".join("".join(tokenizer_texts(cfg, s))[: 120_000 // len(sources)] for s in sources)
    byte_pieces = {}
    for coverage in (0.98, 1.0):
        meta, sp = trained(tmp_path, str(coverage), character_coverage=coverage)
        assert meta["character_coverage"] == coverage
        ids = sp.encode(sample)
        byte_pieces[coverage] = sum(sp.is_byte(i) for i in ids)
    assert byte_pieces[1.0] == 0 < byte_pieces[0.98]


@pytest.mark.usefixtures("isolated_hf_cache")
def test_num_threads_reaches_the_trainer(tmp_path):
    shas = {n: trained(tmp_path, f"threads{n}", num_threads=n)[0]["sha256"] for n in (1, 2)}
    assert shas[1] != shas[2]  # the model records the trainer's settings (and unigram EM sums per thread)
