"""`inspect`: samples decode to the source text; the SFT loss-active span is marked; bad input is refused."""

from __future__ import annotations

import pytest

from niels_gpt.sft.writer import build_sft_cache
from niels_gpt.tokenizer import train_sentencepiece
from tests.support.cache_tree import KNOWN_CHAT, PRETRAIN_DOCS, STREAM_TEXT, install_tokenizer
from tests.support.cli import cache_cli
from tests.support.corpus import tiny_corpus


def test_inspect_sft_marks_the_loss_active_span(tmp_path, capsys, tiny_tokenizer, tiny_tokenizer_path):
    root = tmp_path / "cache"
    install_tokenizer(root, tiny_tokenizer_path)
    build_sft_cache(
        [KNOWN_CHAT, KNOWN_CHAT[1:3]], str(root / "sft" / "k"), tokenizer=tiny_tokenizer, val_frac=0.0, seed=0
    )
    rc, out, _ = cache_cli(capsys, "inspect", root / "sft" / "k", "--example", 0, "--color", "never")
    assert rc == 0
    assert (
        "<|sys|>be brief<|eot|><|usr|>hello there<|eot|><|asst|>[[general kenobi<|eot|>]]"
        "<|usr|>and then?<|eot|><|asst|>[[the river\nopens<|eot|>]]"
    ) in out
    n_active = len(tiny_tokenizer.encode("general kenobi")) + len(tiny_tokenizer.encode("the river\nopens")) + 2
    assert "example 0 of 2: " in out and f", {n_active} loss-active" in out
    rc, out, _ = cache_cli(
        capsys, "inspect", root / "sft" / "k" / "train_tokens.bin", "--example", 1, "--color", "always"
    )
    assert "<|usr|>hello there<|eot|><|asst|>\033[32mgeneral kenobi<|eot|>\033[0m" in out


@pytest.mark.parametrize("truncation", ["tail", "prompt"])
def test_inspect_sft_says_how_a_long_example_is_cut(tmp_path, capsys, tiny_tokenizer, tiny_tokenizer_path, truncation):
    from niels_gpt.chat_template import render_chat_sft

    root = tmp_path / "cache"
    install_tokenizer(root, tiny_tokenizer_path)
    long_chat = [{"role": "user", "content": "the river " * 40}, {"role": "assistant", "content": "stone light " * 40}]
    build_sft_cache(
        [long_chat],
        str(root / "sft" / "k"),
        tokenizer=tiny_tokenizer,
        val_frac=0.0,
        seed=0,
        t_max=16,
        truncation=truncation,
    )
    rc, out, _ = cache_cli(capsys, "inspect", root / "sft" / "k", "--n", 1)
    n = len(render_chat_sft(tiny_tokenizer, long_chat)[0])
    reply = len(tiny_tokenizer.encode("the river " * 40)) + 2  # the assistant block starts after the user's
    lo = n - 17 if truncation == "tail" else reply  # the reply alone is longer than 17: prompt keeps its head
    assert f"longer than T_max+1 = 17: the dataset keeps tokens {lo:,}..{lo + 17:,} ({truncation})" in out


def test_inspect_pretrain_windows_decode_to_source_text_and_follow_the_seed(tree, capsys):
    rc, out, _ = cache_cli(capsys, "inspect", tree / "pretrain" / "x", "--n", 4, "--tokens", 40, "--seed", 1)
    assert rc == 0 and out.count("--- [") == 4
    samples = out.split("--- [")[1:]
    for sample in samples:
        text = sample.split("\n", 1)[1].rstrip("\n")
        for piece in text.split("<|eot|>"):
            assert any(piece in doc for doc in PRETRAIN_DOCS), piece
    assert cache_cli(capsys, "inspect", tree / "pretrain" / "x", "--n", 4, "--tokens", 40, "--seed", 1)[1] == out
    assert cache_cli(capsys, "inspect", tree / "pretrain" / "x", "--n", 4, "--tokens", 40, "--seed", 2)[1] != out
    rc, out, _ = cache_cli(capsys, "inspect", tree / "pretrain" / "x" / "val", "--n", 1)
    assert "pretrain/x val:" in out and "--- [1] val/shard_00000.bin" in out


def test_inspect_stream_windows_are_stream_text(tree, capsys):
    rc, out, _ = cache_cli(capsys, "inspect", tree / "streams" / "wiki_val.meta.json", "--n", 2, "--bytes", 50)
    assert rc == 0 and out.count("--- [") == 2
    for sample in out.split("--- [")[1:]:
        text = sample.split("\n", 1)[1].rstrip("\n").strip("\ufffd")  # a window may cut a character
        assert text in STREAM_TEXT


def test_inspect_refuses_ambiguous_or_mismatched_input(tree, capsys, tmp_path):
    rc, _, err = cache_cli(capsys, "inspect", tree)
    assert rc == 1 and "holds 6 artifacts; inspect one of them" in err
    rc, _, err = cache_cli(capsys, "inspect", tree / "pretrain" / "off")
    assert rc == 1 and "not built" in err
    train_sentencepiece(tiny_corpus(200, seed=9), tmp_path / "other.model", vocab_size=380, num_threads=1)
    rc, _, err = cache_cli(capsys, "inspect", tree / "sft" / "y", "--tokenizer", tmp_path / "other.model")
    assert rc == 1 and "would decode to the wrong text" in err and err.count("\n") == 1


def test_inspect_refuses_a_stream_left_unbuilt(tree, capsys):
    from niels_gpt.layout import STREAM_FORMAT_VERSION
    from niels_gpt.meta import not_built, write_meta

    meta = not_built("streams", reason="shorter than T+1", format_version=STREAM_FORMAT_VERSION, seed=0)
    write_meta(tree / "streams" / "wiki_val.meta.json", meta)
    rc, _, err = cache_cli(capsys, "inspect", tree / "streams" / "wiki_val.meta.json")
    assert rc == 1 and "not built (shorter than T+1); nothing to inspect" in err
