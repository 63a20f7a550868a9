"""What one read of a source is, and how it fails: the read options, the source errors, the data-file forms.

- `HubRead`: every option of one read (dataset id, config, split, revision or local `data_files`,
  streaming, shuffle, seed, buffer size, take, part of N, the retry policy); the registry builds it from
  the config and it travels unchanged through a loader to `hub.open_dataset` and `hub.iter_rows`.
- `SourceUnavailableError` (the hub cannot be reached, or a read outlasted the retries: never replaced by
  sample data) and `HubDatasetError` (a read names what the repository lacks); `unavailable` words the
  first with the demo switch.
- `data_files` takes the forms `datasets.load_dataset(data_files=)` takes: a glob or path, or a list of
  them (both: the "train" split), or a mapping {split: glob | [globs]}; `data_files_by_split` turns each
  into {split: [glob, ...]}; a split's files are its globs' matches (`expand_data_files`), each glob's
  sorted, in the order of the globs, each file once; `builder_for` picks datasets' packaged builder by
  the file extension.

The hub (hub.py), local-file (local_files.py) and stream (resumable.py) modules import this one; it
imports none of them.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from niels_gpt.data.retry import UNREACHABLE, RetryPolicy, classify, short

# datasets' packaged builders, chosen by the extension of the local files (the schemas we mirror
# are parquet on the hub, except dolly-15k which is one jsonl file)
BUILDER_BY_EXTENSION = {
    ".parquet": "parquet",
    ".jsonl": "json",
    ".json": "json",
    ".jsonl.gz": "json",
    ".json.gz": "json",
}

# Files given without a split name belong to this split, as in `datasets.load_dataset(data_files=...)`.
DEFAULT_SPLIT = "train"

# What `data_files` may be: a glob or path, a list of them, or {split: one | list}.
DataFiles = str | os.PathLike | list | tuple | Mapping


def data_files_by_split(data_files: DataFiles) -> dict[str, list[str]]:
    """{split: [glob, ...]} of any form `datasets.load_dataset(data_files=)` takes: a glob or path, or a
    list of them, is the "train" split; a mapping names the split of each glob or list of globs."""
    if isinstance(data_files, Mapping):
        return {str(split): _patterns(value, split) for split, value in data_files.items()}
    return {DEFAULT_SPLIT: _patterns(data_files, DEFAULT_SPLIT)}


def _patterns(value: Any, split: str) -> list[str]:
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    if not items or not all(isinstance(p, (str, os.PathLike)) for p in items):
        raise TypeError(
            f"data_files for split {split!r} must be a glob, a path or a non-empty list of them, got {value!r}"
        )
    return [os.fspath(p) for p in items]


def builder_for(path: str) -> str:
    for ext, builder in BUILDER_BY_EXTENSION.items():
        if path.endswith(ext):
            return builder
    raise ValueError(f"{path}: unsupported data file type; expected one of {', '.join(BUILDER_BY_EXTENSION)}")


def expand_data_files(patterns: list[str], *, split: str, dataset_id: str) -> list[str]:
    """The files the globs match, each glob's sorted, in the order of the globs (the read order), each
    file once; FileNotFoundError naming the first glob that matches nothing."""
    files: dict[str, None] = {}
    for pattern in patterns:
        matched = sorted(glob.glob(pattern, recursive=True))
        if not matched:
            raise FileNotFoundError(
                f"{pattern}: no local data files for {dataset_id!r} split {split!r} "
                f"(check sources.*.demo_data_files, or generate the bundled sample data)"
            )
        files.update(dict.fromkeys(matched))
    return list(files)


DEMO_HINT = "offline? run with `--config demo=true` (Snakemake) or `--demo` (CLI) to use the bundled sample data"


@dataclass(frozen=True)
class HubRead:
    """One read of one dataset split: what `open_dataset` loads and how `iter_rows` walks its rows.

    `data_files` (local files in the dataset's own schema) replaces the hub and its `revision`.
    `take` caps the rows (a loader whose samples are not rows caps its samples instead); part `part`
    of `num_parts` is taken before the shuffle. `retry` says how a failing hub call or read is retried.
    """

    dataset_id: str
    config: str | None = None
    split: str = DEFAULT_SPLIT
    revision: str | None = None
    data_files: DataFiles | None = None
    streaming: bool = False
    shuffle: bool = False
    seed: int = 42
    shuffle_buffer_size: int = 10_000
    take: int | None = None
    num_parts: int = 1
    part: int = 0
    retry: RetryPolicy = RetryPolicy()  # how hub calls and stream reads are retried (config section `hub`)
    # a resumable build's stream position (resumable.StreamPosition): where its stream starts, and the
    # stream opened there; no option of the read (not compared)
    position: Any = field(default=None, compare=False, repr=False)

    def __post_init__(self):
        if self.take is not None and self.take < 0:
            raise ValueError(f"take must be >= 0 or None, got {self.take}")
        n, k = self.num_parts, self.part
        if not isinstance(n, int) or n < 1 or not isinstance(k, int) or not 0 <= k < n:
            raise ValueError(f"part must be in 0..num_parts-1 with num_parts >= 1, got part={k!r}, num_parts={n!r}")
        if self.data_files is not None:
            data_files_by_split(self.data_files)  # a malformed value fails here, not at the first row

    @property
    def local(self) -> bool:
        return self.data_files is not None

    def has_split(self, split: str) -> bool:
        """True if the hub is read (any split may exist there) or the local files name `split`."""
        return not self.local or split in data_files_by_split(self.data_files)


class SourceUnavailableError(ConnectionError):
    """A hub dataset could not be reached (offline, DNS, timeout). Never replaced by sample data."""


RETRY_HINT = "run the same command again once the hub answers (the retries: `hub.attempts`, `hub.max_wait_s`)"


def unavailable(dataset_id: str, config: str | None, exc: BaseException) -> SourceUnavailableError:
    """One line for a hub dataset that cannot be read: no network or offline mode (retry.classify:
    unreachable) names the demo switch; a hub that kept failing past the retries says to run again."""
    what = f"{dataset_id!r}" + (f" (config {config!r})" if config else "")
    hint = DEMO_HINT if classify(exc) == UNREACHABLE else RETRY_HINT
    return SourceUnavailableError(f"cannot reach hub dataset {what}: {type(exc).__name__}: {short(exc, 300)}. {hint}.")


class HubDatasetError(ValueError):
    """A hub read names what its repository does not have: the dataset, a config, a split or a revision."""
