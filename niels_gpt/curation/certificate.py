"""The certificate: the leakage audit's n-gram scan, run on the finished caches, must find 0 shared n-grams.

Protected sides: every val split of every pretrain and SFT cache (the audit's val n-grams: inside one
unit, no special id; report/leakage.py) and every file of `decontamination.benchmarks` (tokenized with the
project tokenizer), less the n-grams curation waived as boilerplate (curation/waived_ngrams.npy). Every
train split of the token space is scanned once against them all: the leakage audit's own scan
(report/leakage.scan_space, the benchmark n-grams indexed with the val splits'), so the same pass also gives
the audit's token part (`leakage_part`). For each (protected, train) pair the number of distinct protected
n-grams the train split holds, waived ones left out; the certificate holds when every count is 0. The
byte streams are not curated and not certified (the leakage audit still reports them).

certificate.json: {"format_version", "n", "holds", "train_splits", "protected": [{"name", "ngrams"}],
"pairs": [{"protected", "train", "shared_ngrams"}], "curation": the curation summary (what was removed,
per cache, split and reason)}; curation_table.html shows both for `snakemake --report`. A pair with a
count above 0 fails the job (CertificateError) naming it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np

from niels_gpt.atomic import atomic_write_json, atomic_write_text
from niels_gpt.curation.curate import CURATION_FORMAT_VERSION, benchmark_hashes
from niels_gpt.log import log as log_line
from niels_gpt.report.corpora import find_splits
from niels_gpt.report.leakage import part_of_scan, scan_space
from niels_gpt.report.ngrams import sorted_unique


class CertificateError(ValueError):
    """A train split shares n-grams with a protected text after curation."""


def certify(
    cache_dir,
    *,
    n: int,
    benchmarks: list[str],
    tokenizer_path: str,
    summary_file: str | None,
    out: str,
    table: str | None = None,
    num_threads: int = 2,
    required: bool = True,
    waived_file: str | None = None,
    leakage_part: str | None = None,
    top: int = 10,
    log: Callable[[str], object] = log_line,
) -> dict:
    """Scan, write `out` and return the result; with `required` (decontamination.enabled), a shared
    n-gram raises CertificateError instead (and nothing is written). The scan is the leakage audit's over
    the token space (report/leakage.scan_space, the benchmark files indexed with the val splits), so with
    `leakage_part` it also writes that space's part of leakage.json (`top` units listed per val split): the
    same bytes as `leakage --space tokens`, without a second scan of the train splits."""
    from niels_gpt.tokenizer import SentencePieceTokenizer

    splits, skipped = find_splits(cache_dir, spaces=("tokens",))
    tokenizer = SentencePieceTokenizer(tokenizer_path)
    names = [f"benchmark {path}" for path in benchmarks]
    bench = [sorted_unique(h) for h, _ in benchmark_hashes(benchmarks, tokenizer, n, log)]
    scan = scan_space(splits, n, num_threads=num_threads, log=log, extra=bench)
    sides = [(f"{side.split.name} val", sorted_unique(side.key_of)) for side in scan.sides]
    sides += list(zip(names, scan.extra_keys))
    if waived_file:  # the boilerplate curation did not protect (decontamination.max_ngram_units)
        waived = np.isin(scan.index.keys, np.load(waived_file, allow_pickle=False))
        sides = [(name, keys[~waived[keys]]) for name, keys in sides]
    pairs, trains = [], []
    for t, seen in scan.seen.items():
        trains.append(f"{t} train")
        for name, keys in sides:
            pairs.append({"protected": name, "train": f"{t} train", "shared_ngrams": int(seen[keys].sum())})
        log(f"{t} train: {sum(p['shared_ngrams'] for p in pairs if p['train'] == trains[-1]):,} shared {n}-grams")
    result = {
        "format_version": CURATION_FORMAT_VERSION,
        "n": n,
        "holds": all(p["shared_ngrams"] == 0 for p in pairs),
        "train_splits": trains,
        "protected": [{"name": name, "ngrams": len(keys)} for name, keys in sides],
        "pairs": pairs,
        "curation": json.loads(Path(summary_file).read_text(encoding="utf-8")) if summary_file else None,
    }
    bad = [p for p in pairs if p["shared_ngrams"]]
    if bad and required:
        lines = "\n  - ".join(
            f"{p['train']} shares {p['shared_ngrams']:,} {n}-grams with {p['protected']}" for p in bad
        )
        raise CertificateError(
            f"curation certificate failed: {len(bad)} train/protected pair(s) share {n}-grams after curation:\n"
            f"  - {lines}\nis decontamination.enabled false, or were the caches built without curation?"
        )
    if leakage_part:
        atomic_write_json(leakage_part, part_of_scan(scan, "tokens", n, skipped, top=top, tokenizer=tokenizer))
        log(f"leakage audit, tokens -> {leakage_part}")
    if table:
        atomic_write_text(table, curation_table(result))
    atomic_write_json(out, result)
    if bad:
        log(f"decontamination.enabled is false: {len(bad)} pair(s) share {n}-grams; the certificate does not hold")
    else:
        log(f"certificate holds: 0 shared {n}-grams in {len(trains)} train splits against {len(sides)} protected texts")
    return result


CSS = (
    "body{font-family:sans-serif;font-size:13px;margin:1em}table{border-collapse:collapse;margin:0.5em 0 1.5em}"
    "td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}td.t{text-align:left}th{background:#f2f2f2}"
)


def curation_table(result: dict) -> str:
    """certificate.json for people (self-contained HTML): what curation removed per cache, split and
    reason, then every (train, protected) pair's shared n-grams."""
    import html

    rows = []
    for name, splits in ((result.get("curation") or {}).get("caches") or {}).items():
        for split, r in splits.items():
            reasons = sorted(r["counts"].items()) or [("(nothing removed)", {"units": 0, "tokens": 0})]
            for reason, c in reasons:
                rows.append(
                    f"<tr><td class=t>{html.escape(name)}</td><td class=t>{split}</td><td class=t>{reason}</td>"
                    f"<td>{c['units']:,}</td><td>{c['tokens']:,}</td><td>{r['read_tokens']:,}</td>"
                    f"<td>{r['kept_tokens']:,}</td><td>{r['shortfall_tokens']:,}</td></tr>"
                )
    pairs = "".join(
        f"<tr><td class=t>{html.escape(p['train'])}</td><td class=t>{html.escape(p['protected'])}</td>"
        f"<td>{p['shared_ngrams']:,}</td></tr>"
        for p in result["pairs"]
    )
    verdict = "holds" if result["holds"] else "does NOT hold"
    waived = (result.get("curation") or {}).get("waived_ngrams", 0)
    return (
        f"<!doctype html><meta charset=utf-8><title>curation</title><style>{CSS}</style>"
        f"<h2>What curation removed</h2><table><tr><th>cache</th><th>split</th><th>reason</th><th>units</th>"
        f"<th>tokens</th><th>tokens read</th><th>tokens kept</th><th>shortfall</th></tr>{''.join(rows)}</table>"
        f"<p>{waived:,} protected {result['n']}-grams waived as boilerplate (decontamination.max_ngram_units)</p>"
        f"<h2>Certificate: {verdict} ({result['n']}-grams shared after curation)</h2>"
        f"<table><tr><th>train split</th><th>protected</th><th>shared</th></tr>{pairs}</table>"
    )
