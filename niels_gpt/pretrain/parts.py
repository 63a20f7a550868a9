"""Scale-out of one streamed pretrain source: part budgets and seeds, and the merge of the parts.

With `pretrain.num_parts` = N > 1, a streamed source (registry.STREAMED_SOURCES: fineweb_edu, gutenberg)
is tokenized by N independent jobs (separate cluster nodes) and merged by one:

  {source_dir}/parts/part_{k:03d}/{train,val}/shard_NNNNN.bin + meta.json   part k: `build-pretrain --part k`
  {source_dir}/meta.json                                                   merged: `merge-pretrain`, a manifest

Part k (0 <= k < N) is a complete cache in the usual format, written by writer.py:
- it reads `ds.shard(num_shards=N, index=k, contiguous=True)` of the stream, taken BEFORE the buffer
  shuffle (hub.shard_parts): parts are disjoint and together cover the stream. A streamed dataset
  splits by data file, so it needs at least N files (fewer is an error naming both numbers);
- its train/val split is the single-stream rule with seed `part_seed(seed, k)` = sampling.derive_seed(seed,
  k): splitmix64(splitmix64(seed) ^ k) folded to 32 bits, so parts never share a draw sequence;
- its budgets are `part_budget(B, N, k)` = B // N, plus one token for k < B % N (the parts add up to B
  exactly; None, unlimited, stays None). A part whose data runs out before its share leaves that
  shortfall unfilled (parts cannot see each other); the merge logs it and meta records every part.
- its meta.json has `provenance.part` = {index, num_parts, seed (the config seed), part_seed,
  max_train_tokens, max_val_tokens (the source's whole budgets)}.

Merge (`merge_pretrain_parts`): writes only `{source_dir}/meta.json`, a manifest (shard_list.py) that lists per
split, in part order 0..N-1, every part's shard files (paths relative to the source folder, so it moves or
copies as a whole), each with its token count and sha256 from its part's meta.json; no token is copied, so
the merge's bytes and time grow with the number of files, not of tokens. Each listed file is checked by size
against its part's meta (verify re-hashes them). A part whose split ends in a budget-cut document (no eot)
and that a later part's tokens follow gets `end_eot` on its last file: readers see eot in place of that
file's last token, so documents stay eot-separated and totals stay exact (`part_boundary_cuts` counts them),
and every reader sees the ids a copy of the parts into one stream would hold. The old meta.json is removed
first and the new one written last and atomically: a merge stopped anywhere leaves no manifest. Same parts
=> byte-identical manifest.
Merged meta: the common header (the parts' dataset and tokenizer; `seed` = the config seed), the whole
budgets, `split_rule` naming the parts, `cleaning` and `documents_seen` added up over the parts, the parts'
`shard_bytes` (they must agree), `num_parts`, and `parts`: [{index, meta (its meta.json, relative), meta_sha256,
train_tokens, val_tokens, train_documents, val_documents, max_train_tokens, max_val_tokens}]; a part rebuilt
after the merge changes its meta.json, and readers and verify call the manifest stale. A part may hold no val
tokens on its own; the merge fails, like a one-job build, when the whole source would hold none
(record.check_splits_filled).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np

from niels_gpt.atomic import TMP_SUFFIX
from niels_gpt.hashing import sha256_file
from niels_gpt.layout import META, SHARD_GLOB, SPLITS, part_name
from niels_gpt.log import log as log_line
from niels_gpt.meta import header, read_meta, unpublish, write_meta
from niels_gpt.pretrain.record import ON_PURPOSE, add_counts, check_splits_filled
from niels_gpt.sampling import derive_seed
from niels_gpt.shard_list import split_shards
from niels_gpt.token_files import TOKEN_BYTES, TOKEN_DTYPE

# Fields every part must agree on (they describe the tokens or the dataset, not the part)
SAME_IN_EVERY_PART = (
    "format_version",
    "token_dtype",
    "tokenizer_sha256",
    "vocab_size",
    "special_token_ids",
    "eot_id",
    "document_separator",
    "dataset_name",
    "dataset_config",
    "dataset_revision",
    "streaming",
    "determinism",
    "val_doc_prob",
    "shuffle_buffer",
    "shard_bytes",  # the parts' shards are the merged cache's shards
)
PART_RECORD_SAME = ("num_parts", "seed", "max_train_tokens", "max_val_tokens")
PARTS_SPLIT_RULE = (
    "{n} parts, merged: part k reads datasets shard(num_shards={n}, index=k, contiguous=True) of the stream, "
    "taken before the buffer shuffle; within part k, with budgets B // {n} + (1 if k < B % {n}) and "
    "seed_k = splitmix64(splitmix64(seed) ^ k) folded to 32 bits (niels_gpt.sampling.derive_seed(seed, k)): {rule}. "
    "Merge: the train (and the val) shards of parts 0..{last} listed in part order (a manifest, nothing copied); "
    "a part's budget-cut last document that a later part's tokens follow is read with eot in place of its last "
    "token"
)
RULE_PREFIX = "single stream: "


def part_budget(budget: int | None, num_parts: int, part: int) -> int | None:
    """Part `part`'s share of `budget`: budget // num_parts, one more for part < budget % num_parts."""
    if budget is None:
        return None
    return budget // num_parts + (1 if part < budget % num_parts else 0)


def part_seed(seed: int, part: int) -> int:
    """The split-rule seed of part `part`: sampling.derive_seed(seed, part) (splitmix64, 32 bits)."""
    return derive_seed(seed, part)


def part_record(*, index: int, num_parts: int, seed: int, max_train_tokens, max_val_tokens) -> dict:
    """What a part's meta.json carries in provenance["part"] (the merge checks it)."""
    return {
        "index": index,
        "num_parts": num_parts,
        "seed": seed,
        "part_seed": part_seed(seed, index),
        "max_train_tokens": max_train_tokens,
        "max_val_tokens": max_val_tokens,
    }


def stale_parts(parts_dir: Path, num_parts: int) -> list[str]:
    """part_* folders beyond part num_parts-1 (left by a build with more parts; the merge ignores them)."""
    wanted = {part_name(k) for k in range(num_parts)}
    return sorted(p.name for p in parts_dir.glob("part_*") if p.is_dir() and p.name not in wanted)


def _read_parts(parts_dir: Path, num_parts: int, source: str | None) -> list[dict]:
    """Every part's meta.json, checked: present, built, the right index, one config, one tokenizer."""
    how = (
        f"build it: snakemake -j4 cache/all, or build-pretrain --source {source or '<source>'} "
        f"--set pretrain.num_parts={num_parts} --part K"
    )
    metas = []
    for k in range(num_parts):
        path = parts_dir / part_name(k) / META
        if not path.is_file():
            raise FileNotFoundError(
                f"{path}: part {k} of {num_parts} is missing or unfinished; {how.replace('K', str(k))}"
            )
        meta = read_meta(path)
        rec = (meta.get("provenance") or {}).get("part")
        if not meta.get("built") or not isinstance(rec, dict):
            raise ValueError(f"{path}: not a built part cache (built={meta.get('built')}, no provenance.part); {how}")
        if rec.get("index") != k or rec.get("num_parts") != num_parts:
            raise ValueError(
                f"{path}: is part {rec.get('index')} of {rec.get('num_parts')}, expected part {k} of {num_parts}; {how}"
            )
        if source is not None and meta["provenance"].get("source") != source:
            raise ValueError(f"{path}: a part of source {meta['provenance'].get('source')!r}, not {source!r}")
        first = metas[0] if metas else meta
        for key in SAME_IN_EVERY_PART:
            if meta.get(key) != first.get(key):
                fix = (
                    "the hub moved between the part jobs: pin sources.<source>.revision to a commit"
                    if key == "dataset_revision"
                    else "every part must come from one config and tokenizer"
                )
                raise ValueError(
                    f"{path}: {key}={meta.get(key)!r} but part 0 has {first.get(key)!r}; {fix}, then rebuild the parts"
                )
        for key in PART_RECORD_SAME:
            if rec.get(key) != first["provenance"]["part"].get(key):
                raise ValueError(
                    f"{path}: provenance.part.{key}={rec.get(key)!r} but part 0 has "
                    f"{first['provenance']['part'].get(key)!r}; rebuild the parts with one config"
                )
        meta["_meta_sha256"] = sha256_file(path)
        metas.append(meta)
    return metas


def _manifest_split(out: Path, parts_dir: Path, metas: list[dict], split: str, eot: int) -> tuple[list[dict], int]:
    """The manifest's entries of `split` (every part's files in part order, paths relative to `out`) and how
    many part boundaries end a budget-cut document (marked `end_eot`). Each file is checked by its size
    against its part's meta.json; only a cut part's last token is read (2 bytes)."""
    entries, cuts = [], 0
    for k, meta in enumerate(metas):
        shards = split_shards(parts_dir / part_name(k), split, meta)
        for s in shards:
            size = s.path.stat().st_size if s.path.is_file() else None
            if size != TOKEN_BYTES * (s.tokens or 0):
                raise ValueError(
                    f"{s.path}: {'missing' if size is None else f'{size:,} bytes'}, its part's meta.json "
                    f"lists {s.tokens:,} tokens; rebuild that part"
                )
        shards = [s for s in shards if s.tokens]  # an empty file adds nothing (and has no last token)
        followed = any(m[f"{split}_tokens"] for m in metas[k + 1 :])
        for i, s in enumerate(shards):
            path = Path(os.path.relpath(s.path, out)).as_posix()
            entry = {"path": path, "part": k, "tokens": s.tokens, "sha256": s.sha256}
            # a part that is itself a manifest passes its own end_eot on (its last_id is always the eot)
            cut = i == len(shards) - 1 and followed and s.last_id is None and _last_token(s.path) != eot
            if cut or s.last_id is not None:
                entry["end_eot"] = True  # readers see eot in place of the file's last token
            cuts += int(cut)
            entries.append(entry)
    return entries, cuts


def _last_token(path: Path) -> int:
    with open(path, "rb") as f:
        f.seek(-TOKEN_BYTES, os.SEEK_END)
        return int(np.frombuffer(f.read(TOKEN_BYTES), dtype=TOKEN_DTYPE)[0])


def _merged_meta(metas: list[dict], parts_dir: Path, out: Path, manifest: dict, cuts: dict) -> dict:
    first, rec = metas[0], metas[0]["provenance"]["part"]
    n = len(metas)
    rule = first["split_rule"]
    rule = (rule[len(RULE_PREFIX) :] if rule.startswith(RULE_PREFIX) else rule).replace("(seed)", "(seed_k)")
    meta = header(
        "pretrain",
        format_version=first["format_version"],
        seed=rec["seed"],
        tokenizer=first,  # the parts' tokenizer fields (they all agree)
        dataset_name=first["dataset_name"],
        dataset_config=first["dataset_config"],
    )
    meta.update({key: first.get(key) for key in SAME_IN_EVERY_PART if key not in meta})
    prov = {k: v for k, v in first["provenance"].items() if k not in ("part", "stream")}
    prov["parts_dir"] = Path(os.path.relpath(parts_dir, out)).as_posix()
    prov["part_streams"] = [m["provenance"].get("stream") for m in metas]
    meta.update(
        max_train_tokens=rec["max_train_tokens"],
        max_val_tokens=rec["max_val_tokens"],
        split_rule=PARTS_SPLIT_RULE.format(n=n, last=n - 1, rule=rule),
        num_parts=n,
        documents_seen=sum(m.get("documents_seen", 0) for m in metas),
        cleaning=add_counts(m.get("cleaning") for m in metas),
        empty_splits={s: ON_PURPOSE.format(split=s) for s in SPLITS if rec[f"max_{s}_tokens"] == 0},
        part_boundary_cuts=cuts,
        parts=[
            {
                "index": k,
                "meta": Path(os.path.relpath(parts_dir / part_name(k) / META, out)).as_posix(),
                "train_tokens": m["train_tokens"],
                "val_tokens": m["val_tokens"],
                "train_documents": m["train_documents"],
                "val_documents": m["val_documents"],
                "max_train_tokens": m["max_train_tokens"],
                "max_val_tokens": m["max_val_tokens"],
                "meta_sha256": m["_meta_sha256"],
            }
            for k, m in enumerate(metas)
        ],
        provenance=prov,
        shards=manifest,
        **{f"{split}_tokens": sum(e["tokens"] for e in manifest[split]) for split in SPLITS},
        **{f"{split}_documents": sum(m[f"{split}_documents"] for m in metas) for split in SPLITS},
    )
    return meta


def _check_merged(tokens: dict[str, int], metas: list[dict]) -> None:
    """The whole source must fill every split whose budget is not 0 (a part alone may hold no val)."""
    first, rec = metas[0], metas[0]["provenance"]["part"]
    source = first["provenance"].get("source") or first.get("dataset_name")
    seen = sum(m.get("documents_seen", 0) for m in metas)
    blank = add_counts(m.get("cleaning") for m in metas).get("skipped_blank", 0)
    check_splits_filled(
        tokens,
        {split: rec[f"max_{split}_tokens"] for split in SPLITS},
        source=source,
        read=dict.fromkeys(SPLITS, seen),
        blank=dict.fromkeys(SPLITS, blank),
        split_setting=f"sources.{source}.val_doc_prob={first.get('val_doc_prob')}",
    )


def shortfalls(meta: dict) -> list[str]:
    """One line per part that filled less than its budget share (its data ran out)."""
    lines = []
    for p in meta["parts"]:
        for split in SPLITS:
            want = p[f"max_{split}_tokens"]
            if want is not None and p[f"{split}_tokens"] < want:
                lines.append(
                    f"{part_name(p['index'])}: {split} {p[f'{split}_tokens']:,} of its {want:,} tokens "
                    "(its data ran out; the merged cache is that much short of the budget)"
                )
    return lines


def _take_down(out: Path) -> None:
    """Remove a previous merged cache: meta.json first (from then on nothing looks complete), then the
    shards of train/ and val/ that a copy merge (format 4 and before) or a one-job build wrote, and those
    folders when nothing else is left in them (a hidden file such as Snakemake's `.snakemake_timestamp` of a
    directory output goes with its folder)."""
    splits = [out / split for split in SPLITS if (out / split).is_dir()]
    unpublish(out / META, [p for d in splits for g in (SHARD_GLOB, "*" + TMP_SUFFIX) for p in d.glob(g)])
    for d in splits:
        if all(p.name.startswith(".") and p.is_file() for p in d.iterdir()):  # else not ours: leave it
            shutil.rmtree(d)


def merge_pretrain_parts(
    parts_dir: str | os.PathLike,
    out_dir: str | os.PathLike,
    *,
    num_parts: int,
    source: str | None = None,
    log: Callable[[str], None] = log_line,
) -> dict:
    """Write `out_dir/meta.json`, the manifest of `parts_dir/part_{k:03d}` (k < num_parts); returns it."""
    if num_parts < 1:
        raise ValueError(f"num_parts must be >= 1, got {num_parts}")
    parts_dir, out = Path(parts_dir), Path(out_dir)
    if not parts_dir.is_dir():
        raise FileNotFoundError(f"{parts_dir}: no parts folder; build the parts first (build-pretrain --part K)")
    metas = _read_parts(parts_dir, num_parts, source)
    stale = stale_parts(parts_dir, num_parts)
    if stale:
        log(
            f"ignoring {', '.join(stale)} in {parts_dir}: left by a build with more parts "
            "(delete them to free the space)"
        )
    eot = metas[0]["eot_id"]
    out.mkdir(parents=True, exist_ok=True)
    _take_down(out)  # the old meta.json goes first: a merge stopped anywhere leaves none
    manifest, cuts = {}, {}
    for split in SPLITS:
        manifest[split], cuts[split] = _manifest_split(out, parts_dir, metas, split, eot)
    _check_merged({split: sum(e["tokens"] for e in manifest[split]) for split in SPLITS}, metas)
    meta = _merged_meta(metas, parts_dir, out, manifest, cuts)
    write_meta(out / META, meta)  # last, atomically: its presence means every file it lists was there
    for line in shortfalls(meta):
        log(f"warning: {line}")
    return meta
