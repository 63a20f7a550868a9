"""wikitext (Salesforce/wikitext, wikitext-103-raw-v1): lines, and lines grouped into articles.

The hub rows are lines, each ending in "\n", with "" rows between paragraphs. A *line* here is a
row's text without that one trailing newline, normalized; rows that are empty or whitespace-only
are dropped. Nothing else is cleaned.

- `iter_wikitext`: one PretrainSample per non-empty line.
- `load_wikitext` (the wiki byte stream): {"train", "val", "test"} -> list of non-empty lines.
- `wikitext_articles(lines)`: those lines grouped, one PretrainSample per article; an article starts
  at a top-level heading line ` = Title = ` (exactly one "=" on each side; ` = = Section = = ` is not
  one) and is its lines joined with "\n". Lines before the first heading form an article of their own.

Rows are read whole and in order (lines make up articles): `take` counts samples, and a read with
`shuffle` is refused.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import replace

from niels_gpt.data.hub import iter_rows, open_dataset
from niels_gpt.data.normalize import is_blank, normalize_text
from niels_gpt.data.source import HubRead
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


def _lines(read: HubRead, provenance: dict | None) -> Iterator[tuple[int, str]]:
    """(row index, line) of the non-empty lines of `read.split`, in row order; at most `read.take`."""
    if read.shuffle:
        raise ValueError("wikitext is read in row order (its lines make up articles): a shuffled read is refused")
    ds = open_dataset(read, provenance)
    n = 0
    for index, row in iter_rows(ds, replace(read, take=None), provenance):
        if read.take is not None and n >= read.take:
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
    read: HubRead | None = None,
    provenance: dict | None = None,
) -> Iterator[PretrainSample]:
    """One PretrainSample per non-empty line, meta={"index": hub row index}; at most `take`.

    The keywords describe a read of the hub dataset; `read` (a HubRead: what the registry passes, or a
    test's local `data_files`) replaces them all.
    """
    read = read or HubRead(DATASET_ID, config, split=split, take=take)
    for index, line in _lines(read, provenance):
        yield PretrainSample(text=line, source=SOURCE, meta={"index": index})


def wikitext_articles(lines: Iterable[PretrainSample], *, take: int | None = None) -> Iterator[PretrainSample]:
    """`iter_wikitext`'s lines as articles (lines joined with "\\n"), meta={"article", "title", "first_row"};
    at most `take`."""
    group: list[PretrainSample] = []
    count = 0

    def article() -> PretrainSample:
        first = group[0].text
        title = first.strip().strip("=").strip() if is_article_heading(first) else None
        meta = {"article": count, "title": title, "first_row": group[0].meta["index"]}
        return PretrainSample(text="\n".join(line.text for line in group), source=SOURCE, meta=meta)

    for line in lines:
        if is_article_heading(line.text) and group:
            if take is not None and count >= take:
                return
            yield article()
            count += 1
            group = []
        group.append(line)
    if group and (take is None or count < take):
        yield article()


def load_wikitext(
    *,
    config: str = CONFIG,
    splits: dict[str, str] | None = None,
    provenance: dict | None = None,
    read: HubRead | None = None,
    lazy: bool = False,
) -> dict[str, list[str]] | dict[str, Iterator[str]]:
    """{"train", "val", "test"} -> non-empty lines. `splits` maps these keys to hub splits.

    With local data files, a key whose hub split has no files gets []. `provenance`, if given, gets
    one entry per key. `read` (a HubRead: the registry's, or a test's local `data_files`) replaces
    `config` (its split is not used).
    `lazy`: each split is a one-pass iterator, read (and its provenance entry filled) as it is iterated,
    so a caller that writes as it reads holds one line, not the split.
    """
    read = read or HubRead(DATASET_ID, config)
    out: dict[str, list[str]] | dict[str, Iterator[str]] = {}
    for key, split in (splits or SPLIT_NAMES).items():
        if not read.has_split(split):
            out[key] = []
            continue
        prov = {} if provenance is not None else None
        lines = (line for _, line in _lines(replace(read, split=split), prov))
        out[key] = lines if lazy else list(lines)
        if provenance is not None:
            provenance[key] = prov
    return out
