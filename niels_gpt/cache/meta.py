"""The meta.json contract under its public name: `niels_gpt.cache.meta` re-exports `niels_gpt.meta`.

Every artifact's meta.json starts with one header (`header`; `not_built` for an artifact left unbuilt
on purpose), is written last by `write_meta` after `check_required` found every field its kind
requires, and is taken down first by `unpublish`. `sha256_file` is the hash every meta.json records
for its files.
"""

from niels_gpt.hashing import sha256_file
from niels_gpt.meta import (
    HEADER,
    KINDS,
    NOT_BUILT_REQUIRED,
    REQUIRED,
    REQUIRED_COMMON,
    REQUIRED_PRETRAIN,
    REQUIRED_SFT,
    REQUIRED_STREAM,
    REQUIRED_TOKENIZER,
    check_required,
    header,
    is_built,
    not_built,
    read_meta,
    unpublish,
    write_meta,
)

__all__ = [
    "HEADER",
    "KINDS",
    "NOT_BUILT_REQUIRED",
    "REQUIRED",
    "REQUIRED_COMMON",
    "REQUIRED_PRETRAIN",
    "REQUIRED_SFT",
    "REQUIRED_STREAM",
    "REQUIRED_TOKENIZER",
    "check_required",
    "header",
    "is_built",
    "not_built",
    "read_meta",
    "sha256_file",
    "unpublish",
    "write_meta",
]
