"""The one SFT cache writer, for every SFT source (dolly15k, oasst1, primer).

Output in `out_dir` (formats.py):
  {train,val}_tokens.bin  uint16 LE, each example's full `render_chat_sft` input_ids, back to back
  {train,val}_idx.npy     int64 start offsets (np.save), offsets-only: example i is
                          tokens[idx[i]:idx[i+1]], the last runs to the end of the file
  meta.json               seed 000's required fields + seed 001's (source, splits.*.num_examples /
                          num_tokens / num_label_tokens, val_frac, seed, T_max, truncation), per-split
                          num_dropped, files with sha256, tokenizer sha256, format_version, provenance

Examples are stored whole (not cut to T_max): the dataset cuts at read time, head or tail, after
computing the loss mask on the whole example. An example is dropped at build time only if no
loss-active target falls inside the T_max+1 tokens its truncation keeps (it could never contribute
to the loss); `num_dropped` counts them per split. An example with no assistant message is refused.

Split: `niels_gpt.splits` by example, or by group when `group_keys` is given (oasst1 passes tree
ids so all threads of a tree land in one split). Order within a split is input order.

Memory: the examples are buffered (as (role, content) string pairs) because the split needs every
group key before the first write; SFT sets are small (dolly 15k rows, oasst1 ~10k threads: tens of
MB of text). Token ids are never held for more than one batch: they are stream-written.

Atomicity: stale outputs are removed first (meta.json first), files are written under `*.tmp` and
renamed when all are complete, meta.json last. A failed build leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

from niels_gpt.atomic import tmp_path_for
from niels_gpt.cache.formats import FORMAT_VERSION, OFFSET_DTYPE, TOKEN_DTYPE, TOKEN_DTYPE_NAME, check_vocab_fits
from niels_gpt.cache.meta import REQUIRED_SFT, check_required, write_meta
from niels_gpt.chat_template import IGNORE_INDEX, normalize_messages, render_chat_sft_batch
from niels_gpt.splits import SPLIT_RULE, val_groups, val_mask

SPLITS = ("train", "val")
ENCODE_BATCH = 512  # examples per encode_batch call: large enough to amortize, small enough to stream
TRUNCATIONS = ("head", "tail")
TEMPLATE = "<role> content <eot> per message; labels on assistant content + its eot (chat_template.py)"


def output_names() -> list[str]:
    """Every file the writer produces, meta.json first (the order stale outputs are removed in)."""
    return ["meta.json"] + [f"{s}_{kind}" for s in SPLITS for kind in ("tokens.bin", "idx.npy")]


def remove_outputs(out_dir: str | os.PathLike) -> None:
    """Remove a previous cache (meta.json first, so a half-removed cache never looks complete)."""
    for name in output_names():
        for p in (Path(out_dir) / name, tmp_path_for(Path(out_dir) / name)):
            with contextlib.suppress(FileNotFoundError):
                p.unlink()


def _messages_of(example: Any) -> Any:
    if hasattr(example, "messages"):  # ChatSample
        return example.messages
    if isinstance(example, dict) and "messages" in example:  # a primer.jsonl object
        return example["messages"]
    return example


def _buffer(examples: Iterable, source: str | None) -> list[list[tuple[str, str]]]:
    what = f"{source} example" if source else "example"
    return [normalize_messages(_messages_of(ex), where=f"{what} {i}") for i, ex in enumerate(examples)]


def window_has_target(labels: Sequence[int], t_max: int, truncation: str) -> bool:
    """Does a loss-active target fall inside the T_max+1 tokens `truncation` keeps?"""
    n = len(labels)
    lo = 0 if truncation == "head" else max(0, n - t_max - 1)
    hi = min(n, t_max + 1) if truncation == "head" else n
    return any(v != IGNORE_INDEX for v in labels[lo + 1 : hi])  # position lo is never a target


def _write_split(pairs_list, tokenizer, tmp_dir: Path, split: str, t_max: int, truncation: str, bar) -> dict:
    import numpy as np

    tokens_tmp = tmp_path_for(tmp_dir / f"{split}_tokens.bin")
    idx_tmp = tmp_path_for(tmp_dir / f"{split}_idx.npy")
    h = hashlib.sha256()
    offsets: list[int] = []
    n_tokens = n_labels = n_dropped = n_truncated = 0
    with open(tokens_tmp, "wb") as f:
        for lo in range(0, len(pairs_list), ENCODE_BATCH):
            batch = pairs_list[lo : lo + ENCODE_BATCH]
            chunk: list[int] = []
            for input_ids, labels in render_chat_sft_batch(tokenizer, batch):
                if not window_has_target(labels, t_max, truncation):
                    n_dropped += 1
                    continue
                offsets.append(n_tokens + len(chunk))
                chunk.extend(input_ids)
                n_labels += sum(1 for v in labels if v != IGNORE_INDEX)
                n_truncated += len(input_ids) > t_max + 1
            data = np.asarray(chunk, dtype=TOKEN_DTYPE).tobytes()
            f.write(data)
            h.update(data)
            n_tokens += len(chunk)
            bar.update(len(batch))
        f.flush()
        os.fsync(f.fileno())
    buf = io.BytesIO()
    np.save(buf, np.asarray(offsets, dtype=OFFSET_DTYPE), allow_pickle=False)
    idx_bytes = buf.getvalue()
    with open(idx_tmp, "wb") as f:
        f.write(idx_bytes)
        f.flush()
        os.fsync(f.fileno())
    return {
        "stats": {
            "num_examples": len(offsets),
            "num_tokens": n_tokens,
            "num_label_tokens": n_labels,
            "num_dropped": n_dropped,
            "num_truncated": n_truncated,
        },
        "files": {
            f"{split}_tokens.bin": {"sha256": h.hexdigest(), "bytes": n_tokens * TOKEN_DTYPE.itemsize},
            f"{split}_idx.npy": {"sha256": hashlib.sha256(idx_bytes).hexdigest(), "bytes": len(idx_bytes)},
        },
    }


def assign_splits(n: int, group_keys: Sequence | None, val_frac: float, seed: int) -> tuple[list[bool], dict]:
    """is_val per example (niels_gpt.splits, by example or by group) and what to record in meta."""
    if group_keys is None:
        return val_mask(n, val_frac, seed), {"split_by": "example"}
    group_keys = list(group_keys)
    if len(group_keys) != n:
        raise ValueError(f"group_keys has {len(group_keys):,} entries for {n:,} examples; give one per example")
    held_out = val_groups(group_keys, val_frac, seed)
    num_groups = {"train": len(set(group_keys) - held_out), "val": len(held_out)}
    return [g in held_out for g in group_keys], {"split_by": "group", "num_groups": num_groups}


def build_sft_cache(
    examples: Iterable,
    out_dir: str,
    *,
    tokenizer,
    val_frac: float,
    seed: int,
    t_max: int = 1024,
    truncation: Literal["head", "tail"] = "head",
    group_keys: Sequence | None = None,
    source: str | None = None,
    dataset_name: str | None = None,
    dataset_config: str | None = None,
    provenance: dict | None = None,
) -> dict:
    """Write the SFT cache of `examples` (lists of messages, or ChatSample) to `out_dir`; returns meta.

    `group_keys[i]` is example i's split group (all examples of a group land in one split); None
    splits by example. Deterministic: same examples, order and seed => byte-identical files.
    """
    from tqdm import tqdm

    if truncation not in TRUNCATIONS:
        raise ValueError(f"truncation must be one of {TRUNCATIONS}, got {truncation!r}")
    if t_max < 1:
        raise ValueError(f"t_max must be >= 1, got {t_max}")
    check_vocab_fits(tokenizer.vocab_size, what=getattr(tokenizer, "model_path", "tokenizer"))
    out = Path(out_dir)
    created = not out.exists()
    remove_outputs(out)
    try:
        pairs_list = _buffer(examples, source)
        is_val, split_info = assign_splits(len(pairs_list), group_keys, val_frac, seed)
        out.mkdir(parents=True, exist_ok=True)
        splits, files = {}, {}
        bar = tqdm(total=len(pairs_list), desc=f"sft {source or out.name}", unit="ex", file=sys.stderr,
                   disable=not sys.stderr.isatty())  # fmt: skip
        with bar:
            for split in SPLITS:
                chosen = [p for p, v in zip(pairs_list, is_val) if v == (split == "val")]
                res = _write_split(chosen, tokenizer, out, split, t_max, truncation, bar)
                splits[split] = res["stats"]
                files.update(res["files"])
                if "num_groups" in split_info:
                    splits[split]["num_groups"] = split_info["num_groups"][split]
        _publish(out, files)  # every file complete: move them into place, then meta.json last
        meta = {
            **_meta_header(source, dataset_name, dataset_config, seed, tokenizer),
            "built": True,
            "split_rule": f"{SPLIT_RULE}; by {split_info['split_by']}",
            "split_by": split_info["split_by"],
            "val_frac": val_frac,
            "T_max": t_max,
            "truncation": truncation,
            "template": TEMPLATE,
            "offset_dtype": "int64-le",
            "num_input_examples": len(pairs_list),
            "train_examples": splits["train"]["num_examples"],
            "val_examples": splits["val"]["num_examples"],
            "train_tokens": splits["train"]["num_tokens"],
            "val_tokens": splits["val"]["num_tokens"],
            "num_dropped": {s: splits[s]["num_dropped"] for s in SPLITS},
            "splits": splits,
            "files": files,
            "provenance": provenance or {},
        }
        check_required(meta, REQUIRED_SFT, path=str(out / "meta.json"))
        write_meta(str(out / "meta.json"), meta)
        return meta
    except BaseException:
        remove_outputs(out)
        if created:
            with contextlib.suppress(OSError):
                out.rmdir()  # only if empty: never removes anything we did not write
        raise


def write_not_built(
    out_dir: str | os.PathLike, *, source: str, reason: str, seed: int, tokenizer=None,
    dataset_name: str | None = None, dataset_config: str | None = None,
) -> dict:  # fmt: skip
    """A disabled source: empty split files (so every declared output exists) + meta with built=false.

    Readers check `built` (SFTExampleDataset.from_cache_dir refuses such a cache with `reason`).
    """
    out = Path(out_dir)
    remove_outputs(out)
    out.mkdir(parents=True, exist_ok=True)
    files = {}
    for split in SPLITS:
        files.update(_write_split([], tokenizer, out, split, 1, "head", _NoBar())["files"])
    _publish(out, files)
    meta = {
        **_meta_header(source, dataset_name, dataset_config, seed, tokenizer),
        "built": False,
        "reason": reason,
        "split_rule": None,
        "train_examples": 0,
        "val_examples": 0,
        "files": files,
    }
    write_meta(str(out / "meta.json"), meta)
    return meta


def _meta_header(source, dataset_name, dataset_config, seed: int, tokenizer) -> dict:
    """The meta fields every SFT cache has, built or not (seed 000's common fields among them)."""
    return {
        "kind": "sft",
        "format_version": FORMAT_VERSION,
        "source": source,
        "dataset_name": dataset_name if dataset_name is not None else source,
        "dataset_config": dataset_config,
        "seed": seed,
        "token_dtype": TOKEN_DTYPE_NAME,
        "tokenizer_sha256": getattr(tokenizer, "sha256", None),
        "vocab_size": getattr(tokenizer, "vocab_size", None),
        "special_token_ids": dict(tokenizer.special_ids) if tokenizer is not None else None,
    }


def _publish(out: Path, files: dict) -> None:
    """Rename every complete `name.tmp` of `files` onto its final name."""
    for name in files:
        os.replace(tmp_path_for(out / name), out / name)


class _NoBar:
    def update(self, n: int) -> None:
        pass
