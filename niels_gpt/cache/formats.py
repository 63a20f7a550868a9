"""The token cache formats under their public name: `niels_gpt.cache.formats` re-exports `niels_gpt.token_files`.

A token file is raw little-endian uint16 ids (TOKEN_DTYPE; pretrain shards and SFT `{split}_tokens.bin`),
its length in tokens is its byte size / 2 (`token_count`); SFT offsets are int64 (OFFSET_DTYPE). A
vocabulary must fit uint16 (`check_vocab_fits`, MAX_VOCAB).
"""

from niels_gpt.token_files import (
    MAX_VOCAB,
    OFFSET_DTYPE,
    OFFSET_DTYPE_NAME,
    TOKEN_BYTES,
    TOKEN_DTYPE,
    TOKEN_DTYPE_NAME,
    check_vocab_fits,
    pack_tokens,
    token_count,
)

__all__ = [
    "MAX_VOCAB",
    "OFFSET_DTYPE",
    "OFFSET_DTYPE_NAME",
    "TOKEN_BYTES",
    "TOKEN_DTYPE",
    "TOKEN_DTYPE_NAME",
    "check_vocab_fits",
    "pack_tokens",
    "token_count",
]
