"""On-disk formats of the token caches, in one place.

Pretrain: `{source}/{train,val}/shard_NNNNN.bin`, raw little-endian uint16 token ids, documents
separated by the eot id. SFT: `{split}_tokens.bin` (uint16 LE, examples back to back) and
`{split}_idx.npy` (int64 start offsets, offsets-only: example i is tokens[idx[i]:idx[i+1]],
the last runs to the end of the file).
"""

from __future__ import annotations

import numpy as np

# uint16 is enough since every id < 2**16 is checked when the tokenizer is built and loaded
TOKEN_DTYPE = np.dtype("<u2")
TOKEN_DTYPE_NAME = "uint16-le"
OFFSET_DTYPE = np.dtype("<i8")
MAX_VOCAB = 1 << 16

# Bump when the bytes a builder writes change for the same inputs: the Snakemake rules pass it as
# a param, so caches rebuild on purpose, not on every checkout.
FORMAT_VERSION = 1

DEFAULT_SHARD_BYTES = 128 * 1024 * 1024  # seed 000: 128 MB per pretrain shard
SHARD_GLOB = "shard_*.bin"


def shard_name(index: int) -> str:
    return f"shard_{index:05d}.bin"


def check_vocab_fits(vocab_size: int, *, what: str = "tokenizer") -> None:
    """Refuse a vocabulary whose ids do not fit in uint16."""
    if vocab_size > MAX_VOCAB:
        raise ValueError(
            f"{what}: vocabulary of {vocab_size:,} pieces does not fit the uint16 cache format "
            f"(every id must be < {MAX_VOCAB:,}); lower tokenizer.vocab_size"
        )
