"""Rows of the test hub's datasets, in each dataset's schema, generated as they are written.

The text comes from the sample-data generators (scripts/sample_data: the project's own word lists
and templates), which write about 1.5 MB of text a second: plenty for the tests, too slow for a
benchmark of a gigabyte. So the long-text sources keep a pool of the first documents (`POOL`, `WIKI_POOL`) the
generator writes: the first ones are the generator's own, and each later one is drawn from the
pool by a seeded rng (a fineweb page: a pool page's metadata and as many paragraphs as it has, each
drawn from all pool paragraphs; a wikitext article: a pool article's headings with drawn paragraphs
and a numbered title), as fast as the rows can be written out. Chat rows (dolly, oasst1) and books are the
generators' own at any size. Every iterator is a pure function of its arguments.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator

from scripts.sample_data import documents
from scripts.sample_data.exports import raw_gutenberg_book
from scripts.sample_data.instructions import dolly_row
from scripts.sample_data.message_trees import build_trees
from scripts.sample_data.sentences import Writer, roman
from scripts.sample_data.sources import DOLLY_CATEGORIES

POOL = 1_000  # fineweb pages the generator writes before drawing: ~1 s, ~1.7 MB of text
WIKI_POOL = 200  # wikitext articles the generator writes before drawing: ~1 s
TREES_PER_BATCH = 200  # oasst1 trees generated at a time (the generator builds a list per call)


def writer(seed: int, name: str) -> Writer:
    return Writer(random.Random(f"{seed}:hub:{name}"))


def varied(rng: random.Random, paragraph: str, vocabulary: list[str]) -> str:
    """`paragraph` with a word of `vocabulary` inserted after every 4th to 8th word (the gap drawn once per
    paragraph): every run of 9 or more of its words holds an inserted one, so a drawn paragraph shares almost
    no 13-gram with its pool original or another draw of it, as distinct web pages do."""
    words = paragraph.split(" ")
    gap = rng.randint(4, 8)
    picks = rng.choices(vocabulary, k=len(words) // gap + 1)
    out = []
    for k, start in enumerate(range(0, len(words), gap)):
        out += words[start : start + gap]
        out.append(picks[k])
    return " ".join(out[:-1])


def vocabulary_of(paragraphs: list[str]) -> list[str]:
    """The distinct plain words (letters only) of `paragraphs`, in first-seen order."""
    return list(dict.fromkeys(word for p in paragraphs for word in p.split(" ") if word.isalpha()))


def fineweb_rows(seed: int, dump: str, n: int, distinct: bool = False) -> Iterator[dict]:
    """`n` HuggingFaceFW/fineweb-edu rows of `dump` (its 11 columns). `distinct`: every drawn paragraph
    `varied` (rows past the pool share almost no 13-gram), else drawn as the pool wrote it."""
    w = writer(seed, f"fineweb_edu:{dump}")
    vocabulary: list[str] = []
    pool: list[dict] = []
    paragraphs: list[str] = []
    for i in range(n):
        if i < POOL:
            row = {**documents.fineweb_row(w, i), "dump": dump}
            row["file_path"] = row["file_path"].replace("CC-MAIN-2024-10", dump)
            pool.append(row)
            paragraphs += row["text"].split("\n\n")
            yield row
            continue
        base = pool[w.rng.randrange(len(pool))]
        drawn = w.rng.choices(paragraphs, k=base["text"].count("\n\n") + 1)
        if distinct:
            vocabulary = vocabulary or vocabulary_of(paragraphs)
            drawn = [varied(w.rng, p, vocabulary) for p in drawn]
        text = "\n\n".join(drawn)
        yield {
            **base,
            "text": text,
            "id": f"<urn:uuid:{uuid.UUID(int=w.rng.getrandbits(128), version=4)}>",
            "url": f"{base['url']}-{i}",
            "token_count": max(1, round(len(text) / 4.6)),
        }


def wikitext_articles(seed: int, name: str, n: int, distinct: bool = False) -> Iterator[list[str]]:
    """`n` wikitext articles, each the list of its `text` rows as wikitext-103-raw stores them (a
    heading row ` = Title = `, empty rows between blocks, paragraphs ` ... \n`); `distinct` as fineweb_rows."""
    w = writer(seed, f"wikitext:{name}")
    vocabulary: list[str] = []
    pool: list[list[str]] = []
    paragraphs: list[str] = []
    for i in range(n):
        if i < WIKI_POOL:
            rows = documents.wiki_article(w)
            pool.append(rows)
            paragraphs += [r for r in rows if r.startswith(" ") and not r.startswith(" = ")]
            yield rows
            continue
        base = pool[w.rng.randrange(len(pool))]
        title = base[1].strip().strip("=").strip()
        body = [w.pick(paragraphs) if r.startswith(" ") and not r.startswith(" = ") else r for r in base[2:]]
        if distinct:
            vocabulary = vocabulary or vocabulary_of(paragraphs)
            body = [varied(w.rng, r, vocabulary) if r.startswith(" ") and not r.startswith(" = ") else r for r in body]
        yield ["", f" = {title} {roman(i // WIKI_POOL + 1)} = \n", *body]


def book_rows(seed: int, name: str, n: int, chars: int, *, raw: bool) -> Iterator[dict]:
    """`n` books of about `chars` characters: raw ({"id", "text"}: BOM, CRLF, license header and
    footer, as manu/project_gutenberg has them) or cleaned ({"text", "id", "title"})."""
    w = writer(seed, f"gutenberg:{name}")
    for i in range(n):
        if raw:
            yield raw_gutenberg_book(w, i, chars)
        else:
            title, text = documents.book(w, chars)
            yield {"text": text, "id": str(w.rng.randint(10_000, 72_000)), "title": title}


def dolly_rows(seed: int, n: int) -> Iterator[dict]:
    """`n` databricks-dolly-15k rows (instruction, context, response, category), categories in turn."""
    w = writer(seed, "dolly15k")
    for i in range(n):
        yield dolly_row(w, DOLLY_CATEGORIES[i % len(DOLLY_CATEGORIES)])


def oasst1_rows(seed: int, split: str, n_trees: int) -> Iterator[dict]:
    """The message rows of `n_trees` OpenAssistant/oasst1 trees (each tree's rows together)."""
    w = writer(seed, f"oasst1:{split}")
    for start in range(0, n_trees, TREES_PER_BATCH):
        yield from build_trees(w, min(TREES_PER_BATCH, n_trees - start))
