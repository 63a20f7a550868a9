"""The project's own chat primer: `data/primer.jsonl` (SFT examples) and `data/primer.txt` (byte streams).

primer.jsonl, one example per line, validated strictly; the first problem stops the load
with `PrimerFormatError("<file>:<line>: <what is wrong>")`:

    {"messages": [{"role": "system"|"user"|"assistant", "content": "<string>"}, ...]}

- the file is UTF-8; each non-blank line is a JSON object with exactly the key `messages`;
- `messages` is a non-empty list of objects with exactly the keys `role` and `content`;
- `role` is system, user or assistant; `content` is a string (may be empty);
- at least one assistant message (an example without one teaches nothing: no loss-active token).
Whitespace-only lines are skipped. Contents are normalized.

primer.txt: plain dialogues separated by a delimiter (default "\n\n<dialogue>\n\n");
`split_primer_dialogues` holds out whole dialogues with `niels_gpt.splits.split_items`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from niels_gpt.data.normalize import is_blank, normalize_text
from niels_gpt.data.types import ROLES, ChatMessage, ChatSample

SOURCE = "primer"
DEFAULT_DELIMITER = "\n\n<dialogue>\n\n"
TOP_KEYS = ("messages",)
MESSAGE_KEYS = ("content", "role")


class PrimerFormatError(ValueError):
    """A primer file breaks the format; the message is "<file>:<line>: <what is wrong>"."""


def _read_bytes(path: str | os.PathLike, what: str, setting: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: primer {what} not found; create it or point {setting} at it") from None
    except IsADirectoryError:
        raise FileNotFoundError(f"{path}: is a directory, expected the primer {what} ({setting})") from None


def _check_line(obj, where: str) -> list[ChatMessage]:
    def fail(what: str):
        raise PrimerFormatError(f"{where}: {what}")

    if not isinstance(obj, dict):
        fail(f"expected a JSON object, got {type(obj).__name__}")
    if "messages" not in obj:
        fail(f"missing key 'messages' (keys: {sorted(obj)})")
    extra = sorted(set(obj) - set(TOP_KEYS))
    if extra:
        fail(f"unexpected top-level key(s) {extra}; only 'messages' is allowed")
    messages = obj["messages"]
    if not isinstance(messages, list):
        fail(f"'messages' must be a list, got {type(messages).__name__}")
    if not messages:
        fail("'messages' is an empty list")
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            fail(f"messages[{i}] must be an object with 'role' and 'content', got {type(m).__name__}")
        missing = sorted(set(MESSAGE_KEYS) - set(m))
        if missing:
            fail(f"messages[{i}] is missing key(s) {missing}")
        extra = sorted(set(m) - set(MESSAGE_KEYS))
        if extra:
            fail(f"messages[{i}] has unexpected key(s) {extra}; only 'role' and 'content' are allowed")
        if m["role"] not in ROLES:
            fail(f"messages[{i}] has unknown role {m['role']!r}; allowed: {', '.join(ROLES)}")
        if not isinstance(m["content"], str):
            fail(f"messages[{i}].content must be a string, got {type(m['content']).__name__}")
        out.append(ChatMessage(m["role"], normalize_text(m["content"])))
    if not any(m.role == "assistant" for m in out):
        fail("no assistant message (every example needs at least one)")
    return out


def load_primer_jsonl(path: str | os.PathLike) -> list[ChatSample]:
    """Every example of a primer .jsonl, validated; meta = {"index": example number, "line": line number}."""
    data = _read_bytes(path, "jsonl file", "sources.primer.jsonl")
    samples: list[ChatSample] = []
    for lineno, raw in enumerate(data.split(b"\n"), start=1):
        where = f"{path}:{lineno}"
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise PrimerFormatError(f"{where}: not UTF-8 (byte {e.start} of the line: {e.reason})") from None
        if lineno == 1:
            line = line.removeprefix("\ufeff")  # a byte-order mark some editors write
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise PrimerFormatError(f"{where}: not valid JSON ({e.msg} at column {e.colno})") from None
        messages = _check_line(obj, where)
        samples.append(ChatSample(messages=messages, source=SOURCE, meta={"index": len(samples), "line": lineno}))
    if not samples:
        raise PrimerFormatError(f"{path}:1: no examples (expected one JSON object per line)")
    return samples


def load_primer_text(path: str | os.PathLike) -> str:
    """The primer text file, UTF-8, normalized."""
    data = _read_bytes(path, "text file", "sources.primer.text")
    try:
        return normalize_text(data.decode("utf-8"))
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise PrimerFormatError(f"{path}:{line}: not UTF-8 (byte {e.start} of the file: {e.reason})") from None


def dialogue_blocks(text: str, delimiter: str = DEFAULT_DELIMITER) -> list[str]:
    """The text split on `delimiter`, every block (blank ones included)."""
    if not delimiter:
        raise ValueError("primer delimiter must be a non-empty string (sources.primer.delimiter)")
    return text.split(delimiter)


def split_primer_dialogues(
    text: str, val_frac: float, seed: int, delimiter: str = DEFAULT_DELIMITER
) -> tuple[str, str]:
    """(train_text, val_text): dialogues split on `delimiter`, held out whole, rejoined with it.

    Blank blocks (`normalize.is_blank`: e.g. before a leading delimiter) are not dialogues: they are
    dropped before the split; the order of dialogues within each side is the file order.
    """
    from niels_gpt.splits import split_items

    blocks = [b for b in dialogue_blocks(text, delimiter) if not is_blank(b)]
    train, val = split_items(blocks, val_frac, seed)
    return delimiter.join(train), delimiter.join(val)
