"""fineweb-edu pretrain text, streamed from the hub and never materialized.

Rows are read through `hub.open_dataset` (the hub id, or local parquet files in the same schema
with `data_files=`), shuffled with `IterableDataset.shuffle(seed=, buffer_size=)`, and cut after
`take` samples without reading further. The text field follows `select_text_field`.
"""

from __future__ import annotations

from collections.abc import Iterator

from niels_gpt.data.hub import DataFiles, HubRead
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
    data_files: DataFiles | None = None,
    provenance: dict | None = None,
    num_parts: int = 1,
    part: int = 0,
    read: HubRead | None = None,
) -> Iterator[PretrainSample]:
    """PretrainSample(text, source="fineweb_edu", meta={index, id, url, dump}) in stream order.

    `data_files` (e.g. {split: glob}) reads local parquet files in the hub schema instead of the hub.
    `read` (a HubRead, what the registry passes) holds every hub option at once; given, it is used
    instead of the other keywords but `provenance`. `provenance` (a dict) is filled with what was
    read, revision included, once the data is opened.
    """
    read = read or HubRead.from_keywords(locals(), config="name")
    yield from iter_hub_text_samples(read, source=SOURCE, meta_fields=META_FIELDS, provenance=provenance)
