"""The sources of one MixedLoader: what they must share, checked once, and opening them from a cache tree.

A source's `get_batch` returns one of KINDS: (x, y) for pretrain and byte sources, (x, y, y_masked) for
SFT sources, and (x, y, y_masked, segment_ids, position_ids) for packed SFT sources; FIELDS names the
tensors in that order (Batch's fields). `probe` asks every source for a one-row batch and refuses, with
one message, sources that return different fields (packed and padded SFT sources included: a batch
is either packed rows or one example per row), other T or another device; `check_same_tokenizer`
refuses caches built with different tokenizers, `common_ignore_index` SFT sources whose y_masked
ignore different values. `open_weighted` opens `{cache_dir}/.../{name}` for every name with weight > 0,
refusing a cache that has no meta.json or was not built.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import torch

from niels_gpt import layout
from niels_gpt.meta import is_built, read_meta

FIELDS = ("x", "y", "y_masked", "segment_ids", "position_ids")  # what a source's tuple holds, in order
KINDS = {2: "(x, y)", 3: "(x, y, y_masked)", 5: "packed (x, y, y_masked, segment_ids, position_ids)"}
_PROBE_SEED = 0  # the one-row batch each source returns at init to check its fields, T and device


def probe(sources: Mapping) -> tuple[int, int, torch.device]:
    """One-row batch from each source: the same fields (KINDS), T and device, else one error."""
    shapes = {}
    for name, src in sources.items():
        out = src.get_batch(B=1, generator=torch.Generator().manual_seed(_PROBE_SEED))
        if not isinstance(out, (tuple, list)) or not all(isinstance(t, torch.Tensor) for t in out):
            raise TypeError(f"source {name!r}: get_batch must return a tuple of tensors, got {type(out).__name__}")
        shapes[name] = (len(out), tuple(out[0].shape), str(out[0].device))
    arities = {name: s[0] for name, s in shapes.items()}
    check_same_fields(arities)
    rest = {name: s[1:] for name, s in shapes.items()}
    if len(set(rest.values())) != 1 or len(next(iter(rest.values()))[0]) != 2:
        listed = {name: f"shape {s[0]} on {s[1]}" for name, s in rest.items()}
        raise ValueError(f"sources of one loader need (1, T) rows with the same T and device, got {listed}")
    ((shape, device),) = set(rest.values())
    return next(iter(arities.values())), shape[1], torch.device(device)


def check_same_tokenizer(sources: Mapping) -> None:
    shas = {name: (getattr(src, "meta", None) or {}).get("tokenizer_sha256") for name, src in sources.items()}
    if len({s for s in shas.values() if s}) > 1:
        raise ValueError(
            f"caches of one loader were built with different tokenizers (sha256 by source: {shas}); "
            "rebuild them with one tokenizer"
        )


def common_ignore_index(sources: Mapping) -> int | None:
    """The ignore_index of y_masked: the SFT sources' (they must agree); None without SFT sources."""
    given = {name: src.ignore_index for name, src in sources.items() if hasattr(src, "ignore_index")}
    if len(set(given.values())) > 1:
        raise ValueError(f"SFT sources of one loader need one ignore_index, got {given}")
    return next(iter(given.values()), None)


def check_same_fields(arities: Mapping[str, int]) -> None:
    """All sources return the same fields (KINDS), else one error saying which source returns what."""
    if len(set(arities.values())) == 1 and set(arities.values()) <= set(KINDS):
        return
    by_source = {name: KINDS.get(n, f"{n} tensors") for name, n in arities.items()}
    if set(arities.values()) == {3, 5}:
        raise ValueError(
            f"packed and padded SFT sources cannot be mixed in one loader ({by_source}): a batch is either "
            "packed rows with segment_ids and position_ids or one example per row; open every SFT source with "
            "packing=True (MixedLoader.sft(..., packing=True)) or none"
        )
    raise ValueError(
        f"sources of one loader must all return the same fields; by source: {by_source}. Mix pretrain / byte "
        "sources and SFT sources in separate loaders"
    )


def open_weighted(p, source_dir, cache_dir, open_source) -> dict:
    """`open_source(its folder)` for every source with weight > 0 at some step of the mixture `p` (weights or a
    schedule), after refusing one that was not built."""
    from niels_gpt.training.schedule import Schedule

    schedule = Schedule.of(p)
    sources = {}
    for name in schedule.names:
        root = Path(source_dir(cache_dir, name))
        refuse_not_built(root, name, schedule.weight(name))
        sources[name] = open_source(root)
    return sources


def refuse_not_built(root: Path, name: str, weight: float) -> None:
    meta_path = root / layout.META
    if not os.path.exists(meta_path):
        raise FileNotFoundError(
            f"{meta_path}: no meta.json for source {name!r} (weight {weight}); build the cache "
            "first (`snakemake -j4 cache/all`) or give it weight 0"
        )
    meta = read_meta(str(meta_path))
    if not is_built(meta):
        raise ValueError(
            f"{root}: source {name!r} has weight {weight} but its cache was not built "
            f"({meta.get('reason', 'no reason given')}); enable sources.{name}.enabled and rebuild, or give it weight 0"
        )
