"""Local files in a hub dataset's own schema, read through `datasets`' packaged builders.

- `data_files` takes the forms `datasets.load_dataset(data_files=)` takes: a glob or path, or a list of
  them (both: the "train" split), or a mapping {split: glob | [globs]}; `data_files_by_split` turns each
  into {split: [glob, ...]}.
- A split's files are its globs' matches, each glob's sorted, in the order of the globs, each file once.
- The builder (parquet or json) follows the file extension; one split is one format.
- Parquet files of one split that differ in shape (a column only some have, a nested column that is
  all-null in one file) are read with the union of their schemas (`unified_parquet_features`).
"""

from __future__ import annotations

import glob
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from niels_gpt.hashing import sha256_file

if TYPE_CHECKING:
    from niels_gpt.data.hub import HubRead

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


def unified_parquet_features(files: list[str]):
    """`datasets.Features` covering every file's columns, or None when all files share one schema.

    Files of one split may differ in shape, as real exports do: a column only some files have
    (fineweb-edu's `date`), or a nested column typed struct in one file and all-null in another
    (oasst1's `emojis`, `labels`, `detoxify`). `datasets` casts every file to the first file's schema
    and fails on such a mix; the union (pyarrow's permissive unification: a missing column or a null
    type takes the other files' type) reads them all, missing values as None. Reads the footers only.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq
    from datasets import Features

    schemas = [pq.read_schema(f).remove_metadata() for f in files]
    if all(s.equals(schemas[0]) for s in schemas[1:]):
        return None
    try:
        union = pa.unify_schemas(schemas, promote_options="permissive")
    except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
        raise ValueError(f"{', '.join(files)}: the files' columns cannot be read as one table ({e})") from None
    return Features.from_arrow_schema(union)


def open_local(read: HubRead, provenance: dict):
    """`read.data_files` of `read.split` through the `datasets` builder of their file type; `provenance`
    gets each file and its sha256."""
    import datasets

    splits = data_files_by_split(read.data_files)
    if read.split not in splits:
        names = ", ".join(sorted(splits))
        raise ValueError(f"local data files for {read.dataset_id!r} have no split {read.split!r} (splits: {names})")
    patterns = splits[read.split]
    files = expand_data_files(patterns, split=read.split, dataset_id=read.dataset_id)
    builders = sorted({builder_for(f) for f in files})
    if len(builders) != 1:
        raise ValueError(f"{', '.join(patterns)}: mixes file types {builders}; use one format per split")
    provenance.update(
        {
            "local": True,
            "builder": builders[0],
            "data_files": [{"path": f, "sha256": sha256_file(f)} for f in files],
            "revision": None,
        }
    )
    features = unified_parquet_features(files) if builders[0] == "parquet" else None
    return datasets.load_dataset(
        builders[0], data_files={read.split: files}, split=read.split, streaming=read.streaming, features=features
    )
