"""Project Gutenberg boilerplate: only the book between the start and end markers is kept, every marker
variant, books without markers unchanged, counts in provenance. The books are the project's own
synthetic text in the raw layout (byte-order mark, CRLF, license header, markers, license footer)."""

from __future__ import annotations

import pytest

from niels_gpt.data.gutenberg import DATASET_ID, BoilerplateCounts, iter_gutenberg, strip_gutenberg_boilerplate
from niels_gpt.data.source import HubRead
from tests.support.hub_files import GUTENBERG_FOOTER as FOOTER
from tests.support.hub_files import GUTENBERG_HEADER as HEADER
from tests.support.hub_files import raw_gutenberg_book as raw_book
from tests.support.hub_files import write_parquet

BODY = (
    "THE LANTERN AT MILLBROOK\n\nBy Orla Fenwick\n\n\nCHAPTER I.\n\n"
    "    The lantern hung where it had always hung, above the door.\n"
    "Nobody in Millbrook remembered who had lit it first.\n\n"
    "CHAPTER II.\n\nIn the morning the ferry did not come."
)
TITLE = "THE LANTERN AT MILLBROOK"
MODERN = (
    f"*** START OF THE PROJECT GUTENBERG EBOOK {TITLE} ***",
    f"*** END OF THE PROJECT GUTENBERG EBOOK {TITLE} ***",
)
VARIANTS = {
    "modern": MODERN,
    "this e-book, no title": (
        "*** START OF THIS PROJECT GUTENBERG E-BOOK ***",
        "*** END OF THIS PROJECT GUTENBERG E-BOOK ***",
    ),
    "no spaces, lower case": (
        f"***start of the project gutenberg ebook {TITLE.lower()}***",
        "***end of the project gutenberg ebook***",
    ),
    "title wrapped": (
        "*** START OF THE PROJECT GUTENBERG EBOOK THE LANTERN\nAT MILLBROOK ***",
        "*** END OF THE PROJECT GUTENBERG EBOOK THE LANTERN ***",
    ),
    "end line before the end marker": (
        MODERN[0],
        f"End of the Project Gutenberg EBook of The Lantern, by Orla Fenwick\n\n{MODERN[1]}",
    ),
    "older small print": (
        "*END*THE SMALL PRINT! FOR PUBLIC DOMAIN ETEXTS*Ver.04.29.93*END*",
        "End of Project Gutenberg's The Lantern at Millbrook, by Orla Fenwick",
    ),
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_only_the_book_between_the_markers_is_kept(variant):
    start, end = VARIANTS[variant]
    raw = raw_book(BODY, start, end).replace("\r\n", "\n").lstrip("\ufeff")  # what normalization hands over
    assert strip_gutenberg_boilerplate(raw) == BODY


def test_a_book_without_markers_is_unchanged():
    clean = "\n  indented first line\n" + BODY + "\n\n"
    assert strip_gutenberg_boilerplate(clean) == clean


def test_one_marker_removes_only_its_side():
    assert strip_gutenberg_boilerplate(f"{HEADER}{MODERN[0]}\n{BODY}") == BODY
    assert strip_gutenberg_boilerplate(f"{BODY}\n{MODERN[1]}{FOOTER}") == BODY


def test_license_section_after_the_end_is_not_a_start():
    # "*** START: FULL LICENSE ***" in the footer must not restart the book
    assert "FULL LICENSE" not in strip_gutenberg_boilerplate(raw_book(BODY, *MODERN).replace("\r\n", "\n"))


def test_loader_strips_raw_books_counts_them_and_passes_clean_ones(tmp_path):
    raws = [raw_book(BODY + f"\n\nBook {i}.", *VARIANTS[v]) for i, v in enumerate(sorted(VARIANTS))]
    clean = "A clean book.\n\nIt has no markers."
    path = write_parquet(
        tmp_path / "en.parquet", {"id": [str(i) for i in range(len(raws) + 1)], "text": raws + [clean]}
    )
    prov: dict = {}
    read = HubRead("manu/project_gutenberg", split="en", data_files={"en": str(path)})
    samples = list(iter_gutenberg(read=read, provenance=prov))
    assert [s.text for s in samples] == [BODY + f"\n\nBook {i}." for i in range(len(raws))] + [clean]
    assert all("\ufeff" not in s.text and "\r" not in s.text for s in samples)
    normalized = [r.replace("\r\n", "\n").lstrip("\ufeff") for r in raws]
    removed = sum(len(n) for n in normalized) - sum(len(s.text) for s in samples[:-1])
    assert prov["cleaning"] == {"boilerplate_books_stripped": len(raws), "boilerplate_chars_removed": removed}
    kept = list(iter_gutenberg(read=read, strip_boilerplate=False))
    assert [s.text for s in kept] == normalized + [clean]


def test_gutenberg_local_rows(tmp_path):
    path = write_parquet(tmp_path / "g.parquet", {"text": ["book one", "book two"], "id": ["1", "2"]})
    samples = list(iter_gutenberg(read=HubRead(DATASET_ID, data_files={"train": str(path)})))
    assert [(s.text, s.source, s.meta["id"]) for s in samples] == [
        ("book one", "gutenberg", "1"),
        ("book two", "gutenberg", "2"),
    ]


def test_counts_take_back_the_last_books_read():
    counts = BoilerplateCounts()
    for removed in (10, None, 7, 3, None):
        counts.add(removed)
    assert counts == {"boilerplate_books_stripped": 3, "boilerplate_chars_removed": 20}
    counts.unread(3)  # 3, None, 7 taken back
    assert counts == {"boilerplate_books_stripped": 1, "boilerplate_chars_removed": 10}
    counts.unread(5)  # more than were read: all of them
    assert counts == {"boilerplate_books_stripped": 0, "boilerplate_chars_removed": 0}
