"""The train/val leakage audit: how much of each val split's text also sits in a train split.

For every val split (pretrain, SFT, streams) and every train split of every source in the same space
(token ids for pretrain and SFT, which share the tokenizer; bytes for the streams): the fraction of the
val split's n-gram positions whose n-gram occurs anywhere in that train split. n is 13 tokens (the
GPT-3 decontamination convention; `leakage.n_tokens`) or 50 bytes for the streams (`leakage.n_bytes`;
13 bytes would match common phrases, 50 bytes is about 13 tokens of English). An n-gram lies inside one
unit (a document, an example, a stream segment between separators) and holds no chat special.

Memory is set by the val side: every val split of a space is read whole, hashed (ngrams.py) a chunk
at a time and indexed once (about 16 bytes per val position kept, ~32 at the peak while the index is
sorted); each train split is then scanned once, streaming, against that index. The result
(`leakage.json`, canonical JSON, no timings: the same caches give the same bytes):

    {"format_version", "n": {"tokens": 13, "bytes": 50}, "max_fraction": null | float,
     "train_splits": [{"name", "space", "positions"}],
     "val_splits": [{"name", "space", "unit", "units", "ngrams", "fraction_any",
                     "fraction": {train name: fraction},
                     "top": [{"unit", "start", "ngrams", "fraction", "worst_train", "by_train", "excerpt"}]}],
     "skipped": [{"name", "reason"}]}

The workflow writes one part per space (`part_of_scan`: leakage_bytes.json by `audit_part`, the byte
streams; leakage_tokens.json by the certificate, curation/certificate.py, whose scan of the curated token
splits is this one) and joins them in a job that applies the gate (`merge_parts`): the byte streams' part
need not wait for curation, and a new `leakage.max_fraction` re-runs only the join.

`fraction_any` counts an n-gram found in any train split; `top` lists the units (documents, examples,
segments) with the highest such fraction, most n-grams first among equals. With `leakage.max_fraction`
set, `check_gate` fails when any (val, train) fraction exceeds it, naming the worst pairs and units.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from niels_gpt.layout import LEAKAGE_SPACES, REPORT_FORMAT_VERSION
from niels_gpt.log import log as log_line
from niels_gpt.log import progress
from niels_gpt.report.corpora import Split, excerpt, find_splits
from niels_gpt.report.ngrams import NgramIndex, rolling_hashes, scan_matches, sorted_unique, windows_touching

SPACES = LEAKAGE_SPACES
DIGITS = 6  # fractions are rounded in the JSON: stable text, far finer than any figure shows
VAL_CHUNK = 1 << 20  # val positions hashed at once (~60 bytes of temporaries each)


class LeakageError(ValueError):
    """The gate: a val split shares more n-grams with a train split than leakage.max_fraction allows."""


@dataclass
class ValSide:
    """One val split, hashed: its valid n-grams (see `_val_side`) and the unit each belongs to."""

    split: Split
    data: np.ndarray  # the whole split
    starts: np.ndarray  # position of every unit
    ends: np.ndarray  # end of every unit's text
    unit_of: np.ndarray  # unit of every valid n-gram
    hashes: np.ndarray  # hash of every valid n-gram (dropped once indexed)
    key_of: np.ndarray | None = None  # position of every valid n-gram's hash in the space's index


def _val_side(split: Split, n: int) -> ValSide:
    """Read and hash one val split. Valid n-grams lie inside one unit's text (no separator, no eot)
    and hold no special id. Hashed VAL_CHUNK positions at a time into the two arrays kept (16 bytes per
    position), so the temporaries of the hashing and the tests are a chunk's, not the split's."""
    seq = split.sequence()
    data = seq.read(0, len(seq))
    starts, ends = split.unit_bounds(data)
    special = split.special_ids()
    table = None
    if special:
        table = np.zeros(1 << 16, dtype=bool)
        table[special] = True
    m = max(len(data) - n + 1, 0)
    hashes, unit_of, kept = np.empty(m, dtype=np.uint64), np.empty(m, dtype=np.intp), 0
    for lo in range(0, m, VAL_CHUNK):
        hi = min(lo + VAL_CHUNK, m)
        window = data[lo : hi + n - 1]
        positions = np.arange(lo, hi)
        units = np.searchsorted(starts, positions, side="right") - 1
        valid = ends[units] >= positions + n
        if table is not None:
            valid &= ~windows_touching(table[window], n)
        chunk = rolling_hashes(window, n)[valid]
        hashes[kept : kept + len(chunk)], unit_of[kept : kept + len(chunk)] = chunk, units[valid]
        kept += len(chunk)
    return ValSide(split, data, starts, ends, unit_of[:kept], hashes[:kept])


def _index(sides: list[ValSide], extra: list[np.ndarray] = ()) -> tuple[NgramIndex, list[np.ndarray]]:
    """One index over the n-grams of every val split and of the `extra` hash sets (the certificate's
    benchmark files); sets each side's `key_of` (the position of each of its hashes among the index's sorted
    distinct keys) and returns the distinct positions of each extra set. One stable argsort of all the
    hashes gives both: a binary search per val n-gram instead took 5 s for 5 M at full size."""
    hashes = np.concatenate([np.zeros(0, np.uint64)] + [s.hashes for s in sides] + list(extra))
    order = np.argsort(hashes, kind="stable")
    ordered = hashes[order]
    del hashes
    distinct = np.empty(len(ordered), dtype=bool)
    if len(ordered):
        distinct[0], distinct[1:] = True, ordered[1:] != ordered[:-1]
    key_of = np.empty(len(ordered), dtype=np.intp)
    key_of[order] = np.cumsum(distinct) - 1
    keys = ordered[distinct]
    del ordered, order
    lo = 0
    for side in sides:
        side.key_of, side.hashes = key_of[lo : lo + len(side.hashes)], None
        lo += len(side.key_of)
    extra_keys = []
    for h in extra:
        extra_keys.append(sorted_unique(key_of[lo : lo + len(h)]))
        lo += len(h)
    return NgramIndex(keys), extra_keys


def _round(x: float) -> float:
    return round(float(x), DIGITS)


def _top_units(side: ValSide, seen: dict[str, np.ndarray], top: int, tokenizer) -> tuple[float, list[dict]]:
    """(fraction of the split's n-grams found in any train split, its `top` most affected units)."""
    n_units = len(side.starts)
    grams = np.bincount(side.unit_of, minlength=n_units)
    any_seen = np.zeros(len(side.key_of), dtype=bool)
    per_train = {}
    for name, s in seen.items():
        hit = s[side.key_of]
        any_seen |= hit
        per_train[name] = np.bincount(side.unit_of, weights=hit, minlength=n_units)
    found = np.bincount(side.unit_of, weights=any_seen, minlength=n_units)
    frac = np.divide(found, grams, out=np.zeros(n_units), where=grams > 0)
    order = np.lexsort((np.arange(n_units), -grams, -frac))
    rows = []
    for u in order[:top]:
        if found[u] == 0:
            break
        by_train = {name: _round(c[u] / grams[u]) for name, c in per_train.items() if c[u]}
        rows.append(
            {
                "unit": int(u),
                "start": int(side.starts[u]),
                "ngrams": int(grams[u]),
                "fraction": _round(frac[u]),
                "worst_train": max(by_train, key=lambda k: (by_train[k], k)),
                "by_train": by_train,
                "excerpt": excerpt(side.split, side.data, int(side.starts[u]), int(side.ends[u]), tokenizer),
            }
        )
    return (float(any_seen.mean()) if len(any_seen) else 0.0), rows


def _val_row(side: ValSide, seen: dict[str, np.ndarray], top: int, tokenizer) -> dict:
    fraction_any, rows = _top_units(side, seen, top, tokenizer)
    total = max(len(side.key_of), 1)
    return {
        "name": side.split.name,
        "space": side.split.space,
        "unit": side.split.unit,
        "units": len(side.starts),
        "ngrams": len(side.key_of),
        "fraction_any": _round(fraction_any),
        "fraction": {name: _round(s[side.key_of].sum() / total) for name, s in seen.items()},
        "top": rows,
    }


@dataclass
class SpaceScan:
    """One space's val sides, indexed with any extra hash sets, and every train split scanned once."""

    sides: list[ValSide]
    index: NgramIndex
    extra_keys: list[np.ndarray]  # distinct index positions of each extra hash set
    seen: dict[str, np.ndarray]  # train split name -> bool per index key: occurs in that train split
    train_rows: list[dict]


def scan_space(splits: list[Split], n: int, *, num_threads: int, log, extra: list[np.ndarray] = ()) -> SpaceScan:
    """Hash every val split of one space, index them (with `extra`), scan every train split once."""
    sides = [_val_side(s, n) for s in splits if s.split == "val"]
    index, extra_keys = _index(sides, extra)
    what = f"val {n}-grams in {len(sides)} val splits" + (f" and {len(extra)} more sets" if len(extra) else "")
    log(f"{len(index):,} distinct {what} ({index.nbytes / 1e6:,.1f} MB index)")
    seen, train_rows = {}, []
    for t in (s for s in splits if s.split == "train"):
        seq = t.sequence()
        with progress(total=len(seq), desc=f"{t.name} train", unit="pos", unit_scale=True, leave=False) as bar:
            seen[t.name] = scan_matches(seq, n, index, num_threads=num_threads, on_positions=bar.update)
        train_rows.append({"name": t.name, "space": t.space, "positions": len(seq)})
        log(f"scanned {t.name} train: {len(seq):,} positions, {int(seen[t.name].sum()):,} indexed {n}-grams found")
    return SpaceScan(sides, index, extra_keys, seen, train_rows)


def part_of_scan(scan: SpaceScan, space: str, n: int, skipped: list[dict], *, top: int, tokenizer) -> dict:
    """One space's part of leakage.json from its scan: {"format_version", "space", "n", "train_splits",
    "val_splits", "skipped"}."""
    return {
        "format_version": REPORT_FORMAT_VERSION,
        "space": space,
        "n": n,
        "train_splits": scan.train_rows,
        "val_splits": [_val_row(side, scan.seen, top, tokenizer) for side in scan.sides],
        "skipped": skipped,
    }


def audit_part(cache_dir, space: str, *, n: int, top: int, num_threads: int = 2, tokenizer=None, log=log_line) -> dict:
    """The audit of one space's splits (a part of leakage.json: merge_parts joins them; see part_of_scan).
    The byte streams are not curated, so their part can run as soon as they are built, beside curation;
    the token part is also written by the certificate's scan (curation/certificate.py), which reads the
    same splits."""
    if space not in SPACES:
        raise ValueError(f"leakage space {space!r}: expected one of {', '.join(SPACES)}")
    splits, skipped = find_splits(cache_dir, spaces=(space,))
    scan = scan_space(splits, n, num_threads=num_threads, log=log)
    return part_of_scan(scan, space, n, skipped, top=top, tokenizer=tokenizer)


def merge_parts(parts: dict, *, n_tokens: int, n_bytes: int, max_fraction: float | None = None) -> dict:
    """leakage.json from one part per space ({where it came from: part}): the same bytes as one audit of
    both spaces. ValueError naming the part if one is missing, of another format or of another n."""
    by_space, expected_n = {}, dict(zip(SPACES, (n_tokens, n_bytes)))
    for where, part in parts.items():
        space = part.get("space")
        if part.get("format_version") != REPORT_FORMAT_VERSION or space not in SPACES:
            raise ValueError(
                f"{where}: not a leakage part of format {REPORT_FORMAT_VERSION} (format_version "
                f"{part.get('format_version')!r}, space {space!r}); run `leakage --space tokens|bytes` again"
            )
        if space in by_space:
            raise ValueError(f"{where}: a second part for the {space} space")
        if part.get("n") != expected_n[space]:
            raise ValueError(
                f"{where}: audited {space} with n = {part.get('n')}, but leakage.n_{space} is {expected_n[space]}; "
                f"run `leakage --space {space}` again"
            )
        by_space[space] = part
    missing = [s for s in SPACES if s not in by_space]
    if missing:
        raise ValueError(f"leakage parts: no part for the {' and '.join(missing)} space")
    ordered = [by_space[s] for s in SPACES]
    return {
        "format_version": REPORT_FORMAT_VERSION,
        "n": {"tokens": n_tokens, "bytes": n_bytes},
        "max_fraction": max_fraction,
        "train_splits": [t for p in ordered for t in p["train_splits"]],
        "val_splits": [v for p in ordered for v in p["val_splits"]],
        "skipped": [k for p in ordered for k in p["skipped"]],
    }


def audit(
    cache_dir,
    *,
    n_tokens: int,
    n_bytes: int,
    top: int,
    max_fraction: float | None = None,
    num_threads: int = 2,
    tokenizer=None,
    log: Callable[[str], object] = log_line,
) -> dict:
    """The leakage result of every split under `cache_dir` (see the module docstring for its fields): the
    two spaces' parts, merged.

    `tokenizer` (optional) decodes the beginning of each listed token unit for its excerpt.
    """
    parts = {
        space: audit_part(cache_dir, space, n=n, top=top, num_threads=num_threads, tokenizer=tokenizer, log=log)
        for space, n in zip(SPACES, (n_tokens, n_bytes))
    }
    return merge_parts(parts, n_tokens=n_tokens, n_bytes=n_bytes, max_fraction=max_fraction)


def offenders(result: dict, max_fraction: float) -> list[tuple[float, dict, str]]:
    """(fraction, val row, train name) of every pair above `max_fraction`, worst first."""
    pairs = [(f, v, t) for v in result["val_splits"] for t, f in v["fraction"].items() if f > max_fraction]
    return sorted(pairs, key=lambda p: (-p[0], p[1]["name"], p[2]))


def check_gate(result: dict, units_named: int = 2) -> None:
    """Raise LeakageError if max_fraction is set and exceeded: one line per offending (val, train) pair,
    worst first, naming its most affected units."""
    limit = result["max_fraction"]
    if limit is None:
        return
    bad = offenders(result, limit)
    if not bad:
        return
    lines = []
    for fraction, val, train in bad:
        n = result["n"][val["space"]]
        units = sorted((u for u in val["top"] if train in u["by_train"]), key=lambda u: -u["by_train"][train])
        named = "; ".join(
            f"{val['unit']} {u['unit']} ({100 * u['by_train'][train]:.1f}% of its {u['ngrams']:,}): {u['excerpt']!r}"
            for u in units[:units_named]
        )
        named = named or f"none of the {len(val['top'])} {val['unit']}s with the most overlap overall"
        lines.append(f"{val['name']} val in {train} train: {100 * fraction:.2f}% of {n}-grams; most affected: {named}")
    raise LeakageError(
        f"leakage gate: {len(bad)} val/train pair(s) share more than leakage.max_fraction = {100 * limit:g}% "
        "of the val split's n-grams:\n  - " + "\n  - ".join(lines) + "\n"
        "remove the duplicated text from one side, or raise leakage.max_fraction (null = report only)"
    )
