"""Seed 000's `Message` type for `build_sft_cache` inputs."""

from typing import Literal, TypedDict


class Message(TypedDict):
    role: Literal["system", "user", "assistant"]
    content: str
