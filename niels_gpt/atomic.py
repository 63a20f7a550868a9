"""Atomic file writes: write `name.tmp`, fsync, then `os.replace` onto the final name.

A killed or failed build therefore never leaves a file under its final name that looks complete;
readers ignore `*.tmp`. On error the temporary file is removed and the exception re-raised.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

TMP_SUFFIX = ".tmp"


def tmp_path_for(path: str | os.PathLike) -> Path:
    """The temporary name `path` is written under before it is renamed into place."""
    p = Path(path)
    return p.with_name(p.name + TMP_SUFFIX)


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "wb") -> Iterator[IO[Any]]:
    """Open `path.tmp` for writing; on clean exit fsync and rename it to `path`."""
    if "w" not in mode:
        raise ValueError(f"atomic_open is for writing, got mode {mode!r}")
    final = Path(path)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = tmp_path_for(final)
    encoding = None if "b" in mode else "utf-8"
    f = open(tmp, mode, encoding=encoding)
    try:
        yield f
        f.flush()
        os.fsync(f.fileno())
        f.close()
        os.replace(tmp, final)
    except BaseException:
        f.close()
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    with atomic_open(path, "wb") as f:
        f.write(data)


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    with atomic_open(path, "w") as f:
        f.write(text)


def atomic_write_json(path: str | os.PathLike, obj: Any) -> None:
    """Canonical JSON (sorted keys, 2-space indent, trailing newline): same dict => same bytes."""
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
