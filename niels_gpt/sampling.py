"""Randomness shared by every mixed batch and every derived seed.

Mixture contract, the same everywhere (byte batches, MixedLoader): `p` maps source name ->
probability; its keys must equal the available sources, every value >= 0, and the sum must be 1
within 1e-6. Sources are ordered by
name (so dict order never changes a batch) and one `torch.multinomial(probs, B, replacement=True,
generator=g)` draw picks the source of every row. Callers then draw positions per source, in that
sorted source order, from the same generator.

Derived seeds: `derive_seed(seed, step, rank)` is the generator seed of one batch (MixedLoader) or of
one part of a split tokenization (`derive_seed(seed, k)`): splitmix64 (Steele et al. 2014; the
constants below are its published ones) of the seed, then of that xor the step, folded to 32 bits,
plus the rank (mod 2**32). Folding is deliberate: torch's CPU generator (mt19937) keeps only the low
32 bits of a seed - `manual_seed(1)` and `manual_seed(1 + 2**32)` give the same stream - so any wider
seed would be an illusion. Adding the rank (instead of mixing it) guarantees that ranks never share a
stream at the same step; two different steps share one with probability 2**-32 per pair (a repeated
batch, harmless).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import lru_cache

SUM_TOLERANCE = 1e-6
_MASK64 = (1 << 64) - 1
_GOLDEN_GAMMA = 0x9E3779B97F4A7C15  # splitmix64 increment (2**64 / golden ratio)
_MIX1, _MIX2 = 0xBF58476D1CE4E5B9, 0x94D049BB133111EB  # splitmix64 finalizer multipliers


def splitmix64(x: int) -> int:
    """One splitmix64 step: a bijection on 64-bit ints with good avalanche (0 -> 0xE220A8397B1DCDAF)."""
    z = (x + _GOLDEN_GAMMA) & _MASK64
    z = ((z ^ (z >> 30)) * _MIX1) & _MASK64
    z = ((z ^ (z >> 27)) * _MIX2) & _MASK64
    return z ^ (z >> 31)


def derive_seed(seed: int, step: int, rank: int = 0) -> int:
    """The generator seed of batch `step` on `rank` (or of part `step`), in [0, 2**32); see the docstring."""
    h = splitmix64(splitmix64(seed & _MASK64) ^ (step & _MASK64))
    return (((h ^ (h >> 32)) & 0xFFFFFFFF) + rank) & 0xFFFFFFFF


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
