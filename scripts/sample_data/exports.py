"""Sample files in the shape real tools export them: raw Project Gutenberg books and Roam notes.

- `raw_gutenberg_book(w, index)`: one book of the raw dataset (manu/project_gutenberg: columns id,
  text) laid out as a distributed e-text: a byte-order mark, CRLF line ends, a header with the
  catalogue fields, a start marker, the book, an end marker and a long footer of terms. The marker
  lines follow the real formats (four variants, by `index`); every other line of the header and
  footer is invented here.
- `roam_export(w, titles)`: {relative path: bytes} of notes as Roam/Obsidian exports write them:
  bulleted pages (`- ` outlines nested by tabs or four spaces, [[links]], #tags, #[[tags]],
  ((block refs)), {{embeds}}, attributes), flat pages (`# ` headings, one block per line), namespaced
  pages in subfolders, daily pages named like Roam's, file names with spaces, a leading space, accents
  (composed and decomposed), punctuation and brackets; some start with a BOM or use CRLF, some are
  empty or whitespace-only. Every name stays valid on Windows and macOS (no `:*?"<>|`, no newline).
"""

from __future__ import annotations

from scripts.sample_data.documents import book
from scripts.sample_data.sentences import Writer, title_case

BOM = "\ufeff"
MONTHS = ["January", "February", "March", "April", "May", "June"]

# ---------------------------------------------------------------- raw Project Gutenberg books

# (start marker, end lines): the variants real books carry; {T} is the title in capitals
MARKERS = [
    ("*** START OF THE PROJECT GUTENBERG EBOOK {T} ***", "*** END OF THE PROJECT GUTENBERG EBOOK {T} ***"),
    (
        "*** START OF THIS PROJECT GUTENBERG E-BOOK ***",
        "End of the Project Gutenberg EBook of {t}, by {a}\n\n*** END OF THIS PROJECT GUTENBERG E-BOOK ***",
    ),
    ("*END*THE SMALL PRINT! FOR PUBLIC DOMAIN ETEXTS*Ver.04.29.93*END*", "End of Project Gutenberg's {t}, by {a}"),
    ("***START OF THE PROJECT GUTENBERG EBOOK\n{T}***", "***END OF THE PROJECT GUTENBERG EBOOK {T}***"),
]
TERMS = [  # the footer's invented clauses, numbered and repeated into a long section as in real files
    "This sample text may be copied, shared and changed by anyone for any purpose.",
    "The generator that wrote it keeps no record of who reads it and asks for nothing in return.",
    "Where this notice and the law of your country disagree, the law of your country decides.",
    "No promise is made that the text is complete, correct or fit for any particular use.",
    "Corrections are welcome; later printings of the sample replace earlier ones without notice.",
]


def _header(w: Writer, title: str, author: str, number: int, variant: int) -> str:
    lines = [f"The Project Gutenberg eBook of {title}, by {author}", ""]
    lines += [
        "This sample e-text was written by the niels_gpt sample generator. The notice around it only",
        "imitates where a distributed e-text keeps its terms; none of it belongs to the book.",
        "",
        f"Title: {title}",
        "",
        f"Author: {author}",
        "",
        f"Release date: {w.pick(MONTHS)} {w.rng.randint(1, 28)}, {w.rng.randint(1994, 2023)} [eBook #{number}]",
        "",
        "Language: English",
        "",
        f"Credits: Transcribed by {w.names.person()} and the {w.pick(w.names.places)} Reading Circle",
        "",
    ]
    if variant == 2:  # the older header: a long "small print" section ends it
        lines += ["*SMALL PRINT! FOR THIS SAMPLE ETEXT*", ""] + [f"({k}) {t}" for k, t in enumerate(TERMS, 1)] + [""]
    return "\n".join(lines) + "\n"


def _footer(w: Writer, number: int) -> str:
    sections = [
        f"\n\nSample e-text {number}: its number and its terms are invented.\n",
        "*** START: FULL LICENSE ***\n",
    ]
    for k in range(1, 9):
        clauses = " ".join(w.rng.sample(TERMS, 3))
        sections.append(f"Section {k}. {clauses}\n\n{k}.A. {w.pick(TERMS)}\n")
    return "\n".join(sections)


def raw_gutenberg_book(w: Writer, index: int, chars: int = 20_000) -> dict:
    """One row of manu/project_gutenberg ({"id", "text"}) in the raw layout; marker variant index % 4."""
    title, body = book(w, chars)
    author = body.split("\n\n", 2)[1].removeprefix("By ")
    number = w.rng.randint(10_000, 72_000)
    start, end = MARKERS[index % len(MARKERS)]
    names = {"{T}": title.upper(), "{t}": title, "{a}": author}
    for key, value in names.items():
        start, end = start.replace(key, value), end.replace(key, value)
    text = f"{_header(w, title, author, number, index % len(MARKERS))}\n{start}\n\n\n\n{body}\n\n\n\n{end}"
    text += _footer(w, number)
    return {"id": str(number), "text": BOM + text.replace("\n", "\r\n")}


# ---------------------------------------------------------------- Roam exports

ODD_NAMES = [  # page titles whose file names are awkward on a command line
    " Leading space",
    "Caf\u00e9 d\u00e9j\u00e0 vu",
    "Re\u0301sume\u0301 drafts",  # decomposed accents, as macOS writes file names
    "Q&A, (draft) #2 - 50% done!",
    "It's {curly} [square] $dollar",
    "\u65e5\u672c\u8a9e \u30e1\u30e2",
]
NAMESPACED = ["Projects/Harbour Survey", "Projects/Harbour Survey/Budget", "Reading/Poetry"]


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def _uid(w: Writer) -> str:
    return "".join(w.rng.choice("abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ0123456789_-") for _ in range(9))


def bulleted_page(w: Writer, links: list[str], indent: str) -> str:
    """A Roam outline: `- ` blocks nested by `indent`, links, tags, block refs, embeds, attributes."""
    topic = w.topic()
    lines = [f"- type:: {w.pick(['note', 'meeting', 'reading'])}", f"- tags:: #[[{w.pick(links)}]] #{topic}"]
    for _ in range(w.rng.randint(3, 7)):
        lines.append(f"- {w.title(topic)} [[{w.pick(links)}]]")
        for depth in range(1, w.rng.randint(2, 4)):
            body = w.sentence(topic)
            extra = w.pick(["", f" (({_uid(w)}))", f" #{topic}", f" {{{{embed: (({_uid(w)}))}}}}", " [[TODO]]"])
            lines.append(f"{indent * depth}- {body}{extra}")
    return "\n".join(lines) + "\n"


def flat_page(w: Writer, title: str, links: list[str]) -> str:
    """A flattened export: `# ` headings and one block per line, no bullets."""
    topic = w.topic()
    lines = [f"# {title}", ""]
    for _ in range(w.rng.randint(2, 4)):
        lines.append(f"## {title_case(w.pick(['notes', 'open questions', 'sources', 'next steps']))}")
        lines += [w.sentence(topic) for _ in range(w.rng.randint(2, 5))]
        lines.append(f"See [[{w.pick(links)}]] and #{topic}.")
        lines.append("")
    return "\n".join(lines)


def roam_export(w: Writer, links: list[str]) -> dict[str, bytes]:
    """{relative path: file bytes} of the exported pages; `links` are titles of pages that exist."""
    pages: dict[str, str] = {}
    titles = ODD_NAMES + NAMESPACED
    targets = links + [t for t in titles if "[" not in t]  # a [[link]] cannot hold brackets
    for k, title in enumerate(titles):
        shape = k % 3
        text = flat_page(w, title, targets) if shape == 0 else bulleted_page(w, targets, "\t" if shape == 1 else "    ")
        pages[f"{title}.md"] = text
    for day in range(1, 4):  # Roam names daily pages "March 1st, 2024"
        pages[f"{MONTHS[2]} {_ordinal(day)}, 2024.md"] = bulleted_page(w, targets, "    ")
    pages["Empty page.md"] = ""
    pages["Untitled.md"] = "\n\n  \n\t\n"
    out = {}
    for k, (rel, text) in enumerate(pages.items()):
        if k % 4 == 1:
            text = text.replace("\n", "\r\n")  # written on Windows
        if k % 5 == 2:
            text = BOM + text  # an editor that writes a byte-order mark
        out[rel] = text.encode("utf-8")
    return out
