"""The certificate's counts and the leakage part its scan writes, against independent computations."""

import json

import numpy as np

from niels_gpt.curation.certificate import certify
from niels_gpt.report.corpora import find_splits
from niels_gpt.report.leakage import _val_side, audit_part
from niels_gpt.report.ngrams import rolling_hashes
from tests.curation.test_curate import DOCS, _pretrain, _run


def _expected_pairs(cache, tok, bench_texts, waived, n=13) -> dict:
    """(protected, train) -> distinct protected n-grams the train split holds, counted directly: every val
    split's n-grams (the audit's definition) and the benchmark texts', less the waived, against every n-gram
    of each whole train split."""
    splits, _ = find_splits(cache, spaces=("tokens",))
    protected = {f"{s.name} val": set(_val_side(s, n).hashes.tolist()) for s in splits if s.split == "val"}
    bench = set()
    for text in bench_texts:
        bench |= set(rolling_hashes(np.array(tok.encode(text), dtype=np.uint16), n).tolist())
    protected["benchmark"] = bench
    protected = {name: h - waived for name, h in protected.items()}
    pairs = {}
    for t in (s for s in splits if s.split == "train"):
        seq = t.sequence()
        held = set(rolling_hashes(seq.read(0, len(seq)), n).tolist())
        for name, h in protected.items():
            pairs[(name, f"{t.name} train")] = len(h & held)
    return pairs


def test_counts_match_a_direct_count_and_the_leakage_part_is_the_audits(tmp_path, tiny_tokenizer, tiny_tokenizer_path):
    """Without decontamination the train splits keep a val document and a benchmark text: the certificate
    counts exactly the distinct protected n-grams each train split holds (waived ones left out), and the token
    part of the leakage audit it writes from the same scan has the bytes of `leakage --space tokens`."""
    bench = tmp_path / "eval.txt"
    bench.write_text(DOCS[7] + "\n" + DOCS[8][:300] + "\n", encoding="utf-8")
    raw = {
        ("pretrain", "wikitext"): _pretrain(
            tmp_path, "wikitext", [DOCS[1] + " " + DOCS[0], DOCS[7]], [DOCS[0], DOCS[2]], tiny_tokenizer
        ),
        ("pretrain", "roam"): _pretrain(tmp_path, "roam", [DOCS[2][:400], DOCS[3]], [DOCS[4]], tiny_tokenizer),
    }
    _run(tmp_path, raw, tiny_tokenizer_path, decontamination={"enabled": False})
    waived_hashes = rolling_hashes(np.array(tiny_tokenizer.encode(DOCS[0]), dtype=np.uint16), 13)[::3]
    waived_file = tmp_path / "waived.npy"
    np.save(waived_file, np.sort(np.unique(waived_hashes)), allow_pickle=False)

    part = tmp_path / "leakage_tokens.json"
    result = certify(
        tmp_path,
        n=13,
        benchmarks=[str(bench)],
        tokenizer_path=tiny_tokenizer_path,
        summary_file=None,
        out=str(tmp_path / "certificate.json"),
        required=False,
        waived_file=str(waived_file),
        leakage_part=str(part),
        top=3,
    )
    expected = _expected_pairs(tmp_path, tiny_tokenizer, bench.read_text().splitlines(), set(waived_hashes.tolist()))
    got = {
        (p["protected"] if not p["protected"].startswith("benchmark") else "benchmark", p["train"]): p["shared_ngrams"]
        for p in result["pairs"]
    }
    assert got == expected
    assert got[("pretrain/wikitext val", "pretrain/wikitext train")] > 100  # the kept val document
    assert got[("benchmark", "pretrain/wikitext train")] > 100  # the benchmark text inside a train document
    assert got[("pretrain/roam val", "pretrain/roam train")] == 0 and not result["holds"]

    alone = audit_part(tmp_path, "tokens", n=13, top=3, tokenizer=tiny_tokenizer, log=lambda _: None)
    assert json.loads(part.read_text()) == alone
    assert alone["val_splits"] and alone["train_splits"]
