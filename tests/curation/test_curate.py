"""curate -> apply -> certify on small raw caches written by the real writers (no Snakemake)."""

import json
from functools import partial

import numpy as np
import pytest

from niels_gpt.config import prepare_config
from niels_gpt.curation.apply import apply_pretrain, apply_sft
from niels_gpt.curation.benchmarks import BenchmarkError
from niels_gpt.curation.certificate import CertificateError, certify
from niels_gpt.curation.curate import curate, decisions_path
from niels_gpt.layout import pretrain_dir, sft_dir
from niels_gpt.pretrain.writer import build_pretrain_cache_presplit
from niels_gpt.report.ngrams import rolling_hashes
from niels_gpt.sft.writer import build_sft_cache
from niels_gpt.token_files import TOKEN_DTYPE, DiskSequence, list_shards
from tests.support.planted import _vocabulary


def _docs(n: int, seed: int = 5) -> list[str]:
    """n unrelated documents of 150..400 words drawn uniformly from 30,000 made-up words."""
    rng = np.random.default_rng(seed)
    vocab = _vocabulary(rng, 30_000)
    return [" ".join(vocab[i] for i in rng.integers(0, len(vocab), rng.integers(150, 400))) for _ in range(n)]


DOCS = _docs(12)


def _near_copy(text: str) -> str:
    """About 1 word in 100 replaced: shingle Jaccard ~0.9."""
    words = text.split()
    return " ".join("zzqx" if i % 100 == 50 else w for i, w in enumerate(words))


def _pretrain(cache, source, train, val, tok, budgets=(None, None)):
    out = pretrain_dir(f"{cache}/curation/raw", source)
    build_pretrain_cache_presplit(
        train,
        val,
        out,
        tokenizer=tok,
        max_train_tokens=budgets[0],
        max_val_tokens=budgets[1],
        seed=0,
        num_threads=1,
        provenance={"source": source},
    )
    return out


def _sft(cache, source, chats, tok):
    out = sft_dir(f"{cache}/curation/raw", source)
    build_sft_cache(chats, out, tokenizer=tok, val_frac=0.5, seed=0, num_threads=1, source=source)
    return out


def _run(cache, raw, tok_path, **overrides):
    cfg = prepare_config({"cache_dir": str(cache), **overrides}, source="test")
    summary = curate(cfg, cache_dir=str(cache), raw_dirs=list(raw.values()), tokenizer_path=tok_path, log=print)
    metas = {}
    for (family, source), folder in raw.items():
        decisions = decisions_path(cache, family, source)
        if family == "pretrain":
            metas[source] = apply_pretrain(
                folder, pretrain_dir(cache, source), decisions, shard_bytes=1 << 20, settings={}
            )
        else:
            metas[source] = apply_sft(folder, sft_dir(cache, source), decisions, settings={})
    return cfg, summary, metas


def _ids(cache, source, split="train"):
    seq = DiskSequence(list_shards(f"{pretrain_dir(cache, source)}/{split}"), TOKEN_DTYPE)
    return seq.read(0, len(seq))


def _shares(tok, text, ids, n=13) -> bool:
    probe = rolling_hashes(np.array(tok.encode(text), dtype=np.uint16), n)
    return bool(np.isin(probe, rolling_hashes(ids, n)).any())


def test_a_val_text_inside_a_train_document_is_cut_out_and_the_certificate_holds(
    tmp_path, tiny_tokenizer, tiny_tokenizer_path
):
    val_text = DOCS[0]
    host = DOCS[1] + "\n\n" + val_text + "\n\n" + DOCS[2]
    raw = {
        ("pretrain", "wikitext"): _pretrain(tmp_path, "wikitext", [DOCS[3]], [val_text], tiny_tokenizer),
        ("pretrain", "fineweb_edu"): _pretrain(tmp_path, "fineweb_edu", [host, DOCS[4]], [DOCS[5]], tiny_tokenizer),
    }
    _, summary, metas = _run(tmp_path, raw, tiny_tokenizer_path)
    ids = _ids(tmp_path, "fineweb_edu")
    assert not _shares(tiny_tokenizer, val_text, ids)
    assert _shares(tiny_tokenizer, DOCS[1], ids) and _shares(tiny_tokenizer, DOCS[2], ids)  # the rest is kept
    assert metas["fineweb_edu"]["train_documents"] == 3  # two pieces + the other document
    counts = metas["fineweb_edu"]["curation"]["splits"]["train"]["counts"]
    assert counts["contamination_cut"]["units"] == 1 and counts["contamination_cut"]["tokens"] > 100
    summary_file = tmp_path / "curation" / "summary.json"
    result = certify(
        tmp_path,
        n=13,
        benchmarks=[],
        tokenizer_path=tiny_tokenizer_path,
        summary_file=str(summary_file),
        out=str(tmp_path / "certificate.json"),
        table=str(tmp_path / "curation_table.html"),
    )
    assert result["holds"] and {p["shared_ngrams"] for p in result["pairs"]} == {0}
    assert result["curation"] == summary
    page = (tmp_path / "curation_table.html").read_text()
    assert "pretrain/fineweb_edu" in page and "contamination_cut" in page and "Certificate: holds" in page


def test_without_decontamination_the_certificate_names_the_pair(tmp_path, tiny_tokenizer, tiny_tokenizer_path):
    raw = {
        ("pretrain", "wikitext"): _pretrain(tmp_path, "wikitext", [DOCS[1] + " " + DOCS[0]], [DOCS[0]], tiny_tokenizer)
    }
    _run(tmp_path, raw, tiny_tokenizer_path, decontamination={"enabled": False})
    run = partial(certify, tmp_path, n=13, benchmarks=[], tokenizer_path=tiny_tokenizer_path, summary_file=None)
    with pytest.raises(CertificateError, match="pretrain/wikitext train shares .* 13-grams with pretrain/wikitext val"):
        run(out=str(tmp_path / "c.json"))
    assert not (tmp_path / "c.json").exists()
    assert not run(out=str(tmp_path / "c.json"), required=False)["holds"]


def test_duplicates_across_sources_keep_val_then_the_source_priority_copy(
    tmp_path, tiny_tokenizer, tiny_tokenizer_path
):
    raw = {
        ("pretrain", "fineweb_edu"): _pretrain(
            tmp_path, "fineweb_edu", [DOCS[0], DOCS[1], DOCS[6]], [DOCS[2]], tiny_tokenizer
        ),
        ("pretrain", "wikitext"): _pretrain(
            tmp_path, "wikitext", [DOCS[0].upper(), DOCS[3]], [_near_copy(DOCS[6])], tiny_tokenizer
        ),
    }
    _, summary, metas = _run(tmp_path, raw, tiny_tokenizer_path, decontamination={"enabled": False})
    # DOCS[0]: exact (case ignored), fineweb_edu first in the registry; DOCS[6]: near copy of a val document
    assert summary["caches"]["pretrain/wikitext"]["train"]["counts"]["exact_duplicate"]["units"] == 1
    assert summary["caches"]["pretrain/fineweb_edu"]["train"]["counts"]["near_duplicate"]["units"] == 1
    assert metas["fineweb_edu"]["train_documents"] == 2 and metas["wikitext"]["train_documents"] == 1
    _, summary, _ = _run(
        tmp_path, raw, tiny_tokenizer_path, decontamination={"enabled": False}, dedup={"source_priority": ["wikitext"]}
    )
    assert summary["caches"]["pretrain/fineweb_edu"]["train"]["counts"]["exact_duplicate"]["units"] == 1
    assert "exact_duplicate" not in summary["caches"]["pretrain/wikitext"]["train"]["counts"]


@pytest.mark.parametrize(
    "dedup, removed",
    [
        ({}, 1),
        ({"near": False}, 0),
        ({"jaccard_threshold": 0.97}, 0),
        ({"bands": 1, "rows": 256}, 0),  # one band of 256 bins: a 0.9 pair almost never agrees on all
        ({"enabled": False}, 0),
    ],
)
def test_near_duplicate_settings(tmp_path, tiny_tokenizer, tiny_tokenizer_path, dedup, removed):
    raw = {
        ("pretrain", "wikitext"): _pretrain(
            tmp_path, "wikitext", [DOCS[0], _near_copy(DOCS[0])], [DOCS[1]], tiny_tokenizer
        )
    }
    _, summary, _ = _run(tmp_path, raw, tiny_tokenizer_path, decontamination={"enabled": False}, dedup=dedup)
    counts = summary["caches"]["pretrain/wikitext"]["train"]["counts"]
    assert counts.get("near_duplicate", {}).get("units", 0) == removed


def test_shingle_words_one_compares_bags_of_words(tmp_path, tiny_tokenizer, tiny_tokenizer_path):
    shuffled = " ".join(sorted(DOCS[0].split()))
    raw = {("pretrain", "wikitext"): _pretrain(tmp_path, "wikitext", [DOCS[0], shuffled], [DOCS[1]], tiny_tokenizer)}
    for shingle_words, removed in ((5, 0), (1, 1)):
        _, summary, _ = _run(
            tmp_path,
            raw,
            tiny_tokenizer_path,
            decontamination={"enabled": False},
            dedup={"shingle_words": shingle_words},
        )
        assert (
            summary["caches"]["pretrain/wikitext"]["train"]["counts"].get("near_duplicate", {}).get("units", 0)
            == removed
        )


def test_budget_stays_exact_after_removals_and_a_shortfall_is_recorded(tmp_path, tiny_tokenizer, tiny_tokenizer_path):
    train = [DOCS[0], DOCS[0], DOCS[1], DOCS[2], DOCS[3]]
    n0 = len(tiny_tokenizer.encode(DOCS[0])) + 1
    raw = {
        ("pretrain", "fineweb_edu"): _pretrain(
            tmp_path, "fineweb_edu", train, [DOCS[4]], tiny_tokenizer, budgets=(3 * n0, None)
        )
    }
    sources = {"fineweb_edu": {"max_train_tokens": 2 * n0, "max_val_tokens": None}}
    _, summary, metas = _run(tmp_path, raw, tiny_tokenizer_path, sources=sources)
    assert metas["fineweb_edu"]["train_tokens"] == 2 * n0 == len(_ids(tmp_path, "fineweb_edu"))
    assert metas["fineweb_edu"]["curation"]["splits"]["train"]["shortfall_tokens"] == 0
    sources["fineweb_edu"]["max_train_tokens"] = 3 * n0  # the margin was used up: one copy removed, 3 n0 read
    _, summary, metas = _run(tmp_path, raw, tiny_tokenizer_path, sources=sources)
    rec = metas["fineweb_edu"]["curation"]["splits"]["train"]
    assert rec["shortfall_tokens"] == 3 * n0 - metas["fineweb_edu"]["train_tokens"] > 0


def test_min_piece_tokens_drops_short_stretches(tmp_path, tiny_tokenizer, tiny_tokenizer_path):
    host = "tiny start " + DOCS[0] + " " + DOCS[4]
    raw = {("pretrain", "wikitext"): _pretrain(tmp_path, "wikitext", [host, DOCS[2]], [DOCS[0]], tiny_tokenizer)}
    _, _, metas = _run(tmp_path, raw, tiny_tokenizer_path, decontamination={"min_piece_tokens": 100})
    assert metas["wikitext"]["train_documents"] == 2  # the short start is dropped, DOCS[4] stays
    assert metas["wikitext"]["curation"]["splits"]["train"]["counts"]["contamination_cut"]["units"] == 1
    _, _, metas = _run(tmp_path, raw, tiny_tokenizer_path, decontamination={"min_piece_tokens": 1})
    assert metas["wikitext"]["train_documents"] == 3
    ids = _ids(tmp_path, "wikitext")
    assert _shares(tiny_tokenizer, DOCS[4], ids) and not _shares(tiny_tokenizer, DOCS[0], ids)


def test_benchmark_files_are_protected_and_bad_ones_named(tmp_path, tiny_tokenizer, tiny_tokenizer_path):
    bench = tmp_path / "eval.jsonl"
    bench.write_text(json.dumps({"question": DOCS[5], "choices": ["a", "b"]}) + "\n", encoding="utf-8")
    raw = {
        ("pretrain", "wikitext"): _pretrain(
            tmp_path, "wikitext", [DOCS[1] + " " + DOCS[5], DOCS[2]], [DOCS[3]], tiny_tokenizer
        )
    }
    _run(tmp_path, raw, tiny_tokenizer_path, decontamination={"benchmarks": [str(bench)]})
    assert not _shares(tiny_tokenizer, DOCS[5], _ids(tmp_path, "wikitext"))
    result = certify(
        tmp_path,
        n=13,
        benchmarks=[str(bench)],
        tokenizer_path=tiny_tokenizer_path,
        summary_file=None,
        out=str(tmp_path / "c.json"),
    )
    assert result["holds"] and any(p["protected"].startswith("benchmark ") for p in result["pairs"])
    bench.write_text('{"ok": "x"}\nnot json\n', encoding="utf-8")
    with pytest.raises(BenchmarkError, match=r"eval.jsonl, line 2: not JSON"):
        _run(tmp_path, raw, tiny_tokenizer_path, decontamination={"benchmarks": [str(bench)]})


def _chat(q, a):
    return [{"role": "user", "content": q}, {"role": "assistant", "content": a}]


def test_sft_exact_duplicates_across_sources_and_contaminated_examples_are_removed(
    tmp_path, tiny_tokenizer, tiny_tokenizer_path
):
    chats = [_chat(f"question {i}", DOCS[i % 12][:400]) for i in range(8)]
    raw = {
        ("sft", "dolly15k"): _sft(tmp_path, "dolly15k", chats, tiny_tokenizer),
        ("sft", "oasst1"): _sft(tmp_path, "oasst1", chats[:4], tiny_tokenizer),
    }
    _, summary, metas = _run(tmp_path, raw, tiny_tokenizer_path)
    total = sum(m["train_examples"] + m["val_examples"] for m in metas.values())
    assert total < 12
    o = summary["caches"]["sft/oasst1"]
    assert sum(c["units"] for s in o.values() for c in s["counts"].values()) >= 2
    assert metas["oasst1"]["splits"]["train"]["num_examples"] == metas["oasst1"]["train_examples"]


def test_decisions_do_not_depend_on_the_chunk_size(tmp_path, tiny_tokenizer, tiny_tokenizer_path, monkeypatch):
    from niels_gpt.curation import curate as curate_module
    from niels_gpt.curation import raw as raw_module

    host = DOCS[1] + " " + DOCS[0]
    raw = {
        ("pretrain", "wikitext"): _pretrain(
            tmp_path, "wikitext", [host, DOCS[2], DOCS[2].lower()], [DOCS[0]], tiny_tokenizer
        ),
        ("sft", "primer"): _sft(tmp_path, "primer", [_chat(f"q {i}", DOCS[i][:300]) for i in range(6)], tiny_tokenizer),
    }
    files = [decisions_path(tmp_path, "pretrain", "wikitext"), decisions_path(tmp_path, "sft", "primer")]
    _run(tmp_path, raw, tiny_tokenizer_path)
    whole = [open(f, "rb").read() for f in files]
    monkeypatch.setattr(raw_module, "CHUNK_TOKENS", 50)  # every document read across several chunks
    monkeypatch.setattr(curate_module, "SCAN_TOKENS", 50)  # and scanned in several
    _run(tmp_path, raw, tiny_tokenizer_path)
    assert [open(f, "rb").read() for f in files] == whole
    assert json.loads(whole[0])["splits"]["train"]["counts"]["exact_duplicate"]["units"] == 1


def test_max_ngram_units_waives_boilerplate_shared_by_many_units(tmp_path, tiny_tokenizer, tiny_tokenizer_path):
    phrase = "let me know if you would like another example of this kind of thing today"
    train = [f"{DOCS[i]} {phrase}" for i in range(1, 12)]  # the phrase in 11 train documents and 1 val document
    raw = {("pretrain", "wikitext"): _pretrain(tmp_path, "wikitext", train, [DOCS[0] + " " + phrase], tiny_tokenizer)}
    waived = tmp_path / "curation" / "waived_ngrams.npy"

    def run(limit):
        _, summary, metas = _run(tmp_path, raw, tiny_tokenizer_path, decontamination={"max_ngram_units": limit})
        cert = certify(
            tmp_path,
            n=13,
            benchmarks=[],
            tokenizer_path=tiny_tokenizer_path,
            summary_file=None,
            out=str(tmp_path / "c.json"),
            waived_file=str(waived),
        )
        return summary, metas["wikitext"]["curation"]["splits"]["train"]["counts"], cert

    summary, counts, cert = run(10)  # 12 units hold the phrase's n-grams: boilerplate, not protected
    assert summary["waived_ngrams"] > 0 and cert["holds"]
    # at most a chance 13-gram across a document's last letters and the phrase (shared by 2 units) is cut
    assert counts.get("contamination_cut", {"tokens": 0})["tokens"] <= 13
    assert _shares(tiny_tokenizer, phrase, _ids(tmp_path, "wikitext"))
    summary, counts, cert = run(None)  # every n-gram protected: the phrase is cut from all 11
    assert summary["waived_ngrams"] == 0 and counts["contamination_cut"]["units"] == 11 and cert["holds"]
    assert not _shares(tiny_tokenizer, phrase, _ids(tmp_path, "wikitext"))
    summary, counts, _ = run(12)  # held by exactly 12 units: not more than 12, still protected
    assert summary["waived_ngrams"] == 0 and counts["contamination_cut"]["units"] == 11


def _val_hashes_at_once(s, removed, budget, n, specials):
    """The val side computed over whole-split arrays (the rule _val_hashes computes block by block)."""
    from niels_gpt.report.ngrams import windows_touching

    data = s.sequence().read(0, len(s.sequence()))
    ends = np.flatnonzero(data == s.meta["eot_id"]) + 1
    offsets = np.concatenate(([0], ends[ends < len(data)]))
    bounds = np.append(offsets, len(data))
    gone = np.zeros(len(data), dtype=bool)
    for u in removed:
        gone[bounds[u] : bounds[u + 1]] = True
    kept = np.flatnonzero(~gone)
    if budget is not None and len(kept) > budget:
        gone[kept[budget] :] = True
    valid = np.flatnonzero(~windows_touching(specials[data] | gone, n))
    return rolling_hashes(data, n)[valid], np.searchsorted(offsets, valid, side="right") - 1


@pytest.mark.parametrize("block", [7, 64, 1 << 20])
@pytest.mark.parametrize(("removed", "budget"), [(set(), None), ({1}, None), ({0, 2}, 500), ({1}, 37)])
def test_val_side_block_by_block_is_the_whole_split_rule(tmp_path, tiny_tokenizer, monkeypatch, block, removed, budget):
    from pathlib import Path

    from niels_gpt.curation import curate as curate_module
    from niels_gpt.curation.decontaminate import special_table
    from niels_gpt.curation.raw import ordered_splits

    folder = _pretrain(tmp_path, "wikitext", [DOCS[5]], [DOCS[0], DOCS[1], DOCS[2], DOCS[3]], tiny_tokenizer)
    s = next(x for x in ordered_splits({("pretrain", "wikitext", None): Path(folder)}, None) if x.split == "val")
    specials = special_table(tiny_tokenizer.special_ids.values())
    monkeypatch.setattr(curate_module, "VAL_BLOCK", block)
    got = curate_module._val_hashes(s, removed, budget, 13, specials)
    want = _val_hashes_at_once(s, removed, budget, 13, specials)
    assert len(want[0]) > 0
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
        assert a.dtype == b.dtype


@pytest.mark.parametrize("block", [1, 3, 7, 1 << 20])
def test_side_counts_block_by_block_count_distinct_units_per_key(monkeypatch, block):
    from niels_gpt.curation import curate as curate_module
    from niels_gpt.curation.decontaminate import protected_index

    rng = np.random.default_rng(block)
    sides = []
    for size in (60, 1, 0, 25):
        units = np.sort(rng.integers(0, 9, size))
        sides.append((rng.integers(1, 12, size).astype(np.uint64), units))
    index = protected_index([h for h, _ in sides])
    want = np.zeros(len(index), dtype=np.int64)
    for h, units in sides:
        for key, _unit in {(int(k), int(u)) for k, u in zip(h, units)}:
            want[np.searchsorted(index.keys, key)] += 1
    monkeypatch.setattr(curate_module, "VAL_BLOCK", block)
    np.testing.assert_array_equal(curate_module._side_counts(index, sides), want)


def test_decisions_and_waived_set_do_not_depend_on_threads_or_scan_chunks(
    tmp_path, tiny_tokenizer, tiny_tokenizer_path, monkeypatch
):
    """The boilerplate count stops counting a key once it is over the limit, as threads report chunks: the
    waived set and every decision are the same with 1 or 3 threads, with 1 or many chunks, and whether the
    count's filters are rebuilt after every key that goes over the limit or never."""
    from niels_gpt.curation import curate as curate_module

    phrase = "let me know if you would like another example of this kind of thing today"
    train = [f"{DOCS[i % 12]} {phrase}" for i in range(1, 24)] + [DOCS[3], _near_copy(DOCS[5])]
    raw = {("pretrain", "wikitext"): _pretrain(tmp_path, "wikitext", train, [DOCS[0] + " " + phrase], tiny_tokenizer)}
    folder = str(raw[("pretrain", "wikitext")])
    files = [decisions_path(tmp_path, "pretrain", "wikitext"), tmp_path / "curation" / "waived_ngrams.npy"]
    cfg = prepare_config({"cache_dir": str(tmp_path), "decontamination": {"max_ngram_units": 3}}, source="test")
    seen = []
    for threads, chunk, refilter in ((1, 1 << 19, 0), (3, 1 << 19, 1 << 30), (3, 40, 1 << 30), (1, 40, 0)):
        monkeypatch.setattr(curate_module, "SCAN_TOKENS", chunk)
        monkeypatch.setattr(curate_module, "REFILTER_RATIO", refilter)
        curate(cfg, cache_dir=str(tmp_path), raw_dirs=[folder], tokenizer_path=tiny_tokenizer_path, num_threads=threads)
        seen.append([open(f, "rb").read() for f in files])
    assert all(s == seen[0] for s in seen)
    decisions = json.loads(seen[0][0])["splits"]["train"]
    assert decisions["counts"]["exact_duplicate"]["units"] >= 11 and len(np.load(files[1])) > 0


@pytest.mark.parametrize("seed", range(5))
def test_touched_units_are_the_units_an_ngram_start_reaches(seed):
    from niels_gpt.curation.curate import _touched_units

    rng = np.random.default_rng(seed)
    size, n = 300, 13
    starts = np.concatenate(([0], np.sort(rng.choice(np.arange(1, size), 40, replace=False))))
    pos = np.sort(rng.choice(size - n + 1, rng.integers(0, 12), replace=False))
    unit_of = np.searchsorted(starts, np.arange(size), side="right") - 1
    want = sorted({int(unit_of[p + i]) for p in pos for i in range(n)})
    assert _touched_units(pos, starts, n).tolist() == want


@pytest.mark.parametrize("seed", range(5))
def test_gathered_units_hold_the_ngrams_of_their_runs_and_no_other(seed):
    from niels_gpt.curation.curate import _gather_units
    from niels_gpt.curation.decontaminate import special_table, unit_ngrams

    rng = np.random.default_rng(seed)
    n, gap = 5, 4
    ids = rng.integers(10, 14, 400).astype(np.uint16)  # 4 ids: many repeated n-grams
    bounds = np.concatenate(([0], np.sort(rng.choice(np.arange(1, 400), 30, replace=False)), [400]))
    units = np.sort(rng.choice(30, rng.integers(0, 20), replace=False))
    got, at = _gather_units(ids, bounds, units, gap)
    for j, u in enumerate(units):
        np.testing.assert_array_equal(got[at[j] : at[j] + bounds[u + 1] - bounds[u]], ids[bounds[u] : bounds[u + 1]])
    runs = np.split(units, np.flatnonzero(np.diff(units) != 1) + 1) if len(units) else []
    specials = special_table([gap])
    want = [unit_ngrams(ids[bounds[r[0]] : bounds[r[-1] + 1]], n, specials) for r in runs]
    want = np.sort(np.concatenate([np.zeros(0, np.uint64), *want]))
    np.testing.assert_array_equal(np.sort(unit_ngrams(got, n, specials)), want)
    assert (got == gap).sum() == len(runs)


@pytest.mark.parametrize("pairs_kept", [0, 1 << 22])
@pytest.mark.parametrize("scan_tokens", [40, 700, 1 << 19])
def test_decontaminating_only_the_touched_units_gives_the_same_cuts(
    tmp_path, tiny_tokenizer, scan_tokens, pairs_kept, monkeypatch
):
    """The second scan over the units the boilerplate count found touched (gathered) cuts exactly what the
    scan of every unit cuts: with units holding only waived n-grams, units holding nothing (whole chunks
    with no hit at small scan chunks) and units holding val text; named by the pairs the count kept, or
    (none kept) by the units the n-grams not yet over the limit touched."""
    from concurrent.futures import ThreadPoolExecutor
    from pathlib import Path

    from niels_gpt.curation import curate as curate_module
    from niels_gpt.curation.decontaminate import protected_index, special_table
    from niels_gpt.curation.raw import ordered_splits
    from niels_gpt.report.ngrams import sorted_unique

    phrase = "let me know if you would like another example of this kind of thing today"
    val = [DOCS[0] + " " + phrase, DOCS[1]]
    quote = " ".join(DOCS[1].split()[40:80])
    train = [f"{DOCS[i]} {phrase}" for i in range(2, 8)] + [DOCS[8], f"{DOCS[9]} {quote} {DOCS[10]}", DOCS[11]]
    train += [f"{quote} {DOCS[3]}", f"{DOCS[4]} {phrase} {quote}", DOCS[10]]
    folder = _pretrain(tmp_path, "wikitext", train, val, tiny_tokenizer)
    splits = ordered_splits({("pretrain", "wikitext", None): Path(folder)}, None)
    specials = special_table(tiny_tokenizer.special_ids.values())
    sides = [curate_module._val_hashes(s, set(), None, 13, specials) for s in splits if s.split == "val"]
    index = protected_index([sorted_unique(h) for h, _ in sides])
    counts = curate_module._side_counts(index, sides)
    monkeypatch.setattr(curate_module, "SCAN_TOKENS", scan_tokens)
    monkeypatch.setattr(curate_module, "PAIRS_KEPT", pairs_kept)
    train_split = next(s for s in splits if s.split == "train")
    with ThreadPoolExecutor(2) as pool:
        entries = curate_module._count_train_units(train_split, index, 13, specials, pool, 4, counts, 3)
        assert any(isinstance(e, tuple) and len(e[0]) for e in entries) == (pairs_kept > 0)
        touched = [curate_module._units_to_scan(e, counts <= 3) for e in entries]
        waived = curate_module._boilerplate(index, counts, 3)
        assert len(waived)
        rest = protected_index([np.setdiff1d(index.keys, waived, assume_unique=True)])
        args = (train_split, {1: 1}, rest, 13, specials, 13, pool, 4)
        everything = curate_module._decontaminate(*args)
        only_touched = curate_module._decontaminate(*args, touched)
        skip = np.isin(index.keys, waived)  # the index less the waived keys (what curate scans with): the same cuts
        assert curate_module._decontaminate(*args[:2], index.with_skip(skip), *args[3:], touched) == everything
    assert only_touched == everything
    assert {7, 9, 10} <= set(everything)  # the quotes of val text
    assert not {1, 6, 8, 11} & set(everything)  # removed (1), no val text (6, 8, 11)
    assert len({0, 2, 3, 4, 5} & set(everything)) < 5  # only the waived phrase (a chance n-gram at its edge aside)
    assert sum(len(t) for t in touched) < len(train)
    if scan_tokens == 40:
        assert any(len(t) == 0 for t in touched)


def test_add_sorted_counts_each_key_and_returns_the_distinct_ones():
    from niels_gpt.curation.curate import _add_sorted

    counts = np.zeros(10, dtype=np.int64)
    np.testing.assert_array_equal(_add_sorted(counts, np.array([1, 1, 4, 7, 7, 7])), [1, 4, 7])
    np.testing.assert_array_equal(_add_sorted(counts, np.array([4, 9])), [4, 9])
    assert len(_add_sorted(counts, np.zeros(0, dtype=np.int64))) == 0
    assert counts.tolist() == [0, 2, 0, 0, 2, 0, 0, 3, 0, 1]
