"""wikitext (Salesforce/wikitext, wikitext-103-raw-v1): lines, and lines grouped into articles.

The hub rows are lines, each ending in "\n", with "" rows between paragraphs. A *line* here is a
row's text without that one trailing newline, normalized; rows that are empty or whitespace-only
are dropped. Nothing else is cleaned.

- `iter_wikitext`: one PretrainSample per non-empty line.
- `load_wikitext` (the wiki byte stream): {"train", "val", "test"} -> list of non-empty lines.
- `iter_wikitext_articles`: one PretrainSample per article; an article starts at a top-level
  heading line ` = Title = ` (exactly one "=" on each side; ` = = Section = = ` is not one) and is
  its lines joined with "\n". Lines before the first heading form an article of their own.
"""

from __future__ import annotations

from collections.abc import Iterator

from niels_gpt.data.hub import iter_rows, open_dataset
from niels_gpt.data.normalize import is_blank, normalize_text
from niels_gpt.data.text_fields import select_text_field
from niels_gpt.data.types import PretrainSample

DATASET_ID = "Salesforce/wikitext"  # the bare id "wikitext" is served from here (datasets >= 4)
CONFIG = "wikitext-103-raw-v1"
SOURCE = "wikitext"
SPLIT_NAMES = {"train": "train", "val": "validation", "test": "test"}  # load_wikitext key -> hub split


def is_article_heading(line: str) -> bool:
    """` = Title = ` (one "=" each side), not ` = = Section = = `."""
    s = line.strip()
    return len(s) >= 5 and s.startswith("= ") and s.endswith(" =") and not s.startswith("= =") and not s.endswith("= =")


def _lines(dataset_id, config, split, revision, data_files, provenance, take) -> Iterator[tuple[int, str]]:
    ds = open_dataset(
        dataset_id,
        config,
        split=split,
        streaming=False,
        revision=revision,
        data_files=data_files,
        provenance=provenance,
    )
    n = 0
    for index, row in iter_rows(ds, dataset_id=dataset_id, config=config, provenance=provenance):
        if take is not None and n >= take:
            return
        text = select_text_field(row)
        if text.endswith("\n"):
            text = text[:-1]
        text = normalize_text(text)
        if not is_blank(text):
            n += 1
            yield index, text


def iter_wikitext(
    *,
    config: str = CONFIG,
    split: str = "train",
    take: int | None = None,
    dataset_id: str = DATASET_ID,
    revision: str | None = None,
    data_files: dict[str, str] | None = None,
    provenance: dict | None = None,
) -> Iterator[PretrainSample]:
    """One PretrainSample per non-empty line, meta={"index": hub row index}; at most `take`."""
    for index, line in _lines(dataset_id, config, split, revision, data_files, provenance, take):
        yield PretrainSample(text=line, source=SOURCE, meta={"index": index})


def iter_wikitext_articles(
    *,
    config: str = CONFIG,
    split: str = "train",
    take: int | None = None,
    dataset_id: str = DATASET_ID,
    revision: str | None = None,
    data_files: dict[str, str] | None = None,
    provenance: dict | None = None,
) -> Iterator[PretrainSample]:
    """One PretrainSample per article (lines joined with "\\n"), meta={"article", "title", "first_row"}."""
    lines: list[str] = []
    first_row = 0
    count = 0

    def article() -> PretrainSample:
        title = lines[0].strip().strip("=").strip() if is_article_heading(lines[0]) else None
        return PretrainSample(
            text="\n".join(lines), source=SOURCE, meta={"article": count, "title": title, "first_row": first_row}
        )

    for index, line in _lines(dataset_id, config, split, revision, data_files, provenance, None):
        if is_article_heading(line) and lines:
            if take is not None and count >= take:
                return
            yield article()
            count += 1
            lines = []
        if not lines:
            first_row = index
        lines.append(line)
    if lines and (take is None or count < take):
        yield article()


def load_wikitext(
    *,
    config: str = CONFIG,
    dataset_id: str = DATASET_ID,
    revision: str | None = None,
    data_files: dict[str, str] | None = None,
    splits: dict[str, str] | None = None,
    provenance: dict | None = None,
) -> dict[str, list[str]]:
    """{"train", "val", "test"} -> non-empty lines. `splits` maps these keys to hub splits.

    With `data_files`, a key whose hub split has no files gets []. `provenance`, if given, gets one
    entry per key.
    """
    splits = splits or SPLIT_NAMES
    out: dict[str, list[str]] = {}
    for key, split in splits.items():
        if data_files is not None and split not in data_files:
            out[key] = []
            continue
        prov = {} if provenance is not None else None
        out[key] = [line for _, line in _lines(dataset_id, config, split, revision, data_files, prov, None)]
        if provenance is not None:
            provenance[key] = prov
    return out
