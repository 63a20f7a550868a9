"""The user's evaluation texts (`decontamination.benchmarks`): files read into texts, then token ids.

- `.jsonl`: one JSON value per line; every string in it (at any depth: {"question": ..., "choices": [...]})
  is one text;
- `.txt`: the whole file is one text;
- `.parquet`: every value of every string column is one text.
Any other suffix, a missing file or a line that is not JSON stops with the file (and line) and what was expected.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

SUFFIXES = (".jsonl", ".txt", ".parquet")


class BenchmarkError(ValueError):
    """A benchmark file that cannot be read as one of SUFFIXES."""


def _strings(value) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def benchmark_texts(path: str | os.PathLike) -> list[str]:
    """The texts of one benchmark file (see the module docstring)."""
    p = Path(path)
    if p.suffix not in SUFFIXES:
        raise BenchmarkError(
            f"decontamination.benchmarks: {p}: expected a {', '.join(SUFFIXES)} file, got suffix {p.suffix!r}"
        )
    if not p.is_file():
        raise BenchmarkError(f"decontamination.benchmarks: {p}: file not found")
    if p.suffix == ".txt":
        return [p.read_text(encoding="utf-8")]
    if p.suffix == ".parquet":
        import pyarrow.parquet as pq

        table = pq.read_table(p)
        texts = []
        for name in table.column_names:
            col = table.column(name)
            if str(col.type) in ("string", "large_string"):
                texts += [v for v in col.to_pylist() if isinstance(v, str)]
        if not texts:
            raise BenchmarkError(f"decontamination.benchmarks: {p}: no string column (columns: {table.column_names})")
        return texts
    texts = []
    with open(p, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                texts += list(_strings(json.loads(line)))
            except json.JSONDecodeError as e:
                raise BenchmarkError(
                    f"decontamination.benchmarks: {p}, line {number}: not JSON ({e.msg}); "
                    "expected one JSON value per line"
                ) from None
    return texts
