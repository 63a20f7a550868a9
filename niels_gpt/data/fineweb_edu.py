"""fineweb-edu pretrain text, streamed from the hub and never materialized.

Rows are read through `hub.open_dataset` (the hub id, or local parquet files in the same schema
with `data_files=`), shuffled with `IterableDataset.shuffle(seed=, buffer_size=)`, and cut after
`take` samples without reading further. The text field follows `select_text_field`.
"""

from __future__ import annotations

from collections.abc import Iterator

from niels_gpt.data.source import HubRead
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
    read: HubRead | None = None,
    provenance: dict | None = None,
) -> Iterator[PretrainSample]:
    """PretrainSample(text, source="fineweb_edu", meta={index, id, url, dump}) in stream order.

    The keywords describe a read of the hub dataset; `read` (a HubRead: what the registry passes, or a
    test's local `data_files`, revision, part of N) replaces them all. `provenance` (a dict) is filled
    with what was read, revision included, once the data is opened.
    """
    read = read or HubRead(
        DATASET_ID, name, split=split, streaming=streaming, shuffle=shuffle,
        shuffle_buffer_size=shuffle_buffer_size, seed=seed, take=take,
    )  # fmt: skip
    yield from iter_hub_text_samples(read, source=SOURCE, meta_fields=META_FIELDS, provenance=provenance)
