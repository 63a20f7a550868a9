"""Mixture sampling shared by every mixed batch (bytes, pretrain tokens, SFT examples).

Contract, the same everywhere: `p` maps source name -> probability; its keys must equal the
available sources, every value >= 0, and the sum must be 1 within 1e-6. Sources are ordered by
name (so dict order never changes a batch) and one `torch.multinomial(probs, B, replacement=True,
generator=g)` draw picks the source of every row. Callers then draw positions per source, in that
sorted source order, from the same generator.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import lru_cache

SUM_TOLERANCE = 1e-6


def check_mixture(p: Mapping[str, float], available: Iterable[str], *, what: str = "p") -> list[str]:
    """Validate `p` against the available source names; returns the names in sampling order."""
    available = set(available)
    missing = sorted(available - set(p))
    unknown = sorted(set(p) - available)
    if missing or unknown:
        parts = []
        if unknown:
            parts.append(f"{what} names sources that are not available: {unknown}")
        if missing:
            parts.append(f"sources missing from {what}: {missing}")
        raise ValueError("; ".join(parts) + f" (available: {sorted(available)})")
    negative = {k: v for k, v in p.items() if v < 0}
    if negative:
        raise ValueError(f"{what} has negative probabilities: {negative}")
    total = float(sum(p.values()))
    if abs(total - 1.0) > SUM_TOLERANCE:
        raise ValueError(f"{what} must sum to 1 (within {SUM_TOLERANCE}), got {total!r}: {dict(p)}")
    return sorted(p)


@lru_cache(maxsize=256)
def _probs_tensor(values: tuple[float, ...]):
    import torch

    return torch.tensor(values, dtype=torch.float64)


def mixture_probs(p: Mapping[str, float]):
    """(sorted names, float64 probabilities in that order). The tensor is cached per distinct `p`
    (building it costs more than the multinomial draw at small B): treat it as read-only."""
    names = sorted(p)
    return names, _probs_tensor(tuple(float(p[n]) for n in names))


def draw_sources(p: Mapping[str, float], B: int, generator=None):
    """(names, idx): idx is an int64 tensor (B,) of indices into `names` (sorted source names)."""
    import torch

    names, probs = mixture_probs(p)
    idx = torch.multinomial(probs, B, replacement=True, generator=generator)
    return names, idx
