"""fineweb-edu pretrain text, streamed from the hub and never materialized.

Rows are read through `hub.open_dataset` (the hub id, or local parquet files in the same schema
with `data_files=`), shuffled with `IterableDataset.shuffle(seed=, buffer_size=)`, and cut after
`take` samples without reading further. The text field follows `select_text_field`.
"""

from __future__ import annotations

from collections.abc import Iterator

from niels_gpt.data.text_fields import iter_hub_text_samples
from niels_gpt.data.types import PretrainSample

DATASET_ID = "HuggingFaceFW/fineweb-edu"
SOURCE = "fineweb_edu"
META_FIELDS = ("id", "url", "dump")  # enough to find a document again on the hub


def iter_fineweb_edu(
    *,
    name: str = "CC-MAIN-2024-10",
    split: str = "train",
    streaming: bool = True,
    shuffle: bool = True,
    shuffle_buffer_size: int = 10_000,
    seed: int = 42,
    take: int | None = None,
    dataset_id: str = DATASET_ID,
    revision: str | None = None,
    data_files: dict[str, str] | None = None,
    provenance: dict | None = None,
    num_parts: int = 1,
    part: int = 0,
) -> Iterator[PretrainSample]:
    """PretrainSample(text, source="fineweb_edu", meta={index, id, url, dump}) in stream order.

    `data_files={split: glob}` reads local parquet files in the hub schema instead of the hub;
    `provenance` (a dict) is filled with what was read, revision included, once the data is opened.
    """
    yield from iter_hub_text_samples(
        dataset_id,
        name,
        source=SOURCE,
        meta_fields=META_FIELDS,
        split=split,
        streaming=streaming,
        shuffle=shuffle,
        shuffle_buffer_size=shuffle_buffer_size,
        seed=seed,
        take=take,
        revision=revision,
        data_files=data_files,
        provenance=provenance,
        num_parts=num_parts,
        part=part,
    )
