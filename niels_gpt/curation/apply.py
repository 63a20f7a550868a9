"""Apply the curation decisions to one raw cache: its curated copy at the usual path.

Pretrain (`apply_pretrain`): the raw documents in order; a removed one is skipped, a cut one is written
as its pieces (each with its eot), the rest as they are; writing stops at the split's final budget (the
document crossing it is cut there, as the writer cuts it). Shards, sha256 and meta.json exactly as the
pretrain writer writes them (shards.py), meta.json last; the raw meta's fields are kept, the token and
document counts and budgets are the curated ones, and `curation` records what was removed (units and
tokens per reason), the tokens read and the shortfall, with the settings.
SFT (`apply_sft`): the kept examples, in order, with their offsets; meta.json's counts recomputed.
A cache that was not built is copied through ("not built" meta.json, empty splits).
"""

from __future__ import annotations

import hashlib
import io
import json
import shutil
from pathlib import Path

import numpy as np

from niels_gpt import layout
from niels_gpt.atomic import StagedFiles
from niels_gpt.chat_template import loss_mask_from_tokens
from niels_gpt.curation.raw import doc_chunks
from niels_gpt.layout import FORMAT_VERSION, META, SPLITS
from niels_gpt.meta import is_built, read_meta, unpublish, write_meta
from niels_gpt.pretrain.shards import ShardWriter, prepare_out_dir, run_writers
from niels_gpt.token_files import OFFSET_DTYPE, TOKEN_DTYPE, DiskSequence, list_shards


def _record(decisions: dict, split: str, settings: dict) -> dict:
    d = decisions["splits"].get(split, {})
    keys = ("budget", "read_budget", "read_tokens", "kept_tokens", "shortfall_tokens", "counts", "examples")
    return {k: d.get(k) for k in keys}


def cut_pieces(d: dict) -> dict[int, list[tuple[int, int]]]:
    """{unit: [(start, end), ...]} of a split's decisions (its flat `pieces` lists)."""
    p, out, at = d["pieces"], {}, 0
    for u, count in zip(p["units"], p["counts"]):
        b = p["bounds"][at : at + 2 * count]
        out[u] = list(zip(b[0::2], b[1::2]))
        at += 2 * count
    return out


def _curation_meta(decisions: dict, settings: dict) -> dict:
    return {"splits": {split: _record(decisions, split, settings) for split in SPLITS}, "settings": settings}


def _copy_not_built(raw_dir: Path, out_dir: Path, files: list[str]) -> dict:
    meta = read_meta(raw_dir / META)
    unpublish(out_dir / META)
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in files:
        src, dst = raw_dir / name, out_dir / name
        if src.is_dir():
            shutil.rmtree(dst, ignore_errors=True)
            shutil.copytree(src, dst)
        elif src.is_file():
            shutil.copyfile(src, dst)
    write_meta(out_dir / META, meta)
    return meta


class _Counter:
    """Writes through a ShardWriter and counts the documents written (a cut last one counts)."""

    def __init__(self, writer: ShardWriter, eot: int):
        self.writer, self.eot, self.eots, self.open_doc = writer, eot, 0, False

    def write(self, ids: np.ndarray) -> None:
        done = self.writer.write(ids)
        if done:
            self.eots += int(np.count_nonzero(ids[:done] == self.eot))
            self.open_doc = bool(ids[done - 1] != self.eot)

    @property
    def documents(self) -> int:
        return self.eots + int(self.open_doc)


def _write_pretrain_split(raw_dir: Path, split: str, d: dict, writer: ShardWriter, eot: int) -> int:
    """Write the kept documents of one split; returns the documents written. Each chunk's kept runs and
    pieces go to the writer as one array (its shards are cut by token count, so the bytes are those of
    writing them one by one: ~470 k writes at full size cost 3.8 of the job's 5.8 s)."""
    removed, pieces = set(d["removed"]["units"]), cut_pieces(d)
    special = np.array(sorted(removed | set(pieces)), dtype=np.int64)  # an array: searched once per chunk
    out, first = _Counter(writer, eot), 0
    eot_arr = np.array([eot], dtype=TOKEN_DTYPE)
    for _, ids, starts in doc_chunks(DiskSequence(list_shards(raw_dir / split), TOKEN_DTYPE), eot):
        lo, hi = np.searchsorted(special, first), np.searchsorted(special, first + len(starts))
        kept, pos = [], 0  # pos: next document (in this chunk) not yet taken
        for u in special[lo:hi].tolist():
            k = u - first
            if k > pos:
                kept.append(ids[starts[pos] : starts[k]])
            for a, b in pieces.get(u, []):
                kept += (ids[starts[k] + a : starts[k] + b], eot_arr)
            pos = k + 1
        if pos < len(starts):
            kept.append(ids[starts[pos] :])
        if kept:
            out.write(np.concatenate(kept))
        first += len(starts)
        if writer.full:
            break
    return out.documents


def apply_pretrain(raw_dir, out_dir, decisions_file, *, shard_bytes: int, settings: dict) -> dict:
    """Write the curated copy of the raw pretrain cache `raw_dir` into `out_dir`; returns its meta."""
    raw_dir, out_dir = Path(raw_dir), Path(out_dir)
    raw_meta = read_meta(raw_dir / META)
    if not is_built(raw_meta):
        return _copy_not_built(raw_dir, out_dir, list(SPLITS))
    decisions = json.loads(Path(decisions_file).read_text(encoding="utf-8"))
    prepare_out_dir(out_dir)
    writers = {
        split: ShardWriter(out_dir / split, shard_bytes=shard_bytes, budget=decisions["splits"][split]["kept_tokens"])
        for split in SPLITS
    }
    counted = {}

    def fill() -> dict:
        for split in SPLITS:
            counted[split] = _write_pretrain_split(
                raw_dir, split, decisions["splits"][split], writers[split], raw_meta["eot_id"]
            )
        return {}

    extra = run_writers(writers, fill)
    meta = dict(raw_meta)
    meta.update(extra)
    meta["format_version"] = FORMAT_VERSION
    meta["shard_bytes"] = shard_bytes
    for split in SPLITS:
        meta[f"{split}_documents"] = counted[split]
        meta[f"max_{split}_tokens"] = decisions["splits"][split]["budget"]
    meta["curation"] = _curation_meta(decisions, settings)
    write_meta(out_dir / META, meta)
    return meta


def apply_sft(raw_dir, out_dir, decisions_file, *, settings: dict) -> dict:
    """Write the curated copy of the raw SFT cache `raw_dir` into `out_dir`; returns its meta."""
    raw_dir, out_dir = Path(raw_dir), Path(out_dir)
    raw_meta = read_meta(raw_dir / META)
    if not is_built(raw_meta):
        return _copy_not_built(raw_dir, out_dir, [n for n in layout.sft_file_names() if n != META])
    decisions = json.loads(Path(decisions_file).read_text(encoding="utf-8"))
    out_dir.mkdir(parents=True, exist_ok=True)
    unpublish(out_dir / META, [out_dir / n for n in layout.sft_file_names() if n != META])
    meta = json.loads(json.dumps(raw_meta))
    files = {}
    with StagedFiles() as staged:
        for split in SPLITS:
            d = decisions["splits"][split]
            tokens = np.fromfile(raw_dir / layout.sft_tokens_name(split), dtype=TOKEN_DTYPE)
            offsets = np.load(raw_dir / layout.sft_offsets_name(split), allow_pickle=False)
            bounds = np.append(offsets, len(tokens))
            keep = np.ones(len(offsets), dtype=bool)
            keep[d["removed"]["units"]] = False
            lengths = np.diff(bounds)[keep]
            kept_tokens = tokens[np.repeat(keep, np.diff(bounds))]
            new_offsets = (np.cumsum(lengths) - lengths).astype(OFFSET_DTYPE)
            data = kept_tokens.astype(TOKEN_DTYPE).tobytes()
            buf = io.BytesIO()
            np.save(buf, new_offsets, allow_pickle=False)
            staged.write_bytes(out_dir / layout.sft_tokens_name(split), data)
            staged.write_bytes(out_dir / layout.sft_offsets_name(split), buf.getvalue())
            files[layout.sft_tokens_name(split)] = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
            files[layout.sft_offsets_name(split)] = {
                "sha256": hashlib.sha256(buf.getvalue()).hexdigest(),
                "bytes": len(buf.getvalue()),
            }
            mask = loss_mask_from_tokens(kept_tokens, raw_meta["special_token_ids"], example_starts=new_offsets)
            stats = meta["splits"][split]
            stats["num_examples"] = int(keep.sum())
            stats["num_tokens"] = len(kept_tokens)
            stats["num_label_tokens"] = int(np.count_nonzero(mask))
            meta[f"{split}_examples"] = int(keep.sum())
            meta[f"{split}_tokens"] = len(kept_tokens)
        staged.commit()
    meta["files"] = files
    meta["format_version"] = FORMAT_VERSION
    meta["curation"] = _curation_meta(decisions, settings)
    write_meta(out_dir / META, meta)
    return meta
