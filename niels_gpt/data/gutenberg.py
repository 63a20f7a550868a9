"""Project Gutenberg books as pretrain text, streamed, with the license header and footer removed.

Default `nikolina-p/gutenberg_clean_en_splits` (English, already cleaned); `manu/project_gutenberg`
(raw books, columns id/text, splits by language, e.g. "en") works too: pass `dataset_id=` and its
split. Same path as fineweb-edu: `hub.open_dataset`, buffer shuffle, `take`, `select_text_field`,
normalization. One sample per row (a book or a part of one).

Boilerplate (`strip_boilerplate=True`, the default): a raw book is its license header, a start
marker, the book, an end marker and the license footer. `strip_gutenberg_boilerplate` keeps only the
text between the markers; a book without markers (the cleaned dataset) passes through unchanged.
Markers, matched case-insensitively at the start of a line:
  start  `*** START OF THE PROJECT GUTENBERG EBOOK <title> ***`: THE or THIS, EBOOK or E-BOOK, the
         title optional and possibly wrapped onto the next lines, spaces around the asterisks
         optional; or the older header's last line `*END*THE SMALL PRINT! ...`
  end    `*** END OF THE PROJECT GUTENBERG EBOOK <title> ***` (the same variants), or the line
         `End of the Project Gutenberg EBook of ...` / `End of Project Gutenberg's ...` before it
The book starts after the last start marker before the first end marker, and ends at that end marker;
a book with only one of the two loses only that side. Blank lines at the start and whitespace at the end
of what is kept are dropped. The provenance dict (when given) counts what was removed in
`cleaning`: `boilerplate_books_stripped` and `boilerplate_chars_removed` (of the books read; a reader
that read ahead takes back the books it did not use: `BoilerplateCounts.unread`).
"""

from __future__ import annotations

import re
from array import array
from collections.abc import Iterator
from dataclasses import replace

from niels_gpt.data.source import HubRead
from niels_gpt.data.text_fields import iter_hub_text_samples
from niels_gpt.data.types import PretrainSample

DATASET_ID = "nikolina-p/gutenberg_clean_en_splits"
SOURCE = "gutenberg"
META_FIELDS = ("id", "title", "book_id")

_BOOK = r"PROJECT[ \t]+GUTENBERG[ \t]+E-?BOOK\b"
# A title wrapped over a few lines ends at the closing asterisks; without them the marker is one line.
_START = re.compile(
    rf"^[ \t]*\*{{3}}[ \t]*START[ \t]+OF[ \t]+(?:THE|THIS)[ \t]+{_BOOK}(?:[^*]{{0,400}}\*{{3}}[^\n]*|[^\n]*)$"
    r"|^[ \t]*\*END\*?[ \t]*THE[ \t]+SMALL[ \t]+PRINT!.*$",
    re.IGNORECASE | re.MULTILINE,
)
_END = re.compile(
    rf"^[ \t]*(?:\*{{3}}[ \t]*END[ \t]+OF[ \t]+(?:THE|THIS)[ \t]+{_BOOK}"
    r"|END[ \t]+OF[ \t]+(?:THE[ \t]+|THIS[ \t]+)?PROJECT[ \t]+GUTENBERG\b)",
    re.IGNORECASE | re.MULTILINE,
)
_LEADING_BLANK_LINES = re.compile(r"\A(?:[ \t]*\n)+")


def book_span(text: str) -> tuple[int, int] | None:
    """(start, stop) of the book between its markers (see the module docstring), None without markers."""
    first = _START.search(text)
    end = _END.search(text, first.end() if first else 0)
    if first is None and end is None:
        return None
    stop = end.start() if end else len(text)
    start = 0
    for m in _START.finditer(text, 0, stop):
        start = m.end()
    return start, stop


def strip_gutenberg_boilerplate(text: str) -> str:
    """The book between the start and end markers, blank lines before and whitespace after it dropped;
    `text` unchanged if it has no markers."""
    span = book_span(text)
    return text if span is None else _cut(text, span)


def _cut(text: str, span: tuple[int, int]) -> str:
    return _LEADING_BLANK_LINES.sub("", text[span[0] : span[1]]).rstrip()


class BoilerplateCounts(dict):
    """`boilerplate_books_stripped` and `boilerplate_chars_removed` of the books read so far (a dict, as
    provenance is written), and `unread(n)`: the last n books taken back. A reader that read books ahead
    and never used them (the pretrain writer at its budgets) takes them back, so the counts are those of
    the books used, whatever the read-ahead (batch sizes, worker count)."""

    def __init__(self):
        super().__init__(boilerplate_books_stripped=0, boilerplate_chars_removed=0)
        self._removed = array("q")  # per book read, in order: chars removed, -1 if it had no markers

    def add(self, removed: int | None) -> None:
        self._removed.append(-1 if removed is None else removed)
        if removed is not None:
            self["boilerplate_books_stripped"] += 1
            self["boilerplate_chars_removed"] += removed

    def unread(self, n: int) -> None:
        for _ in range(min(n, len(self._removed))):
            removed = self._removed.pop()
            if removed >= 0:
                self["boilerplate_books_stripped"] -= 1
                self["boilerplate_chars_removed"] -= removed


def _stripped(samples: Iterator[PretrainSample], counts: BoilerplateCounts) -> Iterator[PretrainSample]:
    for sample in samples:
        span = book_span(sample.text)
        if span is None:
            counts.add(None)
        else:
            body = _cut(sample.text, span)
            counts.add(len(sample.text) - len(body))
            sample = replace(sample, text=body)
        yield sample


def iter_gutenberg(
    *,
    dataset_id: str = DATASET_ID,
    split: str = "train",
    streaming: bool = True,
    shuffle: bool = True,
    shuffle_buffer_size: int = 10_000,
    seed: int = 42,
    take: int | None = None,
    strip_boilerplate: bool = True,
    read: HubRead | None = None,
    provenance: dict | None = None,
) -> Iterator[PretrainSample]:
    """PretrainSample(text, source="gutenberg", meta={index, id/title if present}) in stream order.

    The keywords from `dataset_id` to `take` describe a read of the hub dataset; `read` (a HubRead: what
    the registry passes, or a test's local `data_files`, revision, part of N) replaces them all.
    """
    read = read or HubRead(
        dataset_id, split=split, streaming=streaming, shuffle=shuffle,
        shuffle_buffer_size=shuffle_buffer_size, seed=seed, take=take,
    )  # fmt: skip
    samples = iter_hub_text_samples(read, source=SOURCE, meta_fields=META_FIELDS, provenance=provenance)
    if not strip_boilerplate:
        yield from samples
        return
    counts = BoilerplateCounts()
    if provenance is not None:
        provenance["cleaning"] = counts  # filled while the books are read
    yield from _stripped(samples, counts)
