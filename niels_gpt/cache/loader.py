"""`MixedLoader`: deterministic, resumable, rank-sharded batches over several caches (see niels_gpt.training.loader)."""

from niels_gpt.training.loader import Batch, MixedLoader

__all__ = ["Batch", "MixedLoader"]
