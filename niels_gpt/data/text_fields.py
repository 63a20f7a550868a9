"""Rows of a text dataset -> PretrainSample: which field holds the text, and what goes in meta.

Field rule: `text` if it is a string, else the first string-valued field in the row's
order, else a ValueError listing the keys (a dataset with an unexpected schema fails on its first
row, never silently). Every text passes through `normalize_text`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

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
    dataset_id: str,
    config: str | None,
    *,
    source: str,
    meta_fields: tuple[str, ...],
    split: str,
    streaming: bool,
    shuffle: bool,
    shuffle_buffer_size: int,
    seed: int,
    take: int | None,
    revision: str | None,
    data_files: dict[str, str] | None,
    provenance: dict | None,
    num_parts: int = 1,
    part: int = 0,
) -> Iterator[PretrainSample]:
    """The one read path of the streamed text sources (fineweb-edu, gutenberg): open the dataset
    (hub or local files), record the shuffle in `provenance`, keep part `part` of `num_parts` (all by
    default; `hub.shard_parts`, before the shuffle), shuffle/take rows, map them to samples."""
    from niels_gpt.data.hub import iter_rows, open_dataset

    ds = open_dataset(
        dataset_id,
        config,
        split=split,
        streaming=streaming,
        revision=revision,
        data_files=data_files,
        provenance=provenance,
    )
    if provenance is not None:
        provenance.update(
            {"shuffle": shuffle, "shuffle_buffer_size": shuffle_buffer_size if shuffle else 0, "seed": seed}
        )
    rows = iter_rows(
        ds,
        dataset_id=dataset_id,
        config=config,
        take=take,
        shuffle=shuffle,
        seed=seed,
        shuffle_buffer_size=shuffle_buffer_size,
        provenance=provenance,
        num_parts=num_parts,
        part=part,
    )
    yield from pretrain_samples(rows, source=source, meta_fields=meta_fields)
