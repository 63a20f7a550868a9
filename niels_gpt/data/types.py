"""The stable internal interface every loader yields."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Role = Literal["system", "user", "assistant"]
ROLES: tuple[str, ...] = ("system", "user", "assistant")


@dataclass(frozen=True)
class PretrainSample:
    text: str
    source: str
    meta: dict


@dataclass(frozen=True)
class ChatMessage:
    role: Role
    content: str


@dataclass(frozen=True)
class ChatSample:
    messages: list[ChatMessage]
    source: str
    meta: dict
