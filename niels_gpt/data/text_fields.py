"""Rows of a text dataset -> PretrainSample: which field holds the text, and what goes in meta.

Field rule: `text` if it is a string, else the first string-valued field in the row's
order, else a ValueError listing the keys (a dataset with an unexpected schema fails on its first
row, never silently). Every text passes through `normalize_text`.

A streamed read (`TextRows`, a hub.RowMapper) takes only the string columns and the meta fields (no
other column can hold the text) and maps each block of rows at once: the `text` column and the meta
columns are converted together, and `normalize_text` runs only on the texts it can change beyond
Unicode NFC (`changeable`: a scan of the column's UTF-8 bytes); the others are NFC-normalized if they
are not ASCII. The samples are those of the row-by-row rule (tests/data/test_text_fields.py).
"""

from __future__ import annotations

import itertools
import unicodedata
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from niels_gpt.data.hub import iter_rows, open_dataset
from niels_gpt.data.normalize import normalize_text
from niels_gpt.data.source import HubRead
from niels_gpt.data.types import PretrainSample

PREFERRED_FIELD = "text"  # the column name in fineweb-edu, wikitext and both gutenberg datasets
META_TYPES = (str, int, float, bool)  # the meta values a sample keeps
STRING_DTYPES = ("string", "large_string")  # datasets' Value dtypes whose values are str


def select_text_field(sample: Mapping) -> str:
    """The text of a row: sample["text"], else the first string field; ValueError if none."""
    value = sample.get(PREFERRED_FIELD)
    if isinstance(value, str):
        return value
    for value in sample.values():
        if isinstance(value, str):
            return value
    raise ValueError(f"row has no string field to read text from; keys: {list(sample)}")


def changeable(column: Any) -> Any:
    """For each string of an Arrow string column (a numpy bool array): whether `normalize_text` may
    change it other than by NFC. Its UTF-8 bytes hold a control byte other than tab and newline (CR
    included), DEL, or the start of a character it removes: C2 80-9F and C2 AD (U+0080-U+009F,
    U+00AD), E2 80 8B (U+200B), E2 81 A0 (U+2060), EF BB BF (U+FEFF). For any other string
    `normalize_text` is NFC alone (its identity on ASCII)."""
    import numpy as np
    import pyarrow as pa

    out = np.zeros(len(column), dtype=bool)
    first = 0
    for chunk in column.chunks if isinstance(column, pa.ChunkedArray) else [column]:
        if len(chunk) and chunk.buffers()[2] is not None:
            wide = pa.types.is_large_string(chunk.type)
            width = 8 if wide else 4
            offsets = np.frombuffer(
                chunk.buffers()[1],
                dtype=np.int64 if wide else np.int32,
                count=len(chunk) + 1,
                offset=chunk.offset * width,
            )
            data = np.frombuffer(chunk.buffers()[2], dtype=np.uint8)[offsets[0] : offsets[-1]]
            # one pass finds every byte below 0x20 or from 0x7f on (the uint8 difference wraps below 0x20)
            at = np.flatnonzero(np.subtract(data, 0x20, dtype=np.uint8) >= 0x5F)
            lead = data[at]
            # the next two bytes; past the end "clip" repeats the last byte, which matches no sequence
            one, two = data.take(at + 1, mode="clip"), data.take(at + 2, mode="clip")
            hit = (
                ((lead < 0x20) & (lead != 0x09) & (lead != 0x0A))
                | (lead == 0x7F)
                | ((lead == 0xC2) & ((one < 0xA0) | (one == 0xAD)))
                | ((lead == 0xE2) & (((one == 0x80) & (two == 0x8B)) | ((one == 0x81) & (two == 0xA0))))
                | ((lead == 0xEF) & (one == 0xBB) & (two == 0xBF))
            )
            out[first + np.searchsorted(offsets, at[hit] + offsets[0], side="right") - 1] = True
        first += len(chunk)
    return out


def _meta(row: Mapping, meta_fields: tuple[str, ...]) -> dict:
    return {key: row[key] for key in meta_fields if key in row and isinstance(row[key], META_TYPES)}


class TextRows:
    """hub.RowMapper of a text source: a row -> (normalize_text(select_text_field(row)), its meta
    fields of a scalar value); a row without any string field -> (None, its ValueError), raised by
    `samples` when that row is reached (a block is mapped ahead of its rows being used)."""

    def __init__(self, meta_fields: tuple[str, ...]):
        self.meta_fields = tuple(meta_fields)

    def columns(self, features: Any) -> list[str] | None:
        """The string columns and the meta fields, in the features' order; None (all) without features or
        without a string column (every row fails, naming all its keys)."""
        if features is None or not any(_is_string(feature) for feature in features.values()):
            return None
        return [name for name, feature in features.items() if name in self.meta_fields or _is_string(feature)]

    def row(self, row: Mapping) -> tuple:
        try:
            return normalize_text(select_text_field(row)), _meta(row, self.meta_fields)
        except ValueError as e:
            return None, e

    def block(self, block: Any) -> list[tuple]:
        """The rows of a stream_files.Block, `text` and the meta columns converted together."""
        import pyarrow as pa

        table = block.table
        names = table.column_names
        if PREFERRED_FIELD not in names or table.schema.field(PREFERRED_FIELD).type not in (
            pa.string(),
            pa.large_string(),
        ):
            return [self.row(row) for row in block.rows()]
        texts = block.column(PREFERRED_FIELD)
        change = changeable(table.column(PREFERRED_FIELD))
        keys = [key for key in self.meta_fields if key in names]
        values = zip(*(block.column(key) for key in keys)) if keys else itertools.repeat(())
        rows = None
        out = []
        for i, (text, meta) in enumerate(zip(texts, values)):
            if text is None:  # the rule falls back to another string field: the whole row
                rows = rows or block.rows()
                out.append(self.row(rows[i]))
                continue
            if change[i]:
                text = normalize_text(text)
            elif not text.isascii():
                text = unicodedata.normalize("NFC", text)
            out.append((text, {k: v for k, v in zip(keys, meta) if isinstance(v, META_TYPES)}))
        return out


def _is_string(feature: Any) -> bool:
    return getattr(feature, "dtype", None) in STRING_DTYPES and type(feature).__name__ == "Value"


def samples(rows: Iterable[tuple[int, tuple]], *, source: str) -> Iterator[PretrainSample]:
    """One PretrainSample per (index, (text, meta)) of TextRows; meta gets `index` first."""
    for index, (text, meta) in rows:
        if text is None:
            raise meta
        yield PretrainSample(text=text, source=source, meta={"index": index, **meta})


def pretrain_samples(
    rows: Iterable[tuple[int, Mapping]], *, source: str, meta_fields: tuple[str, ...] = ()
) -> Iterator[PretrainSample]:
    """One PretrainSample per (index, row); meta has `index` and those of `meta_fields` the row has."""
    mapper = TextRows(meta_fields)
    return samples(((index, mapper.row(row)) for index, row in rows), source=source)


def iter_hub_text_samples(
    read: HubRead, *, source: str, meta_fields: tuple[str, ...], provenance: dict | None = None
) -> Iterator[PretrainSample]:
    """The one read path of the streamed text sources (fineweb-edu, gutenberg): open the dataset (hub or
    local files), record the shuffle in `provenance`, walk the rows (`hub.iter_rows`: the part, the
    shuffle, take), map them to samples. Nothing is opened before the first sample is asked for."""
    ds = open_dataset(read, provenance)
    if provenance is not None:
        buffer = read.shuffle_buffer_size if read.shuffle else 0
        provenance.update({"shuffle": read.shuffle, "shuffle_buffer_size": buffer, "seed": read.seed})
    yield from samples(iter_rows(ds, read, provenance, TextRows(meta_fields)), source=source)
