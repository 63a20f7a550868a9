"""The leakage audit: a planted duplicate is found and named far above the baseline; the gate fails with it."""

from __future__ import annotations

import numpy as np
import pytest

from niels_gpt.report.leakage import LeakageError, audit, check_gate
from tests.support.cache_tree import PLANTED_DOC, PLANTED_SEGMENT, SHARED_TURNS, WIKI_SEGMENTS, WIKI_VAL

N = {"n_tokens": 13, "n_bytes": 50}


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


def test_fractions_count_ngram_positions_not_distinct_ngrams(planted_tree, tiny_tokenizer):
    """A val n-gram that occurs twice counts twice: the fraction is a share of the val text."""
    result = audit(planted_tree, **N, top=0, tokenizer=None, log=lambda _: None)
    wiki = val_row(result, "pretrain/wikitext")
    assert wiki["top"] == []
    tokens = np.concatenate([tiny_tokenizer.encode(d) for d in WIKI_VAL]).size
    assert wiki["ngrams"] <= tokens


def sft_examples(folder, split: str) -> list[np.ndarray]:
    """The examples of an SFT split, read with numpy alone."""
    tokens = np.fromfile(folder / f"{split}_tokens.bin", dtype="<u2")
    offsets = np.load(folder / f"{split}_idx.npy").tolist()
    return [tokens[a:b] for a, b in zip(offsets, offsets[1:] + [len(tokens)])]


def brute_force(cache, tokenizer, n: int, *, exclude_specials: bool = True) -> dict:
    """{val name: (n-grams, {train name: fraction})} by definition: every window of n ids inside one val
    example (holding no special id, unless `exclude_specials` is False), looked up among every window of
    the train split's ids."""
    specials = set(tokenizer.special_ids.values())
    sources = sorted(p.name for p in (cache / "sft").iterdir())
    trains = {}
    for s in sources:
        ids = np.concatenate(sft_examples(cache / "sft" / s, "train")).tolist()
        trains[f"sft/{s}"] = {tuple(ids[i : i + n]) for i in range(len(ids) - n + 1)}
    out = {}
    for s in sources:
        grams = [
            tuple(ex[i : i + n].tolist())
            for ex in sft_examples(cache / "sft" / s, "val")
            for i in range(len(ex) - n + 1)
            if not (exclude_specials and specials & set(ex[i : i + n].tolist()))
        ]
        if grams:
            out[f"sft/{s}"] = (
                len(grams),
                {t: round(sum(g in grams_t for g in grams) / len(grams), 6) for t, grams_t in trains.items()},
            )
    return out


def test_ngrams_holding_a_special_token_are_never_counted(special_tree, tiny_tokenizer):
    """Chats of primer and dolly15k share only short turns: their text meets only across the specials
    between turns. The audit agrees exactly with a brute-force count that leaves out every n-gram holding
    a special id; counting those would find dolly15k text in primer val."""
    assert all(len(tiny_tokenizer.encode(text)) < 13 for _, text in SHARED_TURNS)
    result = audit(special_tree, **N, top=0, log=lambda _: None)
    want = brute_force(special_tree, tiny_tokenizer, 13)
    got = {v["name"]: (v["ngrams"], v["fraction"]) for v in result["val_splits"]}
    assert got == want and list(want) == ["sft/primer"]
    assert want["sft/primer"][0] > 0 and want["sft/primer"][1]["sft/dolly15k"] == 0.0
    across = brute_force(special_tree, tiny_tokenizer, 13, exclude_specials=False)["sft/primer"]
    assert across[0] > want["sft/primer"][0] and across[1]["sft/dolly15k"] > 0  # what a count across specials finds


def test_the_val_side_hashed_chunk_by_chunk_gives_the_same_audit(planted_tree, special_tree, monkeypatch):
    """Chunks of 7 positions (n-grams across every chunk boundary, units and specials cut by them) give the
    audit of one chunk per split, to the last n-gram and unit."""
    from niels_gpt.report import leakage

    def run(tree):
        return audit(tree, **N, top=3, tokenizer=None, log=lambda _: None)

    whole = {tree: run(tree) for tree in (planted_tree, special_tree)}
    assert any(v["ngrams"] > 7 for r in whole.values() for v in r["val_splits"])
    monkeypatch.setattr(leakage, "VAL_CHUNK", 7)
    for tree, want in whole.items():
        assert run(tree) == want
