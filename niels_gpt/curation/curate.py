"""The global curation decision: read every raw cache once for its keys, decide, write the decisions.

Steps (each unit is a pretrain document or an SFT example; raw.py gives the survival order):
 1. keys: pretrain documents get an exact key and a MinHash signature (dedup.doc_keys; the signatures go
    to temporary files, one per band (dedup.SignatureFiles), read back one band at a time; the keys and
    lengths stay in memory: 28 bytes per unit), SFT examples an exact key of their ids;
 2. duplicates (dedup.deduplicate), per family over all its splits, in the survival order;
 3. the val splits' budgets: the kept val documents, in order, up to the split's budget;
 4. the protected n-grams: what is left of every val split (3) + the benchmark files, tokenized; an
    n-gram held by more than `decontamination.max_ngram_units` distinct units (val, benchmark and train
    units together) is boilerplate ("Let me know if you have any other questions."), waived, not protected;
 5. the train units that hold one (the count of step 4 names them: `_count_train_units`, `_units_to_scan`)
    scanned against them: a pretrain document loses the covered spans (decontaminate.py), an SFT example
    that holds one is removed;
 6. the train budgets, over what is left.
Output: one decisions file per raw cache (`decisions_path`), read by its apply job, and a summary.
Decisions file: {"format_version", "family", "source", "part", "splits": {split: {
    "budget", "read_budget", "read_tokens", "units", "kept_tokens", "shortfall_tokens",
    "removed": {"units": [...], "reasons": [...]},                  (parallel lists, units ascending)
    "pieces": {"units": [...], "counts": [...], "bounds": [start, end, start, end, ...]},
    "counts": {reason: {"units", "tokens"}}, "examples": [{"unit", "reason", "kept", "similarity"}]}}}
Reasons: exact_duplicate, near_duplicate, contamination (a unit dropped whole), contamination_cut (the
tokens cut from documents that stay in pieces), over_budget (read past the budget, not needed).
"""

from __future__ import annotations

import ctypes
import json
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from niels_gpt import layout
from niels_gpt.atomic import atomic_open, atomic_write_json, atomic_write_text
from niels_gpt.curation.benchmarks import benchmark_texts
from niels_gpt.curation.decontaminate import (
    CONTAMINATION,
    covered,
    protected_index,
    special_table,
    unit_pieces,
)
from niels_gpt.curation.dedup import (
    EXACT,
    KEEP,
    NEAR,
    REASONS,
    SignatureFiles,
    deduplicate,
    doc_keys,
    exact_duplicates,
    token_keys,
)
from niels_gpt.curation.raw import RawSplit, doc_chunks, ordered_splits, raw_root, unit_chunks
from niels_gpt.curation.words import WordTable
from niels_gpt.data.registry import PRETRAIN_SOURCES, SFT_SOURCES
from niels_gpt.layout import CURATION_FORMAT_VERSION, decisions_dir, decisions_path, summary_path, waived_path
from niels_gpt.log import log as log_line
from niels_gpt.pretrain.parts import part_budget
from niels_gpt.report.ngrams import _bounded_map, rolling_hashes, sorted_unique, windows_touching

CONTAMINATED = 3
REASONS = {**REASONS, CONTAMINATED: CONTAMINATION}
EXAMPLES = 5  # removals named per split and reason in the decisions (the report shows them)
VAL_BLOCK = 1 << 20  # val n-gram starts hashed at a time (~50 MB of temporaries)
SCAN_TOKENS = 1 << 19  # tokens per chunk of the train scans (~30 MB of temporaries per thread)
REFILTER_RATIO = 1  # the count rebuilds its filters when skipped probes x this > the keys (tests: 0 and 2**30)
PAIRS_KEPT = 1 << 21  # (key, unit) pairs of a split kept from the count for the second scan (8 bytes each)


def parse_raw_dir(cache_dir, folder) -> tuple[str, str, str | None]:
    """(family, source, part) of a raw cache folder (raw.py's layout)."""
    rel = Path(os.path.relpath(folder, raw_root(cache_dir))).parts
    if len(rel) == 2 and rel[0] in ("pretrain", "sft"):
        return rel[0], rel[1], None
    if len(rel) == 4 and rel[0] == "pretrain" and rel[2] == layout.PARTS_DIR:
        return rel[0], rel[1], rel[3]
    raise ValueError(f"{folder}: not a raw cache folder under {raw_root(cache_dir)} (raw/{{pretrain,sft}}/<source>)")


class _Units:
    """Per unit of a family, in order: split number, index in split, length (tokens, its eot included)."""

    def __init__(self):
        self.split, self.index, self.length, self.keys = [], [], [], []

    def add(self, split_no: int, first: int, lengths: np.ndarray, keys: np.ndarray) -> None:
        self.split.append(np.full(len(lengths), split_no, dtype=np.int32))
        self.index.append(np.arange(first, first + len(lengths), dtype=np.int64))
        self.length.append(np.asarray(lengths, dtype=np.int64))
        self.keys.append(keys)

    def done(self) -> None:
        for name in ("split", "index", "length", "keys"):
            parts = getattr(self, name)
            setattr(self, name, np.concatenate(parts) if parts else np.zeros(0, np.int64))


def _budgets(cfg: dict, s: RawSplit) -> int | None:
    b = cfg["sources"][s.source].get(f"max_{s.split}_tokens") if s.family == "pretrain" else None
    if b is not None and s.part is not None:
        b = part_budget(b, cfg["pretrain"]["num_parts"], int(s.part.rsplit("_", 1)[1]))
    return b


def _pretrain_keys(splits, units, table, dcfg, sigs: SignatureFiles, log, num_threads: int) -> int:
    """Key every pretrain document, chunks on `num_threads` threads (numpy releases the GIL), in order."""
    bins = dcfg["bands"] * dcfg["rows"]
    rows = 0

    def work(chunk):
        _, ids, starts = chunk
        keys, sig = doc_keys(table, ids, starts, shingle_words=dcfg["shingle_words"], num_bins=bins)
        return np.diff(np.append(starts, len(ids))), keys, sig

    with ThreadPoolExecutor(max_workers=max(1, num_threads)) as pool:
        for no, s in enumerate(splits):
            if s.family != "pretrain":
                continue
            n_docs = 0
            chunks = doc_chunks(s.sequence(), s.meta["eot_id"])
            for lengths, keys, sig in _bounded_map(pool, work, chunks, depth=2 * max(1, num_threads)):
                sigs.append(sig)
                units.add(no, n_docs, lengths, keys)
                n_docs += len(lengths)
                rows += len(lengths)
            log(f"{s.name}: {n_docs:,} documents keyed")
    return rows


def _sft_keys(splits, units) -> None:
    for no, s in enumerate(splits):
        if s.family != "sft":
            continue
        n = 0
        for _, ids, starts in unit_chunks(s.sequence(), s.unit_starts()):
            units.add(no, n, np.diff(np.append(starts, len(ids))), token_keys(ids, starts))
            n += len(starts)


def _val_hashes(
    s: RawSplit, removed_units: set, budget: int | None, n: int, specials: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(hashes, unit of each) of the n-grams of what stays of a val split: kept units, up to its budget;
    none holding a special. Held: the split's ids and two flags per position (4 bytes per position) and
    the result (16 bytes per n-gram kept); hashed VAL_BLOCK n-gram starts at a time."""
    seq = s.sequence()
    data = seq.read(0, len(seq))
    offsets = s.unit_starts()
    if offsets is None:
        ends = np.flatnonzero(data == s.meta["eot_id"]) + 1
        offsets = np.concatenate(([0], ends[ends < len(data)])).astype(np.int64)
    bounds = np.append(offsets, len(data))
    gone = np.zeros(len(data), dtype=bool)  # removed units, then everything past the budget
    for u in removed_units:
        gone[bounds[u] : bounds[u + 1]] = True
    if budget is not None:
        _cut_at_budget(gone, budget)
    flags = specials[data] | gone
    del gone
    starts = len(data) - n + 1
    hashes, units = [np.zeros(0, np.uint64)], [np.zeros(0, np.int64)]
    for lo in range(0, max(starts, 0), VAL_BLOCK):
        hi = min(lo + VAL_BLOCK, starts)
        valid = np.flatnonzero(~windows_touching(flags[lo : hi + n - 1], n))
        hashes.append(rolling_hashes(data[lo : hi + n - 1], n)[valid])
        units.append(np.searchsorted(offsets, valid + lo, side="right") - 1)
    return np.concatenate(hashes), np.concatenate(units)


def _cut_at_budget(gone: np.ndarray, budget: int) -> None:
    """Mark gone every position from the `budget`-th one not gone on, found VAL_BLOCK positions at a time."""
    before = 0
    for lo in range(0, len(gone), VAL_BLOCK):
        kept = np.flatnonzero(~gone[lo : lo + VAL_BLOCK])
        if before + len(kept) > budget:
            gone[lo + kept[budget - before] :] = True
            return
        before += len(kept)


def benchmark_hashes(paths: list[str], tokenizer, n: int, log) -> list[tuple[np.ndarray, np.ndarray]]:
    """(hashes, text of each) per benchmark file."""
    out = []
    for path in paths:
        texts = benchmark_texts(path)
        ids = tokenizer.encode_batch_arrays(texts, num_threads=2)
        hashes = [rolling_hashes(np.asarray(x, dtype=np.uint16), n) for x in ids]
        text_of = np.concatenate([np.zeros(0, np.int64)] + [np.full(len(h), i) for i, h in enumerate(hashes)])
        out.append((np.concatenate([np.zeros(0, np.uint64), *hashes]), text_of))
        log(f"benchmark {path}: {len(texts):,} texts, {len(text_of):,} {n}-grams protected")
    return out


def _distinct_units(keys: np.ndarray, units: np.ndarray) -> np.ndarray:
    """The key of every distinct (key, unit) pair."""
    return _distinct_pairs(keys, units)[0]


def _distinct_pairs(keys: np.ndarray, units: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(keys, units) of the distinct (key, unit) pairs, by key then unit."""
    if not len(keys):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    width = int(units.max()) + 1  # one int64 per pair: a 1-D unique, far faster than unique rows
    code = sorted_unique(keys.astype(np.int64) * width + units)
    return code // width, code % width


def _scan_chunks(s: RawSplit):
    """A train split's units in chunks of ~SCAN_TOKENS (the scans below)."""
    offsets = s.unit_starts()
    if offsets is not None:
        return unit_chunks(s.sequence(), offsets, SCAN_TOKENS)
    return doc_chunks(s.sequence(), s.meta["eot_id"], SCAN_TOKENS)


class _WaiverScan:
    """The lookups of the waiver's count, over every train split in turn: the index answering -1 for a key
    already counted past the limit (`over`, marked in place as the counts grow), its filters rebuilt over the
    keys still live once the probes of dead keys since the last rebuild outnumber the keys (a rebuild costs
    about a probe per key; REFILTER_RATIO scales that). The same answers whenever it rebuilds: fewer probes."""

    def __init__(self, index, counts: np.ndarray, limit: int):
        self.index, self.limit = index, limit
        self.over = counts > limit
        self.scanner = index.with_skip(self.over)
        self.again, self.stale = 0, False

    def counted(self, counts: np.ndarray, keys: np.ndarray, skipped: int) -> None:
        """`counts` grew at `keys`; `skipped` probes found dead keys."""
        now_over = counts[keys] > self.limit
        self.stale = self.stale or bool((now_over & ~self.over[keys]).any())
        self.over[keys] = now_over
        self.again += skipped
        if self.stale and self.again * REFILTER_RATIO > len(self.over):
            self.scanner, self.again, self.stale = self.index.with_skip(self.over), 0, False


def _count_train_units(
    s: RawSplit, index, n, specials, pool, depth: int, counts: np.ndarray, limit: int, waiver: _WaiverScan | None = None
) -> list[np.ndarray | tuple[np.ndarray, np.ndarray]]:
    """Add to `counts` (per key of `index`) how many units of this train split hold each key, up to what
    `_boilerplate` needs: a key whose count already exceeds `limit` is waived whatever follows, so the scan
    stops counting it (`waiver`, shared by the splits' scans; the threads may see that a chunk late, which
    only counts more). The waived set is the exact one; on text that shares boilerplate everywhere, most
    positions drop out at the filters.
    Returns, per chunk of `_scan_chunks(s)`, what `_units_to_scan` needs to name the units `_decontaminate`
    must scan again: the (key, unit) pairs counted (while the split's pairs kept stay under PAIRS_KEPT and no
    counted n-gram spans two units), else the units that an n-gram not yet over the limit touches
    (`_touched_units`; a key over the limit is waived, so no other unit can hold a protected n-gram)."""
    waiver = waiver or _WaiverScan(index, counts, limit)

    def work(chunk):
        _, ids, starts = chunk
        key, skipped = waiver.scanner.ngram_key_ids_counted(ids, n, specials)
        if not len(key):
            return np.zeros(0, np.int64), None, np.zeros(0, np.int64), skipped
        pos = np.flatnonzero(key >= 0)
        unit = np.searchsorted(starts, pos, side="right") - 1
        spans = bool((np.searchsorted(starts, pos + (n - 1), side="right") - 1 != unit).any())
        pairs = _distinct_pairs(key[pos], unit)
        return pairs[0], None if spans else pairs[1], _touched_units(pos, starts, n), skipped

    out, kept = [], 0
    for keys, units, touched, skipped in _bounded_map(pool, work, _scan_chunks(s), depth=depth):
        _add_sorted(counts, keys)
        waiver.counted(counts, keys, skipped)
        if units is not None and kept + len(keys) <= PAIRS_KEPT:
            out.append((keys.astype(np.int32), units.astype(np.int32)))
            kept += len(keys)
        else:
            out.append(touched)
    return out


def _units_to_scan(entry: np.ndarray | tuple[np.ndarray, np.ndarray], live: np.ndarray) -> np.ndarray:
    """The units of a scan chunk that can hold a protected n-gram, from `_count_train_units`' entry for it:
    the units of its pairs whose key is `live` (not waived), or the touched units it kept instead."""
    if isinstance(entry, tuple):
        keys, units = entry
        return sorted_unique(units[live[keys]]).astype(np.int64)
    return entry


def _touched_units(pos: np.ndarray, starts: np.ndarray, n: int) -> np.ndarray:
    """The units (ascending; they begin at `starts`) holding a position of an n-gram that starts at `pos`."""
    if not len(pos):
        return np.zeros(0, dtype=np.int64)
    first = np.searchsorted(starts, pos, side="right") - 1
    last = np.searchsorted(starts, pos + (n - 1), side="right") - 1
    depth = np.bincount(first, minlength=len(starts) + 1) - np.bincount(last + 1, minlength=len(starts) + 1)
    return np.flatnonzero(np.cumsum(depth[:-1]) > 0)


def _gather_units(ids: np.ndarray, bounds: np.ndarray, units: np.ndarray, gap: int) -> tuple[np.ndarray, np.ndarray]:
    """(the tokens of `units` (ascending), each run of consecutive units as it is in `ids` and one `gap` id
    after each run; the start of every unit in them). `bounds`: each unit's start, then the end of the last.
    With a special id as `gap`, an n-gram holding no special never crosses a gap: the gathered n-grams that
    hold no special are exactly those of the runs."""
    if not len(units):
        return ids[:0], np.zeros(0, dtype=np.int64)
    ends = np.flatnonzero(np.append(units[1:] != units[:-1] + 1, True))  # last unit of each run
    begins = np.concatenate(([0], ends[:-1] + 1))
    lo, hi = bounds[units[begins]], bounds[units[ends] + 1]
    gap_ids = np.array([gap], dtype=ids.dtype)
    out = np.concatenate([x for a, b in zip(lo.tolist(), hi.tolist()) for x in (ids[a:b], gap_ids)])
    run_at = np.concatenate(([0], np.cumsum(hi - lo + 1)[:-1]))  # where each run begins in `out`
    run_of = np.repeat(np.arange(len(lo)), ends - begins + 1)
    return out, bounds[units] - lo[run_of] + run_at[run_of]


def _add_sorted(counts: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Add to `counts` how often each key of `keys` (ascending) occurs; return the distinct keys. Its cost
    follows the keys, not `counts`: a bincount as long as the index (5 M keys at full size) per scan chunk
    took more than the scan."""
    if not len(keys):
        return keys
    first = np.flatnonzero(np.append(True, keys[1:] != keys[:-1]))
    distinct = keys[first]
    counts[distinct] += np.diff(np.append(first, len(keys)))
    return distinct


def _side_counts(index, sides) -> np.ndarray:
    """Per key of `index`: how many distinct units of the protected sides (val units, benchmark texts) hold it.
    A side is counted VAL_BLOCK n-grams at a time, cut between units (a (key, unit) pair never spans two)."""
    counts = np.zeros(len(index), dtype=np.int64)
    for h, units in sides:
        lo = 0
        while lo < len(h):
            hi = min(lo + VAL_BLOCK, len(h))
            if hi < len(h):  # back to the start of the unit at hi, or on to the end of a unit longer than a block
                start = int(np.searchsorted(units, units[hi], side="left"))
                hi = start if start > lo else int(np.searchsorted(units, units[lo], side="right"))
            keys = index.key_ids(h[lo:hi])  # all members
            _add_sorted(counts, _distinct_units(keys, units[lo:hi]))
            lo = hi
    return counts


def _boilerplate(index, counts: np.ndarray, limit: int | None) -> np.ndarray:
    """The protected keys held by more than `limit` distinct units (`counts`: val units, benchmark texts and
    train units together): boilerplate, not evaluation text; none when `limit` is None."""
    if limit is None or not len(index):
        return np.zeros(0, dtype=np.uint64)
    return index.keys[counts > limit]


def _release_freed_memory() -> None:
    """Give the heap's free pages back to the system between stages: glibc keeps what numpy's temporaries
    freed in each thread's arena (at full size ~300 MB after the scans, measured with malloc_trim), and the
    next stage would add its own peak on top. Nothing to do where there is no glibc."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _decontaminate(
    s: RawSplit, removed: dict, index, n, specials, min_piece, pool, depth: int, touched: list | None = None
) -> dict:
    """{unit: pieces} of the train split's kept units that hold protected n-grams ([] = drop it whole).
    Chunks are scanned and cut (decontaminate.unit_pieces) on the `pool`'s threads (numpy releases the GIL),
    results taken in order. `touched` (`_units_to_scan` of `_count_train_units`' entries): per chunk, the
    units that can hold a protected n-gram; only they are scanned (gathered, `_gather_units`), so the scan's
    cost follows the matching text, not the split. The same cuts either way: an n-gram's units are all
    among them, so every protected n-gram of the chunk is one of the gathered runs'."""
    cuts = {}
    chunks = _scan_chunks(s)
    pretrain, eot = s.family == "pretrain", s.meta.get("eot_id")
    gap = int(np.flatnonzero(specials)[0]) if specials.any() else None

    def work(item):
        (_, ids, starts), units = item
        n_units, ends = len(starts), np.append(starts[1:], len(ids))
        if units is not None and gap is not None:
            sizes = (ends - starts)[units]
            ids, starts = _gather_units(ids, np.append(starts, len(ids)), units, gap)
            ends = starts + sizes
        else:
            units = None
        mask = covered(ids, index, n, specials)
        hit = np.flatnonzero(np.add.reduceat(mask, starts) > 0) if mask.any() else np.zeros(0, dtype=np.int64)
        a, b = starts[hit], ends[hit]
        hit = hit if units is None else units[hit]  # numbered in the chunk
        if not pretrain or not len(hit):
            return n_units, hit, None
        b = b - (ids[b - 1] == eot)  # the pieces are text; each gets its own eot
        unit, lo, hi = unit_pieces(mask, a, b, min_piece)
        return n_units, hit, (np.bincount(unit, minlength=len(hit)), lo.tolist(), hi.tolist())

    first = 0
    items = zip(chunks, touched, strict=True) if touched is not None else ((c, None) for c in chunks)
    for n_units, hit, pieces in _bounded_map(pool, work, items, depth=depth):
        at = 0
        for j, k in enumerate(hit.tolist()):
            count = int(pieces[0][j]) if pieces else 0
            if first + k not in removed:
                cuts[first + k] = list(zip(pieces[1][at : at + count], pieces[2][at : at + count])) if pieces else []
            at += count
        first += n_units
    return cuts


def curate(
    cfg: dict,
    *,
    cache_dir: str,
    raw_dirs: list[str],
    tokenizer_path: str,
    num_threads: int = 2,
    log: Callable[[str], object] = log_line,
) -> dict:
    """Decide what every raw cache keeps; write the decisions files and the summary; return the summary.
    `num_threads` key the documents (the result does not depend on it)."""
    from niels_gpt.tokenizer import SentencePieceTokenizer

    dcfg, xcfg, n = cfg["dedup"], cfg["decontamination"], cfg["leakage"]["n_tokens"]
    known = PRETRAIN_SOURCES + SFT_SOURCES
    unknown = [s for s in dcfg["source_priority"] or [] if s not in known]
    if unknown:
        raise ValueError(
            f"dedup.source_priority: unknown source(s) {', '.join(unknown)}; expected names of {', '.join(known)}"
        )
    tokenizer = SentencePieceTokenizer(tokenizer_path)
    specials = special_table(tokenizer.special_ids.values())
    found = {parse_raw_dir(cache_dir, d): Path(d) for d in raw_dirs}
    splits = ordered_splits(found, dcfg["source_priority"])
    for s in splits:
        s.budget = _budgets(cfg, s)
    # 1-2: keys and duplicates, per family
    reason_of: dict[int, dict[int, int]] = {no: {} for no in range(len(splits))}  # split -> unit -> reason
    example_of: dict[int, list] = {no: [] for no in range(len(splits))}
    lengths: dict[int, np.ndarray] = {}
    for family in ("pretrain", "sft"):
        units = _Units()
        tmp = Path(decisions_dir(cache_dir))
        tmp.mkdir(parents=True, exist_ok=True)
        with SignatureFiles(tmp, bands=dcfg["bands"], rows=dcfg["rows"]) as sigs:
            if family == "pretrain":
                table = WordTable.from_tokenizer(tokenizer)
                rows = _pretrain_keys(splits, units, table, dcfg, sigs, log, num_threads)
            else:
                _sft_keys(splits, units)
                rows = 0
            units.done()
            sigs.done()
            if dcfg["enabled"] and len(units.keys):
                if family == "pretrain" and rows:
                    reason, survivor, sim = deduplicate(
                        units.keys,
                        sigs,
                        bands=dcfg["bands"],
                        rows=dcfg["rows"],
                        threshold=dcfg["jaccard_threshold"],
                        near=dcfg["near"],
                        num_threads=num_threads,
                    )
                else:
                    removed, survivor = exact_duplicates(units.keys)
                    reason, sim = np.where(removed, EXACT, KEEP).astype(np.int8), np.zeros(len(removed))
                for g in np.flatnonzero(reason != KEEP).tolist():
                    no, u = int(units.split[g]), int(units.index[g])
                    reason_of[no][u] = int(reason[g])
                    if sum(1 for e in example_of[no] if e["reason"] == REASONS[reason[g]]) < EXAMPLES:
                        k = int(survivor[g])
                        kept = f"{splits[units.split[k]].name} #{int(units.index[k])}"
                        example_of[no].append(
                            {
                                "unit": u,
                                "reason": REASONS[int(reason[g])],
                                "kept": kept,
                                "similarity": round(float(sim[g]), 4),
                            }
                            if reason[g] == NEAR
                            else {"unit": u, "reason": REASONS[int(reason[g])], "kept": kept}
                        )
        for no in range(len(splits)):
            if splits[no].family == family:
                lengths[no] = units.length[units.split == no]
        decided = [v for no, d in reason_of.items() if splits[no].family == family for v in d.values()]
        kinds = (EXACT, NEAR) if family == "pretrain" else (EXACT,)
        log(f"{family}: {len(units.keys):,} units; " + ", ".join(f"{REASONS[r]} {decided.count(r):,}" for r in kinds))
        del units
        _release_freed_memory()
    # 3-5: protected n-grams, train scans
    pieces: dict[int, dict[int, list]] = {no: {} for no in range(len(splits))}
    waived = np.zeros(0, dtype=np.uint64)
    if xcfg["enabled"]:
        sides = [
            _val_hashes(s, reason_of[no], s.budget, n, specials) for no, s in enumerate(splits) if s.split == "val"
        ]
        sides += benchmark_hashes(xcfg["benchmarks"], tokenizer, n, log)
        index = protected_index([sorted_unique(h) for h, _ in sides])  # each side's repeats dropped first
        limit = xcfg["max_ngram_units"]
        counts = _side_counts(index, sides) if limit is not None else None
        del sides  # the scans below hold the index and the counts, not the val n-grams
        _release_freed_memory()
        touched = {}  # per train split, per scan chunk: the units that can hold a protected n-gram
        if limit is not None:  # boilerplate: n-grams in more than `limit` units, counted over every split
            waiver = _WaiverScan(index, counts, limit)
            with ThreadPoolExecutor(max_workers=max(1, num_threads)) as pool:
                for no, s in enumerate(splits):
                    if s.split == "train":
                        depth = 2 * max(1, num_threads)
                        touched[no] = _count_train_units(s, index, n, specials, pool, depth, counts, limit, waiver)
            del waiver
            waived = _boilerplate(index, counts, limit)
            live = counts <= limit
            touched = {no: [_units_to_scan(t, live) for t in entries] for no, entries in touched.items()}
            if len(waived):
                index = index.with_skip(~live)
            del counts
            _release_freed_memory()
        log(
            f"{len(index):,} protected {n}-grams (val splits + {len(xcfg['benchmarks'])} benchmark files); "
            f"{len(waived):,} waived as boilerplate (in more than {limit} units)"
        )
        with ThreadPoolExecutor(max_workers=max(1, num_threads)) as pool:
            for no, s in enumerate(splits):
                if s.split != "train":
                    continue
                cuts = _decontaminate(
                    s,
                    reason_of[no],
                    index,
                    n,
                    specials,
                    xcfg["min_piece_tokens"],
                    pool,
                    2 * max(1, num_threads),
                    touched.get(no),
                )
                for u, kept in cuts.items():
                    if kept:
                        pieces[no][u] = kept
                    else:
                        reason_of[no][u] = CONTAMINATED
                whole = sum(not k for k in cuts.values())
                log(f"{s.name}: {len(cuts):,} units hold protected {n}-grams ({whole:,} dropped whole)")
    # 6: budgets, counts, files
    files = {}
    for no, s in enumerate(splits):
        record = _split_record(s, lengths[no], reason_of[no], pieces[no], example_of[no])
        files.setdefault((s.family, s.source, s.part), {})[s.split] = record
    summary = {
        "format_version": CURATION_FORMAT_VERSION,
        "settings": {"dedup": dcfg, "decontamination": xcfg, "n_tokens": n},
        "caches": {},
    }
    for (family, source, part), by_split in sorted(files.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2] or "")):
        doc = {
            "format_version": CURATION_FORMAT_VERSION,
            "family": family,
            "source": source,
            "part": part,
            "splits": by_split,
        }
        _write_decisions(decisions_path(cache_dir, family, source, part), doc)
        name = f"{family}/{source}" + (f"/{part}" if part else "")
        summary["caches"][name] = {
            sp: {k: r[k] for k in ("read_tokens", "kept_tokens", "shortfall_tokens", "counts")}
            for sp, r in by_split.items()
        }
    for family, source, part in found:  # caches not built: an empty decision
        if (family, source, part) not in files:
            doc = {
                "format_version": CURATION_FORMAT_VERSION,
                "family": family,
                "source": source,
                "part": part,
                "splits": {},
            }
            _write_decisions(decisions_path(cache_dir, family, source, part), doc)
    summary["waived_ngrams"] = len(waived)
    with atomic_open(waived_path(cache_dir), "wb") as f:
        np.save(f, np.sort(waived).astype("<u8"), allow_pickle=False)
    atomic_write_json(summary_path(cache_dir), summary)
    return summary


def _write_decisions(path: str, doc: dict) -> None:
    """Compact canonical JSON (sorted keys, no spaces): a decisions file can list millions of numbers."""
    atomic_write_text(path, json.dumps(doc, sort_keys=True, separators=(",", ":")) + "\n")


def _split_record(s: RawSplit, lengths: np.ndarray, reasons: dict, pieces: dict, examples: list) -> dict:
    eot_extra = 1 if s.family == "pretrain" else 0
    kept_len = lengths.copy()
    counts: dict[str, dict[str, int]] = {}

    def count(reason: str, units: int, tokens: int) -> None:
        c = counts.setdefault(reason, {"units": 0, "tokens": 0})
        c["units"] += units
        c["tokens"] += tokens

    for u, r in reasons.items():
        kept_len[u] = 0
        count(REASONS[r], 1, int(lengths[u]))
    for u, kept in pieces.items():
        new = sum(b - a + eot_extra for a, b in kept)
        count("contamination_cut", 1, int(lengths[u]) - sum(b - a for a, b in kept) - eot_extra)
        kept_len[u] = new
    total = int(kept_len.sum())
    final = total if s.budget is None else min(total, s.budget)
    if total > final:
        count("over_budget", 0, total - final)
    units = sorted(reasons)
    cut = sorted(pieces)
    read = int(lengths.sum())
    read_budget = s.meta.get(f"max_{s.split}_tokens") if s.family == "pretrain" else None
    margin_used_up = read_budget is not None and read >= read_budget  # the source had more text than was read
    return {
        "budget": s.budget,
        "read_budget": read_budget,
        "read_tokens": read,
        "units": len(lengths),
        "kept_tokens": final,
        "shortfall_tokens": max(0, s.budget - final) if s.budget is not None and margin_used_up else 0,
        "removed": {"units": units, "reasons": [REASONS[reasons[u]] for u in units]},
        "pieces": {
            "units": cut,
            "counts": [len(pieces[u]) for u in cut],
            "bounds": [x for u in cut for a, b in pieces[u] for x in (a, b)],
        },
        "counts": dict(sorted(counts.items())),
        "examples": examples,
    }
