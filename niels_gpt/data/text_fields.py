"""Rows of a text dataset -> PretrainSample: which field holds the text, and what goes in meta.

Field rule: `text` if it is a string, else the first string-valued field in the row's
order, else a ValueError listing the keys (a dataset with an unexpected schema fails on its first
row, never silently). Every text passes through `normalize_text`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from niels_gpt.data.hub import HubRead, iter_rows, open_dataset
from niels_gpt.data.normalize import normalize_text
from niels_gpt.data.types import PretrainSample

PREFERRED_FIELD = "text"  # the column name in fineweb-edu, wikitext and both gutenberg datasets


def select_text_field(sample: Mapping) -> str:
    """The text of a row: sample["text"], else the first string field; ValueError if none."""
    value = sample.get(PREFERRED_FIELD)
    if isinstance(value, str):
        return value
    for value in sample.values():
        if isinstance(value, str):
            return value
    raise ValueError(f"row has no string field to read text from; keys: {list(sample)}")


def pretrain_samples(
    rows: Iterable[tuple[int, Mapping]], *, source: str, meta_fields: tuple[str, ...] = ()
) -> Iterator[PretrainSample]:
    """One PretrainSample per (index, row); meta has `index` and those of `meta_fields` the row has."""
    for index, row in rows:
        meta = {"index": index}
        for key in meta_fields:
            if key in row and isinstance(row[key], (str, int, float, bool)):
                meta[key] = row[key]
        yield PretrainSample(text=normalize_text(select_text_field(row)), source=source, meta=meta)


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
    yield from pretrain_samples(iter_rows(ds, read, provenance), source=source, meta_fields=meta_fields)
