"""MixedLoader: a deterministic mixture over several caches, with exact resume and rank / world_size
sharding - the training-time loader.

`MixedLoader(sources, p=..., B=..., seed=...)` is an endless iterator of `Batch`es. A source is
anything with `get_batch(*, B, generator)` returning (x, y) (PretrainTokenStreamDataset,
StreamBatcher) or (x, y, y_masked) (SFTExampleDataset), each (B, T); all sources of one loader must
return the same number of tensors with the same T and device.

No hidden state: batch number `step` on rank `r` is a pure function of (seed, step, r) and the
sources. For each step the loader makes a fresh generator, `torch.Generator().manual_seed(
derive_seed(seed, step, rank))` (niels_gpt.sampling), and draws, in this order (the
`niels_gpt.sampling` mixture contract):
  1. `draw_sources(p, B, g)`: the source of every row (sources in sorted-name order);
  2. for each source with k > 0 rows, in sorted-name order: `source.get_batch(B=k, generator=g)`;
     its rows go, in order, to the batch rows that drew it.
Sources with weight 0 are dropped before anything else (never called, not part of `names`), so
adding a zero-weight source never changes a batch. The only state is the next step number:
`state_dict()` / `load_state_dict()` save and restore it, and a restored loader yields exactly the
batches the original would have yielded next (same caches, same torch version).

Sharding is independent sampling per rank: windows and examples are drawn with replacement, so
there is no epoch to partition. Rank r's stream depends on (seed, step, r) only, ranks differ, and
the global batch of a step (the union over ranks) is reproducible for a given world_size.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from niels_gpt import layout
from niels_gpt.cache.meta import read_meta
from niels_gpt.sampling import check_mixture, derive_seed, draw_sources

STATE_VERSION = 1  # bump when derive_seed or the draw order changes: old states then refuse to load
_PROBE_SEED = 0  # the one-row batch each source returns at init to check arity, T and device


@dataclass(frozen=True)
class Batch:
    """x, y (and y_masked for SFT sources, else None): (B, T) int64 on the sources' device.
    source: int64 (B,) on the CPU, row i came from `loader.names[source[i]]`. step: the batch number."""

    x: torch.Tensor
    y: torch.Tensor
    y_masked: torch.Tensor | None
    source: torch.Tensor
    step: int


def _check_int(name: str, value, low: int, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (high is not None and value >= high):
        bound = f"{low} <= {name} < {high}" if high is not None else f"{name} >= {low}"
        raise ValueError(f"{name} must be an int with {bound}, got {value!r}")
    return value


class MixedLoader:
    """Endless deterministic batches over `sources` mixed by `p`; resumable, sharded by rank."""

    def __init__(
        self,
        sources: Mapping[str, Any],
        *,
        p: Mapping[str, float],
        B: int,
        seed: int,
        rank: int = 0,
        world_size: int = 1,
    ):
        check_mixture(p, sources, what="loader mixture p")
        self.B = _check_int("B", B, 1)
        self.seed = _check_int("seed", seed, -(1 << 63))
        self.world_size = _check_int("world_size", world_size, 1)
        self.rank = _check_int("rank", rank, 0, self.world_size)
        self.names = [name for name in sorted(p) if p[name] > 0]
        self.p = {name: float(p[name]) for name in self.names}
        self.sources = {name: sources[name] for name in self.names}
        self.arity, self.T, self.device = self._probe()
        self._check_same_tokenizer()
        self.step = 0

    def _probe(self) -> tuple[int, int, torch.device]:
        """One-row batch from each source: same tuple arity (2 or 3), T and device, else one error."""
        shapes = {}
        for name, src in self.sources.items():
            out = src.get_batch(B=1, generator=torch.Generator().manual_seed(_PROBE_SEED))
            if not isinstance(out, (tuple, list)) or not all(isinstance(t, torch.Tensor) for t in out):
                raise TypeError(f"source {name!r}: get_batch must return a tuple of tensors, got {type(out).__name__}")
            shapes[name] = (len(out), tuple(out[0].shape), str(out[0].device))
        arities = {name: s[0] for name, s in shapes.items()}
        if len(set(arities.values())) != 1 or not set(arities.values()) <= {2, 3}:
            raise ValueError(
                f"sources of one loader must all return (x, y) or all (x, y, y_masked); tensors per batch by "
                f"source: {arities}. Mix pretrain / byte sources and SFT sources in separate loaders"
            )
        rest = {name: s[1:] for name, s in shapes.items()}
        if len(set(rest.values())) != 1 or len(next(iter(rest.values()))[0]) != 2:
            listed = {name: f"shape {s[0]} on {s[1]}" for name, s in rest.items()}
            raise ValueError(f"sources of one loader need (1, T) rows with the same T and device, got {listed}")
        ((shape, device),) = set(rest.values())
        return next(iter(arities.values())), shape[1], torch.device(device)

    def _check_same_tokenizer(self) -> None:
        shas = {name: (getattr(src, "meta", None) or {}).get("tokenizer_sha256") for name, src in self.sources.items()}
        if len({s for s in shas.values() if s}) > 1:
            raise ValueError(
                f"caches of one loader were built with different tokenizers (sha256 by source: {shas}); "
                "rebuild them with one tokenizer"
            )

    # -- batches -------------------------------------------------------------------------------
    def batch_at(self, step: int) -> Batch:
        """Batch number `step` of this rank; does not move the loader."""
        _check_int("step", step, 0)
        B = self.B
        g = torch.Generator().manual_seed(derive_seed(self.seed, step, self.rank))
        _, idx = draw_sources(self.p, B, g)
        which = idx.numpy()
        counts = np.bincount(which, minlength=len(self.names)).tolist()
        out: list[torch.Tensor] | None = None
        for k, count in enumerate(counts):
            if not count:
                continue
            name = self.names[k]
            part = self.sources[name].get_batch(B=count, generator=g)
            if len(part) != self.arity:
                raise ValueError(f"source {name!r} returned {len(part)} tensors, earlier {self.arity}")
            if count == B:  # one source drew every row: its batch is the batch
                out = list(part)
                break
            if out is None:
                out = [torch.empty((B, self.T), dtype=t.dtype, device=t.device) for t in part]
            rows = torch.from_numpy(np.flatnonzero(which == k)).to(out[0].device)
            for dst, src in zip(out, part):
                dst[rows] = src
        y_masked = out[2] if self.arity == 3 else None
        return Batch(x=out[0], y=out[1], y_masked=y_masked, source=idx, step=step)

    def __iter__(self) -> MixedLoader:
        return self

    def __next__(self) -> Batch:
        batch = self.batch_at(self.step)
        self.step += 1
        return batch

    # -- resume --------------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """Plain ints/floats/strs (JSON- and torch.save-able); "step" is the next batch number."""
        return {
            "version": STATE_VERSION,
            "step": self.step,
            "seed": self.seed,
            "rank": self.rank,
            "world_size": self.world_size,
            "p": dict(self.p),
            "B": self.B,
            "T": self.T,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue at state["step"]. seed, p (zero weights ignored), B, T, world_size and version
        must match this loader. rank may differ: every rank is at the same step, so one checkpoint
        (e.g. rank 0's) restores all ranks, and each keeps its own rank and stream."""
        if not isinstance(state, Mapping) or "step" not in state:
            raise ValueError(f"not a MixedLoader state (no 'step'): {state!r}")
        mine = self.state_dict()
        theirs = dict(state)
        theirs["p"] = {k: float(v) for k, v in sorted(dict(state.get("p") or {}).items()) if v > 0}
        diff = [k for k in ("version", "seed", "p", "B", "T", "world_size") if theirs.get(k) != mine[k]]
        if diff:
            listed = "; ".join(f"{k}: state has {theirs.get(k)!r}, loader has {mine[k]!r}" for k in diff)
            raise ValueError(
                f"refusing to resume from a state of a different loader ({listed}); build the loader "
                "with the saved settings, or start a fresh run"
            )
        self.step = _check_int("state['step']", state["step"], 0)

    def __repr__(self) -> str:
        return (
            f"MixedLoader(p={self.p}, B={self.B}, T={self.T}, seed={self.seed}, rank={self.rank}/"
            f"{self.world_size}, step={self.step:,})"
        )

    # -- caches on disk ------------------------------------------------------------------------
    @classmethod
    def pretrain(
        cls,
        cache_dir,
        split: str = "train",
        *,
        p: Mapping[str, float],
        T: int,
        B: int,
        seed: int,
        device: str = "cpu",
        rank: int = 0,
        world_size: int = 1,
        tokenizer=None,
    ) -> MixedLoader:
        """Sources `{cache_dir}/pretrain/{name}/{split}` for every name with weight > 0."""
        from niels_gpt.pretrain.dataset import PretrainTokenStreamDataset

        def open_source(root: Path):
            return PretrainTokenStreamDataset(root / split, T=T, device=device, tokenizer=tokenizer)

        sources = _open_weighted(p, layout.pretrain_dir, cache_dir, open_source)
        return cls(sources, p=_weighted(p), B=B, seed=seed, rank=rank, world_size=world_size)

    @classmethod
    def sft(
        cls,
        cache_dir,
        split: str = "train",
        *,
        p: Mapping[str, float],
        T: int,
        B: int,
        seed: int,
        device: str = "cpu",
        rank: int = 0,
        world_size: int = 1,
        tokenizer=None,
    ) -> MixedLoader:
        """Sources `{cache_dir}/sft/{name}` (SFTExampleDataset.from_cache_dir) for every name with weight > 0."""
        from niels_gpt.sft.dataset import SFTExampleDataset

        def open_source(root: Path):
            return SFTExampleDataset.from_cache_dir(root, split, T=T, device=device, tokenizer=tokenizer)

        sources = _open_weighted(p, layout.sft_dir, cache_dir, open_source)
        return cls(sources, p=_weighted(p), B=B, seed=seed, rank=rank, world_size=world_size)


def _open_weighted(p: Mapping[str, float], source_dir, cache_dir, open_source) -> dict:
    """`open_source(its folder)` for every source with weight > 0, after refusing one that was not built."""
    check_mixture(p, p, what="loader mixture p")
    sources = {}
    for name, weight in _weighted(p).items():
        root = Path(source_dir(cache_dir, name))
        _refuse_not_built(root, name, weight)
        sources[name] = open_source(root)
    return sources


def _weighted(p: Mapping[str, float]) -> dict[str, float]:
    return {name: float(w) for name, w in sorted(p.items()) if w > 0}


def _refuse_not_built(root: Path, name: str, weight: float) -> None:
    meta_path = root / layout.META
    if not os.path.exists(meta_path):
        raise FileNotFoundError(
            f"{meta_path}: no meta.json for source {name!r} (weight {weight}); build the cache "
            "first (`snakemake -j4 cache/all`) or give it weight 0"
        )
    meta = read_meta(str(meta_path))
    if meta.get("built") is False:
        raise ValueError(
            f"{root}: source {name!r} has weight {weight} but its cache was not built "
            f"({meta.get('reason', 'no reason given')}); enable sources.{name}.enabled and rebuild, or give it weight 0"
        )
