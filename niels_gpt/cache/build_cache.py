"""Seed 000's cache builders, in one import: `build_pretrain_cache` and `build_sft_cache`.

The writers live in `pretrain_writer.py` and `sft_writer.py`; this module is the stable entry point.
"""

from niels_gpt.cache.build_cache_types import Message  # noqa: F401
from niels_gpt.cache.pretrain_writer import build_pretrain_cache  # noqa: F401
from niels_gpt.cache.sft_writer import build_sft_cache  # noqa: F401
