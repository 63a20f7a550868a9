"""Project Gutenberg books as pretrain text, streamed.

Default `nikolina-p/gutenberg_clean_en_splits` (English, cleaned); `manu/project_gutenberg` works
too (pass `dataset_id=` and its split, e.g. "en"). Same path as fineweb-edu: `hub.open_dataset`,
buffer shuffle, `take`, `select_text_field`. One sample per row (a book or a part of one).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Optional

from niels_gpt.data.text_fields import iter_hub_text_samples
from niels_gpt.data.types import PretrainSample

DATASET_ID = "nikolina-p/gutenberg_clean_en_splits"
SOURCE = "gutenberg"
META_FIELDS = ("id", "title", "book_id")


def iter_gutenberg(
    *,
    dataset_id: str = DATASET_ID,
    split: str = "train",
    streaming: bool = True,
    shuffle: bool = True,
    shuffle_buffer_size: int = 10_000,
    seed: int = 42,
    take: Optional[int] = None,
    config: Optional[str] = None,
    revision: Optional[str] = None,
    data_files: Optional[dict[str, str]] = None,
    provenance: Optional[dict] = None,
    num_parts: int = 1,
    part: int = 0,
) -> Iterator[PretrainSample]:
    """PretrainSample(text, source="gutenberg", meta={index, id/title if present}) in stream order."""
    yield from iter_hub_text_samples(
        dataset_id, config, source=SOURCE, meta_fields=META_FIELDS, split=split, streaming=streaming,
        shuffle=shuffle, shuffle_buffer_size=shuffle_buffer_size, seed=seed, take=take, revision=revision,
        data_files=data_files, provenance=provenance, num_parts=num_parts, part=part,
    )
