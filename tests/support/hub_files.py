"""Tiny local files in each hub dataset's own schema, for the loader and registry tests (no network)."""

from __future__ import annotations

import json
from pathlib import Path

# a hub commit, as a fake hub names it in its data file URLs
HUB_SHA = "0123456789abcdef0123456789abcdef01234567"

WIKI_TRAIN = [
    "",
    " = Alpha River = \n",
    "",
    " The Alpha River runs north . \n",
    " = = Course = = \n",
    " It passes a stone bridge . \n",
    "",
    " = Beta Stone = \n",
    "",
    " Beta is a stone . \n",
]
WIKI_VAL = ["", " = Gamma Light = \n", " Gamma shines . \n", "   \n"]
WIKI_TEST = [" = Delta = \n", " Delta waits . \n"]

GUTENBERG_HEADER = (
    "The Project Gutenberg eBook of The Lantern at Millbrook\n\n"
    "This header is invented for the niels_gpt tests: it stands where a distributed e-text\n"
    "carries its notice of terms, and none of it belongs to the book.\n\n"
    "Title: The Lantern at Millbrook\n\nAuthor: Orla Fenwick\n\n"
    "Release date: March 3, 2004 [eBook #11111]\n\nLanguage: English\n\n"
)
GUTENBERG_FOOTER = (
    "\n\nLater printings of this sample supersede this one. (Invented footer text.)\n\n"
    "*** START: FULL LICENSE ***\n\nSection 1. Terms invented for the tests, many lines long.\n" * 3
)


def raw_gutenberg_book(body: str, start: str, end: str) -> str:
    """The raw layout: BOM, CRLF line ends, header, start marker, the book, end marker, footer."""
    text = f"\ufeff{GUTENBERG_HEADER}{start}\n\n\n\n{body}\n\n\n\n\n{end}{GUTENBERG_FOOTER}"
    return text.replace("\n", "\r\n")


DOLLY_ROWS = [
    {"instruction": "Name a river.", "context": "", "response": "The Nile.", "category": "open_qa"},
    {"instruction": "Summarize.", "context": "A long text.", "response": "Short.", "category": "summarization"},
    {"instruction": "Say hi.", "context": "   ", "response": "Hi!", "category": "brainstorming"},
    {"instruction": "Add.", "context": "2 and 2", "response": "4", "category": "closed_qa"},
]


def write_parquet(path: Path, columns: dict) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(columns), path)
    return path


def write_jsonl(path: Path, rows: list) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def oasst_record(mid, parent, role, tree="t", lang="en", deleted=False, text=None) -> dict:
    """One oasst1 message row (the columns the reconstruction reads)."""
    return {
        "message_id": mid,
        "parent_id": parent,
        "message_tree_id": tree,
        "role": role,
        "text": text if text is not None else f"{role} {mid}",
        "lang": lang,
        "deleted": deleted,
    }


# root prompter -> assistant -> prompter -> assistant, in two branches, and a second assistant reply
OASST_BRANCHING = [
    oasst_record("r", None, "prompter"),
    oasst_record("a1", "r", "assistant"),
    oasst_record("p2", "a1", "prompter"),
    oasst_record("a3", "p2", "assistant"),
    oasst_record("p3", "a1", "prompter"),
    oasst_record("a4", "p3", "assistant"),
    oasst_record("a2", "r", "assistant"),
]


def oasst_rows(n_trees: int = 3, prefix: str = "t") -> list[dict]:
    """Small trees: root prompter -> 2 assistants -> a prompter -> an assistant under the first one."""
    rows = []
    for t in range(n_trees):
        tree = f"{prefix}{t}"
        spec = [  # (id, parent, role)
            (f"{tree}", None, "prompter"),
            (f"{tree}-a1", f"{tree}", "assistant"),
            (f"{tree}-a2", f"{tree}", "assistant"),
            (f"{tree}-p2", f"{tree}-a1", "prompter"),
            (f"{tree}-a3", f"{tree}-p2", "assistant"),
        ]
        rows += [oasst_record(mid, parent, role, tree=tree, text=f"{role} says {mid}") for mid, parent, role in spec]
    return rows


def rows_to_columns(rows: list[dict]) -> dict:
    return {k: [r[k] for r in rows] for k in rows[0]}


def write_demo_tree(root: Path) -> dict:
    """Every source's sample files under `root`; returns the config overrides that point at them."""
    fw = write_parquet(
        root / "fineweb_edu" / "part-0.parquet",
        {
            "text": [f"Fineweb document {i}.\nIt has two lines." for i in range(30)],
            "id": [f"<urn:{i}>" for i in range(30)],
            "url": [f"http://x/{i}" for i in range(30)],
            "dump": ["CC-MAIN-2024-10"] * 30,
        },
    )
    write_parquet(
        root / "fineweb_edu" / "part-1.parquet",
        {
            "text": [f"Second file doc {i}." for i in range(10)],
            "id": [f"<urn:b{i}>" for i in range(10)],
            "url": ["http://y"] * 10,
            "dump": ["CC-MAIN-2024-10"] * 10,
        },
    )
    write_parquet(
        root / "gutenberg" / "books.parquet",
        {"text": [f"Book {i} text." for i in range(8)], "id": [str(i) for i in range(8)]},
    )
    for split, rows in (("train", WIKI_TRAIN), ("validation", WIKI_VAL), ("test", WIKI_TEST)):
        write_parquet(root / "wikitext" / f"{split}.parquet", {"text": rows})
    write_jsonl(root / "dolly15k" / "databricks-dolly-15k.jsonl", DOLLY_ROWS)
    write_parquet(root / "oasst1" / "train.parquet", rows_to_columns(oasst_rows(4)))
    write_parquet(root / "oasst1" / "validation.parquet", rows_to_columns(oasst_rows(1, prefix="v")))
    notes = root / "roam"
    for i in range(12):
        sub = notes / ("daily" if i % 2 else "") / f"note{i:02d}.md"
        sub.parent.mkdir(parents=True, exist_ok=True)
        sub.write_text(f"# Note {i}\n\n- item\n  - nested\t{i}\n", encoding="utf-8")
    (notes / ".obsidian").mkdir(exist_ok=True)
    (notes / ".obsidian" / "hidden.md").write_text("hidden", encoding="utf-8")
    primer = write_jsonl(
        root / "primer.jsonl",
        [
            {"messages": [{"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": f"a{i}"}]}
            for i in range(10)
        ],
    )
    primer_txt = root / "primer.txt"
    primer_txt.write_text(
        "\n\n<dialogue>\n\n".join(f"user: hi {i}\nassistant: hello {i}" for i in range(10)), encoding="utf-8"
    )
    return {
        "demo": True,
        "sources": {
            "fineweb_edu": {"demo_data_files": {"train": str(fw.parent / "*.parquet")}, "shuffle_buffer": 5},
            "gutenberg": {"demo_data_files": {"train": str(root / "gutenberg" / "*.parquet")}},
            "wikitext": {
                "demo_data_files": {s: str(root / "wikitext" / f"{s}.parquet") for s in ("train", "validation", "test")}
            },
            "dolly15k": {"demo_data_files": {"train": str(root / "dolly15k" / "databricks-dolly-15k.jsonl")}},
            "oasst1": {"demo_data_files": {s: str(root / "oasst1" / f"{s}.parquet") for s in ("train", "validation")}},
            "roam": {"demo_root": str(notes)},
            "primer": {"jsonl": str(primer), "text": str(primer_txt)},
        },
    }
