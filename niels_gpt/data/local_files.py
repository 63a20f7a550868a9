"""Local files in a hub dataset's own schema, read through `datasets`' packaged builders.

`open_local(read, provenance)`: the files of `read.split` (the forms and order of source.py's
`data_files` helpers) through the builder their extension names (parquet or json; one split is one
format), each file and its sha256 recorded; a prepared split as `hub.open_dataset` opens one
(`prepared.open_split`). Parquet files of one split that differ in shape (a column
only some have, a nested column that is all-null in one file) are read with the union of their schemas
(`unified_parquet_features`).
"""

from __future__ import annotations

from niels_gpt.data.prepared import open_split
from niels_gpt.data.source import HubRead, builder_for, data_files_by_split, expand_data_files
from niels_gpt.data.stream_files import register
from niels_gpt.hashing import sha256_file


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
    builder = datasets.load_dataset_builder(builders[0], data_files={read.split: files}, features=features)
    if not read.streaming:  # load_dataset's steps; the split's Arrow files are read without a memory map
        builder.download_and_prepare()
        return open_split(builder, read.split)
    ds = builder.as_streaming_dataset(split=read.split)
    register(ds, files)
    return ds
