"""The cache builders in one import: `build_pretrain_cache` (documents -> uint16 shards) and
`build_sft_cache` (chats -> tokens + offsets); `Message` is one chat message of `build_sft_cache`'s input."""

from typing import Literal, TypedDict

from niels_gpt.pretrain.writer import build_pretrain_cache, build_pretrain_cache_presplit
from niels_gpt.sft.writer import build_sft_cache


class Message(TypedDict):
    role: Literal["system", "user", "assistant"]
    content: str


__all__ = ["Message", "build_pretrain_cache", "build_pretrain_cache_presplit", "build_sft_cache"]
