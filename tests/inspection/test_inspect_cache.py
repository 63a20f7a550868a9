"""`info` and `inspect`: numbers measured from the files agree with meta; samples decode to the source text."""

from __future__ import annotations

import json

import numpy as np
import pytest

from niels_gpt.cache.cli import main
from niels_gpt.command_line import run_cli
from niels_gpt.inspection.info_tables import human_bytes
from niels_gpt.sft.writer import build_sft_cache
from niels_gpt.tokenizer import train_sentencepiece
from tests.support.cache_tree import KNOWN_CHAT, PRETRAIN_DOCS, STREAM_TEXT, build_tree, install_tokenizer
from tests.support.corpus import tiny_corpus


@pytest.fixture
def tree(tmp_path, tiny_tokenizer, tiny_tokenizer_path):
    return build_tree(tmp_path, tiny_tokenizer, tiny_tokenizer_path)


def cli(capsys, *args) -> tuple[int, str, str]:
    rc = run_cli(main, [*map(str, args)])
    out = capsys.readouterr()
    return rc, out.out, out.err


def row(out: str, *starts: str) -> list[str]:
    """The cells of the first table row beginning with `starts` (cells are separated by 2+ spaces)."""
    import re

    for line in out.splitlines():
        cells = re.split(r"\s{2,}", line.strip())
        if cells[: len(starts)] == list(starts):
            return cells
    raise AssertionError(f"no row {starts} in:\n{out}")


def meta_of(path) -> dict:
    return json.loads((path / "meta.json").read_text())


def test_info_numbers_match_meta(tree, capsys, tiny_tokenizer):
    rc, out, _ = cli(capsys, "info", tree)
    assert rc == 0
    pre, sft = meta_of(tree / "pretrain/x"), meta_of(tree / "sft/y")
    for split in ("train", "val"):
        cells = row(out, "pretrain/x", split, "yes")
        assert cells[3] == f"{pre[f'{split}_tokens']:,}"
        assert cells[4] == f"{pre[f'{split}_documents']:,} docs"
        assert cells[6] == str(len(pre["shards"][split]))
        assert cells[7] == tiny_tokenizer.sha256[:8]
        cells = row(out, "sft/y", split, "yes")
        assert cells[3] == f"{sft[f'{split}_tokens']:,}" and cells[4] == f"{sft[f'{split}_examples']:,} examples"
        stats = sft["splits"][split]
        share = 100 * stats["num_label_tokens"] / stats["num_tokens"]
        assert (
            row(out, "sft/y", split, f"{stats['num_examples']:,}")[3] == f"{stats['num_label_tokens']:,} ({share:.1f}%)"
        )
    assert row(out, "pretrain/off", "-")[2] == "no" and "pretrain/off: not built: sources.off.enabled is false" in out
    assert row(out, "tokenizer", "-", "yes")[4] == f"{tiny_tokenizer.vocab_size:,} ids"
    n_bytes = len(STREAM_TEXT[: len(STREAM_TEXT) // 2].encode("utf-8"))
    assert row(out, "streams/wiki_train", "train", "yes")[5] == human_bytes(n_bytes) == f"{n_bytes / 1000:.1f} KB"


def test_info_json_has_the_same_numbers_as_the_tables(tree, capsys, tiny_tokenizer):
    rc, out, _ = cli(capsys, "info", tree, "--json")
    doc = json.loads(out)
    assert rc == 0 and doc["tokenizer"]["sha256"] == tiny_tokenizer.sha256
    rows = {(r["artifact"], r["split"]): r for r in doc["rows"]}
    pre, sft = meta_of(tree / "pretrain/x"), meta_of(tree / "sft/y")
    for split in ("train", "val"):
        assert rows["pretrain/x", split]["tokens"] == pre[f"{split}_tokens"]
        assert rows["pretrain/x", split]["extra"]["documents"] == pre[f"{split}_documents"]
        assert rows["sft/y", split]["extra"]["labels"] == sft["splits"][split]["num_label_tokens"]
    assert rows["pretrain/off", "-"]["built"] == "no" and "not built" in rows["pretrain/off", "-"]["note"]
    _, table, _ = cli(capsys, "info", tree)
    assert row(table, "sft/y", "train", "yes")[3] == f"{rows['sft/y', 'train']['tokens']:,}"


def section(out: str, title: str) -> str:
    return out.split(f"\n{title}\n", 1)[1]


def test_info_shows_cuts_drops_and_cleaning(tree, capsys):
    rc, out, _ = cli(capsys, "info", tree)
    stats = meta_of(tree / "sft/y")["splits"]
    for split in ("train", "val"):
        cells = row(section(out, "sft"), "sft/y", split)
        cut, dropped = stats[split]["cut"]["end"], stats[split]["dropped"]["no_target_in_window"]
        detail = f" (no_target_in_window {dropped})" if dropped else ""
        assert cells[-2:] == [f"{cut} (end {cut}); T_max 64, head", f"{dropped}{detail}"]
    assert stats["train"]["cut"]["end"] > 0 and stats["train"]["num_dropped"] + stats["val"]["num_dropped"] == 4
    cleaning = section(out, "cleaning (from meta.json)")
    assert row(cleaning, "pretrain/x") == ["pretrain/x", "2", "2 books, 345 chars", "-"]
    assert row(cleaning, "streams/wiki_train")[1:] == ["0", "-", "-"]
    assert row(cleaning, "sft/y")[1:] == ["-", "-", "-"]


def test_info_pretrain_documents_empty_docs_and_coverage(tree, capsys, tiny_tokenizer):
    rc, out, _ = cli(capsys, "info", tree / "pretrain" / "x")
    cells = row(section(out, "pretrain"), "pretrain/x", "train")
    docs = meta_of(tree / "pretrain/x")["train_documents"]
    assert cells[2] == f"{docs:,}" and cells[3] == "0"  # the writer never writes an empty document
    assert cells[4] == f"{2500 / docs:,.1f}"  # mean document length: the train budget is 2,500 tokens
    train = np.concatenate([np.fromfile(p, dtype="<u2") for p in sorted((tree / "pretrain/x/train").glob("*.bin"))])
    assert cells[5] == f"{100 * len(np.unique(train)) / tiny_tokenizer.vocab_size:.1f}%"
    shard = tree / "pretrain/x/train/shard_00000.bin"
    tokens = np.fromfile(shard, dtype="<u2")
    first = int(np.flatnonzero(tokens == tiny_tokenizer.eot_id)[0])
    tokens[first + 1] = tiny_tokenizer.eot_id  # an empty document
    tokens.tofile(shard)
    rc, out, _ = cli(capsys, "info", tree / "pretrain" / "x")
    assert row(section(out, "pretrain"), "pretrain/x", "train")[2:4] == [f"{docs + 1:,}", "1"]


def test_info_marks_caches_built_with_another_tokenizer(tree, capsys, tmp_path):
    other = train_sentencepiece(tiny_corpus(200, seed=9), tmp_path / "other.model", vocab_size=380, num_threads=1)
    install_tokenizer(tree, str(tmp_path / "other.model"), other)
    rc, out, _ = cli(capsys, "info", tree)
    assert (
        rc == 0
        and row(out, "pretrain/x", "train")[-1].endswith(" !=")
        and row(out, "tokenizer")[-1] == other.sha256[:8]
    )


def test_info_caps_the_coverage_sample(tree, capsys, monkeypatch):
    from niels_gpt.inspection import info as cache_stats

    monkeypatch.setattr(cache_stats, "COVERAGE_SAMPLE_TOKENS", 100)
    rc, out, _ = cli(capsys, "info", tree / "pretrain" / "x")
    assert row(section(out, "pretrain"), "pretrain/x", "train")[5].endswith(" (sample of 100)")


def test_inspect_sft_marks_the_loss_active_span(tmp_path, capsys, tiny_tokenizer, tiny_tokenizer_path):
    root = tmp_path / "cache"
    install_tokenizer(root, tiny_tokenizer_path, tiny_tokenizer)
    build_sft_cache(
        [KNOWN_CHAT, KNOWN_CHAT[1:3]], str(root / "sft" / "k"), tokenizer=tiny_tokenizer, val_frac=0.0, seed=0
    )
    rc, out, _ = cli(capsys, "inspect", root / "sft" / "k", "--example", 0, "--color", "never")
    assert rc == 0
    assert (
        "<|sys|>be brief<|eot|><|usr|>hello there<|eot|><|asst|>[[general kenobi<|eot|>]]"
        "<|usr|>and then?<|eot|><|asst|>[[the river\nopens<|eot|>]]"
    ) in out
    n_active = len(tiny_tokenizer.encode("general kenobi")) + len(tiny_tokenizer.encode("the river\nopens")) + 2
    assert "example 0 of 2: " in out and f", {n_active} loss-active" in out
    rc, out, _ = cli(capsys, "inspect", root / "sft" / "k" / "train_tokens.bin", "--example", 1, "--color", "always")
    assert "<|usr|>hello there<|eot|><|asst|>\033[32mgeneral kenobi<|eot|>\033[0m" in out


@pytest.mark.parametrize("truncation", ["tail", "prompt"])
def test_inspect_sft_says_how_a_long_example_is_cut(tmp_path, capsys, tiny_tokenizer, tiny_tokenizer_path, truncation):
    from niels_gpt.chat_template import render_chat_sft

    root = tmp_path / "cache"
    install_tokenizer(root, tiny_tokenizer_path, tiny_tokenizer)
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
    rc, out, _ = cli(capsys, "inspect", root / "sft" / "k", "--n", 1)
    n = len(render_chat_sft(tiny_tokenizer, long_chat)[0])
    reply = len(tiny_tokenizer.encode("the river " * 40)) + 2  # the assistant block starts after the user's
    lo = n - 17 if truncation == "tail" else reply  # the reply alone is longer than 17: prompt keeps its head
    assert f"longer than T_max+1 = 17: the dataset keeps tokens {lo:,}..{lo + 17:,} ({truncation})" in out


def test_inspect_pretrain_windows_decode_to_source_text_and_follow_the_seed(tree, capsys):
    rc, out, _ = cli(capsys, "inspect", tree / "pretrain" / "x", "--n", 4, "--tokens", 40, "--seed", 1)
    assert rc == 0 and out.count("--- [") == 4
    samples = out.split("--- [")[1:]
    for sample in samples:
        text = sample.split("\n", 1)[1].rstrip("\n")
        for piece in text.split("<|eot|>"):
            assert any(piece in doc for doc in PRETRAIN_DOCS), piece
    assert cli(capsys, "inspect", tree / "pretrain" / "x", "--n", 4, "--tokens", 40, "--seed", 1)[1] == out
    assert cli(capsys, "inspect", tree / "pretrain" / "x", "--n", 4, "--tokens", 40, "--seed", 2)[1] != out
    rc, out, _ = cli(capsys, "inspect", tree / "pretrain" / "x" / "val", "--n", 1)
    assert "pretrain/x val:" in out and "--- [1] val/shard_00000.bin" in out


def test_inspect_stream_windows_are_stream_text(tree, capsys):
    rc, out, _ = cli(capsys, "inspect", tree / "streams" / "wiki_val.meta.json", "--n", 2, "--bytes", 50)
    assert rc == 0 and out.count("--- [") == 2
    for sample in out.split("--- [")[1:]:
        text = sample.split("\n", 1)[1].rstrip("\n").strip("\ufffd")  # a window may cut a character
        assert text in STREAM_TEXT


def test_inspect_refuses_ambiguous_or_mismatched_input(tree, capsys, tmp_path):
    rc, _, err = cli(capsys, "inspect", tree)
    assert rc == 1 and "holds 6 artifacts; inspect one of them" in err
    rc, _, err = cli(capsys, "inspect", tree / "pretrain" / "off")
    assert rc == 1 and "not built" in err
    train_sentencepiece(tiny_corpus(200, seed=9), tmp_path / "other.model", vocab_size=380, num_threads=1)
    rc, _, err = cli(capsys, "inspect", tree / "sft" / "y", "--tokenizer", tmp_path / "other.model")
    assert rc == 1 and "would decode to the wrong text" in err and err.count("\n") == 1
