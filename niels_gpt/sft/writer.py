"""The one SFT cache writer, for every SFT source (dolly15k, oasst1, primer).

Output in `out_dir` (names from layout.py, dtypes from token_files.py):
  {train,val}_tokens.bin  uint16 LE, each example's full `render_chat_sft` input_ids, back to back
  {train,val}_idx.npy     int64 start offsets (np.save), offsets-only: example i is
                          tokens[idx[i]:idx[i+1]], the last runs to the end of the file
  meta.json               the common header (`niels_gpt.meta.header`: kind "sft", format version,
                          seed, dataset, tokenizer sha256 / vocab size / special ids / eot id) +
                          meta.REQUIRED_SFT + source, splits.*.num_examples / num_tokens /
                          num_label_tokens / num_dropped / dropped (by reason) / num_truncated /
                          cut (by reason), val_frac, T_max, truncation, empty_splits, files
                          with sha256, provenance

Examples are stored whole (not cut to T_max): the dataset cuts at read time (windows.py), after
computing the loss mask on the whole example. An example is dropped at build time only if none of
the T_max+1 tokens its truncation keeps is a loss-active target (it could never contribute to the
loss); `dropped` counts them per split and reason (windows.DROP_REASONS), `cut` the kept examples
longer than T_max+1 by reason (windows.CUT_REASONS). An example with no assistant message is refused.

No silently empty split: a split left with 0 examples stops the build with one message (source,
split, examples read and dropped, val_frac, the fix) and nothing is published; val_frac 0 builds
without val on purpose, recorded in meta `empty_splits` ({"val": why}).

Split: `niels_gpt.splits` by example, or by group when `group_keys` is given (oasst1 passes tree
ids so all threads of a tree land in one split). Order within a split is input order.

Rendering: batches of ENCODE_BATCH examples go to `num_threads` worker processes
(tokenizer/workers.py) that encode the contents and lay out the template (`chat_template.render_chats`),
returning uint16 tokens, the loss mask and lengths; this process only judges, filters and writes, in
input order, so the bytes do not depend on the number of workers.

Memory: the examples are buffered (as (role, content) string pairs) because the split needs every
group key before the first write; SFT sets are small (dolly 15k rows, oasst1 ~10k threads: tens of
MB of text). Token ids are never held for more than a few batches: they are stream-written.

Atomicity: the previous cache is taken down first (`meta.unpublish`: meta.json first); the four files
are one `atomic.StagedFiles`, written under `*.tmp` and renamed only when all are complete, then
meta.json is written last. A failed build leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np

from niels_gpt.atomic import StagedFiles
from niels_gpt.chat_template import RenderedChats, normalize_messages, render_chats
from niels_gpt.data.registry import SFT_SOURCES
from niels_gpt.layout import FORMAT_VERSION, META, SPLITS, sft_file_names, sft_offsets_name, sft_tokens_name
from niels_gpt.log import progress
from niels_gpt.meta import header, not_built, unpublish, write_meta
from niels_gpt.sft.windows import CUT_REASONS, DROP_REASONS, check_truncation, drop_codes, kept_segments
from niels_gpt.splits import SPLIT_RULE, val_groups, val_mask
from niels_gpt.token_files import OFFSET_DTYPE, OFFSET_DTYPE_NAME, TOKEN_DTYPE, TOKEN_DTYPE_NAME, check_vocab_fits
from niels_gpt.tokenizer.workers import EncodeWorkers

# Examples per batch a worker renders (~250k tokens of chat text, ~0.1 s): large enough to amortize
# the hand-over between processes, small enough to stream.
ENCODE_BATCH = 512
TEMPLATE = "<role> content <eot> per message; labels on assistant content + its eot (chat_template.py)"


def remove_outputs(out_dir: str | os.PathLike) -> None:
    """Take a previous cache down (`meta.unpublish`: meta.json first, so a half-removed cache never looks
    complete, then its files and their temporaries)."""
    out = Path(out_dir)
    unpublish(out / META, [out / name for name in sft_file_names() if name != META])


def _messages_of(example: Any) -> Any:
    if hasattr(example, "messages"):  # ChatSample
        return example.messages
    if isinstance(example, dict) and "messages" in example:  # a primer.jsonl object
        return example["messages"]
    return example


def _buffer(examples: Iterable, source: str | None) -> list[list[tuple[str, str]]]:
    what = f"{source} example" if source else "example"
    return [normalize_messages(_messages_of(ex), where=f"{what} {i}") for i, ex in enumerate(examples)]


def judge(rendered: RenderedChats, t_max: int, truncation: str) -> tuple[np.ndarray, np.ndarray]:
    """For each rendered example: (drop code, cut code) of windows.py at T_max (0 = kept / whole)."""
    starts = np.cumsum(rendered.lengths) - rendered.lengths
    segments = kept_segments(rendered.mask, starts, rendered.lengths, t_max, truncation)
    return drop_codes(rendered.mask, starts, rendered.lengths, segments), segments.cut


def _write_split(
    rendered_batches, staged: StagedFiles, out: Path, split: str, t_max: int, truncation: str, bar
) -> dict:
    """Judge, filter and stream-write one split's rendered batches as files of `staged` (temporary
    names until it is committed); returns the split's stats and files."""
    tokens_name, offsets_name = sft_tokens_name(split), sft_offsets_name(split)
    h = hashlib.sha256()
    offsets: list[int] = []
    n_input = n_tokens = n_labels = 0
    dropped, cut = np.zeros(len(DROP_REASONS) + 1, np.int64), np.zeros(len(CUT_REASONS[truncation]) + 1, np.int64)
    f = staged.open(out / tokens_name)
    for rendered in rendered_batches:
        drop, cut_code = judge(rendered, t_max, truncation)
        dropped += np.bincount(drop, minlength=len(dropped))
        ok = drop == 0
        cut += np.bincount(np.asarray(cut_code, dtype=np.int64)[ok], minlength=len(cut))
        lengths, tokens, mask = rendered.lengths, rendered.tokens, rendered.mask
        if not ok.all():
            kept = np.repeat(ok, lengths)  # per token: does its example stay?
            lengths, tokens, mask = lengths[ok], tokens[kept], mask[kept]
        offsets.extend((n_tokens + np.cumsum(lengths) - lengths).tolist())
        n_labels += int(np.count_nonzero(mask))
        data = tokens.astype(TOKEN_DTYPE, copy=False).tobytes()
        f.write(data)
        h.update(data)
        n_input += len(ok)
        n_tokens += int(lengths.sum())
        bar.update(len(ok))
    f.close()  # fsynced; renamed when the build commits
    buf = io.BytesIO()
    np.save(buf, np.asarray(offsets, dtype=OFFSET_DTYPE), allow_pickle=False)
    idx_bytes = buf.getvalue()
    staged.write_bytes(out / offsets_name, idx_bytes)
    stats = {
        "num_input_examples": n_input,
        "num_examples": len(offsets),
        "num_tokens": n_tokens,
        "num_label_tokens": n_labels,
        "num_dropped": int(dropped[1:].sum()),
        "dropped": dict(zip(DROP_REASONS, dropped[1:].tolist())),
        "num_truncated": int(cut[1:].sum()),
        "cut": dict(zip(CUT_REASONS[truncation], cut[1:].tolist())),
    }
    files = {
        tokens_name: {"sha256": h.hexdigest(), "bytes": n_tokens * TOKEN_DTYPE.itemsize},
        offsets_name: {"sha256": hashlib.sha256(idx_bytes).hexdigest(), "bytes": len(idx_bytes)},
    }
    return {"stats": stats, "files": files}


def check_splits_filled(splits: dict, *, source: str | None, val_frac: float, truncation: str) -> dict:
    """{split: why} for a split empty on purpose (val with val_frac 0); ValueError for any other split
    left with 0 examples, naming the source, the split, examples read and dropped, and the fix."""
    name = source or "SFT cache"
    prefix = f"sources.{source}." if source in SFT_SOURCES else ""
    on_purpose = {}
    for split in SPLITS:
        st = splits[split]
        if st["num_examples"]:
            continue
        if split == "val" and val_frac == 0:
            on_purpose[split] = "val_frac is 0: built without val on purpose"
            continue
        dropped = ", ".join(f"{reason} {n:,}" for reason, n in st["dropped"].items() if n) or "none"
        fix = (
            f"raise {prefix}val_frac so val gets examples, or set {prefix}val_frac: 0 to build without val on purpose"
            if split == "val"
            else "give the source examples (check its dataset or file)"
        )
        if st["num_dropped"] and truncation != "prompt":
            fix += f"; or keep long examples: {prefix}truncation: prompt, or a larger sft.t_max"
        raise ValueError(
            f"{name}: the {split} split would hold 0 examples (examples read: {st['num_input_examples']:,}, "
            f"dropped: {dropped}; split by {prefix}val_frac={val_frac}). To fix: {fix}"
        )
    return on_purpose


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


def _write_splits(
    pairs_list, is_val, split_info, tokenizer, staged: StagedFiles, out: Path, t_max, truncation, source, num_threads
) -> tuple[dict, dict]:
    """Both splits as files of `staged`, with one progress bar and one set of rendering workers;
    returns (per-split stats, files)."""
    splits, files = {}, {}
    bar = progress(total=len(pairs_list), desc=f"sft {source or out.name}", unit="ex")
    with bar, EncodeWorkers(tokenizer, num_threads) as workers:
        for split in SPLITS:
            chosen = [p for p, v in zip(pairs_list, is_val) if v == (split == "val")]
            batches = (chosen[lo : lo + ENCODE_BATCH] for lo in range(0, len(chosen), ENCODE_BATCH))
            res = _write_split(workers.map(render_chats, batches), staged, out, split, t_max, truncation, bar)
            splits[split] = res["stats"]
            files.update(res["files"])
            if "num_groups" in split_info:
                splits[split]["num_groups"] = split_info["num_groups"][split]
    return splits, files


def build_sft_cache(
    examples: Iterable,
    out_dir: str,
    *,
    tokenizer,
    val_frac: float,
    seed: int,
    t_max: int = 1024,
    truncation: Literal["head", "tail", "prompt"] = "head",
    group_keys: Sequence | None = None,
    source: str | None = None,
    dataset_name: str | None = None,
    dataset_config: str | None = None,
    provenance: dict | None = None,
    num_threads: int = -1,
) -> dict:
    """Write the SFT cache of `examples` (lists of messages, or ChatSample) to `out_dir`; returns meta.

    `group_keys[i]` is example i's split group (all examples of a group land in one split); None
    splits by example. `num_threads` worker processes render the examples (-1 = every available
    CPU). Deterministic: same examples, order and seed => byte-identical files, whatever num_threads.
    """
    check_truncation(truncation)
    if t_max < 1:
        raise ValueError(f"t_max must be >= 1, got {t_max}")
    check_vocab_fits(tokenizer.vocab_size, what=getattr(tokenizer, "model_path", "tokenizer"))
    out = Path(out_dir)
    created = not out.exists()
    remove_outputs(out)
    try:
        pairs_list = _buffer(examples, source)
        is_val, split_info = assign_splits(len(pairs_list), group_keys, val_frac, seed)
        with StagedFiles() as staged:
            splits, files = _write_splits(
                pairs_list, is_val, split_info, tokenizer, staged, out, t_max, truncation, source, num_threads
            )
            empty_splits = check_splits_filled(splits, source=source, val_frac=val_frac, truncation=truncation)
            staged.commit()  # every file complete: move them into place, then meta.json last
        meta = {
            **_header(
                source, dataset_name, dataset_config, seed, tokenizer, revision=(provenance or {}).get("revision")
            ),
            "split_rule": f"{SPLIT_RULE}; by {split_info['split_by']}",
            "split_by": split_info["split_by"],
            "val_frac": val_frac,
            "T_max": t_max,
            "truncation": truncation,
            "empty_splits": empty_splits,
            "template": TEMPLATE,
            "offset_dtype": OFFSET_DTYPE_NAME,
            "num_input_examples": len(pairs_list),
            **{f"{split}_{what}": splits[split][f"num_{what}"] for what in ("examples", "tokens") for split in SPLITS},
            "num_dropped": {s: splits[s]["num_dropped"] for s in SPLITS},
            "splits": splits,
            "files": files,
            "provenance": provenance or {},
        }
        write_meta(out / META, meta)
        return meta
    except BaseException:
        remove_outputs(out)
        if created:
            with contextlib.suppress(OSError):
                out.rmdir()  # only if empty: never removes anything we did not write
        raise


def write_not_built(
    out_dir: str | os.PathLike,
    *,
    source: str,
    reason: str,
    seed: int,
    tokenizer=None,
    dataset_name: str | None = None,
    dataset_config: str | None = None,
) -> dict:
    """A disabled source: empty split files (so every declared output exists) and the "not built"
    meta.json (`meta.not_built`: `built: false` and `reason`).

    Readers check `built` (SFTExampleDataset.from_cache_dir refuses such a cache with `reason`).
    """
    out = Path(out_dir)
    remove_outputs(out)
    files = {}
    with StagedFiles() as staged:
        for split in SPLITS:
            files.update(_write_split([], staged, out, split, 1, "head", _NoBar())["files"])
        staged.commit()
    meta = {
        **_header(source, dataset_name, dataset_config, seed, tokenizer, reason=reason),
        "split_rule": None,
        "train_examples": 0,
        "val_examples": 0,
        "files": files,
    }
    write_meta(out / META, meta)
    return meta


def _header(
    source, dataset_name, dataset_config, seed: int, tokenizer, reason: str | None = None, revision: str | None = None
) -> dict:
    """The common header (`meta.header`, or `meta.not_built` given `reason`) and what every SFT cache
    adds to it: its source and token dtype. `revision`: the hub commit the loader read (its provenance's)."""
    fields = dict(
        format_version=FORMAT_VERSION,
        seed=seed,
        tokenizer=tokenizer,
        dataset_name=dataset_name if dataset_name is not None else source,
        dataset_config=dataset_config,
        dataset_revision=revision,
    )
    common = header("sft", **fields) if reason is None else not_built("sft", reason=reason, **fields)
    return {**common, "source": source, "token_dtype": TOKEN_DTYPE_NAME}


class _NoBar:
    def update(self, n: int) -> None:
        pass
