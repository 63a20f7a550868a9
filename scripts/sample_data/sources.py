"""The files of every sample source, in each hub dataset's own schema: row builders and writers.

Outputs (relative to the output root; `demo=true` in config.yaml points the loaders here):
  data/sample/fineweb_edu/train-0000{0,1}-of-00002.parquet   HuggingFaceFW/fineweb-edu columns; the first
                                                              file has no `date` column (older dumps)
  data/sample/wikitext/{train,validation,test}.parquet       Salesforce/wikitext (raw rows, `text`)
  data/sample/gutenberg/train-00000-of-00001.parquet         text, id, title (cleaned books, no markers)
  data/sample/gutenberg_raw/en-00000-of-00001.parquet        id, text: raw books as manu/project_gutenberg
                                                              has them (BOM, CRLF, license header/footer)
  data/sample/dolly15k/databricks-dolly-15k.jsonl            instruction, context, response, category
  data/sample/oasst1/train-0000{0,1}-of-00002.parquet        OpenAssistant/oasst1 flat message rows; the
                                                              first file a flat export whose emojis,
                                                              labels, detoxify are all null (type null)
  data/sample/oasst1/validation.parquet                      the same, nested structs or null per row
  data/sample/roam/**.md                                     Roam-style markdown notes, and pages as
                                                              exports write them (exports.py)
  data/primer.jsonl, data/primer.txt                         chat primer (SFT) and byte-stream primer

Every source gets `random.Random(f"{seed}:{source}")`; rows are written in a fixed order with a
fixed row-group size, so regenerating gives identical bytes. Every file is written atomically.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from niels_gpt.atomic import atomic_open, atomic_write_bytes, atomic_write_text
from scripts.sample_data import documents
from scripts.sample_data.exports import raw_gutenberg_book, roam_export
from scripts.sample_data.instructions import dolly_row, primer_messages
from scripts.sample_data.message_trees import DETOXIFY_KEYS, build_trees
from scripts.sample_data.sentences import Writer

SOURCES = ["fineweb_edu", "wikitext", "gutenberg", "gutenberg_raw", "dolly15k", "oasst1", "roam", "primer"]
ROW_GROUP_ROWS = 1_000  # fixed, so the parquet layout does not depend on pyarrow's defaults
DIALOGUE_DELIMITER = "\n\n<dialogue>\n\n"  # the primer.txt separator (sources.primer.delimiter)

FINEWEB_SCHEMA = pa.schema(
    [
        ("text", pa.string()),
        ("id", pa.string()),
        ("dump", pa.string()),
        ("url", pa.string()),
        ("date", pa.string()),
        ("file_path", pa.string()),
        ("language", pa.string()),
        ("language_score", pa.float64()),
        ("token_count", pa.int64()),
        ("score", pa.float64()),
        ("int_score", pa.int64()),
    ]
)
FINEWEB_NO_DATE_SCHEMA = pa.schema([f for f in FINEWEB_SCHEMA if f.name != "date"])
WIKITEXT_SCHEMA = pa.schema([("text", pa.string())])
GUTENBERG_SCHEMA = pa.schema([("text", pa.string()), ("id", pa.string()), ("title", pa.string())])
GUTENBERG_RAW_SCHEMA = pa.schema([("id", pa.string()), ("text", pa.string())])  # manu/project_gutenberg
OASST1_SCHEMA = pa.schema(
    [  # as the dataset card's dataset_info declares it
        ("message_id", pa.string()),
        ("parent_id", pa.string()),
        ("user_id", pa.string()),
        ("created_date", pa.string()),
        ("text", pa.string()),
        ("role", pa.string()),
        ("lang", pa.string()),
        ("review_count", pa.int32()),
        ("review_result", pa.bool_()),
        ("deleted", pa.bool_()),
        ("rank", pa.int32()),
        ("synthetic", pa.bool_()),
        ("model_name", pa.string()),
        ("detoxify", pa.struct([(k, pa.float64()) for k in DETOXIFY_KEYS])),
        ("message_tree_id", pa.string()),
        ("tree_state", pa.string()),
        ("emojis", pa.struct([("name", pa.list_(pa.string())), ("count", pa.list_(pa.int32()))])),
        (
            "labels",
            pa.struct(
                [("name", pa.list_(pa.string())), ("value", pa.list_(pa.float64())), ("count", pa.list_(pa.int32()))]
            ),
        ),
    ]
)
ANNOTATIONS = ("detoxify", "emojis", "labels")  # nested oasst1 columns; all null in a flat export
OASST1_FLAT_SCHEMA = pa.schema([pa.field(f.name, pa.null()) if f.name in ANNOTATIONS else f for f in OASST1_SCHEMA])
OASST1_FLAT_TREES = 100  # trees of the train split written as a flat export (the first file)
# databricks-dolly-15k's eight categories, given to the rows in turn
DOLLY_CATEGORIES = (
    "open_qa general_qa classification closed_qa brainstorming information_extraction summarization creative_writing"
).split()


def writer_for(source: str, seed: int) -> Writer:
    return Writer(random.Random(f"{seed}:{source}"))


# ---------------------------------------------------------------- row builders, one per source


def build_fineweb_edu(seed: int, n_docs: int = 1_500) -> list[dict]:
    w = writer_for("fineweb_edu", seed)
    return [documents.fineweb_row(w, i) for i in range(n_docs)]


def build_wikitext(seed: int, n_articles: dict | None = None) -> dict[str, list[str]]:
    w = writer_for("wikitext", seed)
    n_articles = n_articles or {"train": 330, "validation": 22, "test": 22}
    return {split: [row for _ in range(n) for row in documents.wiki_article(w)] for split, n in n_articles.items()}


def build_gutenberg(seed: int, n_books: int = 10, chars: int = 100_000) -> list[dict]:
    w = writer_for("gutenberg", seed)
    rows = []
    for _ in range(n_books):
        title, text = documents.book(w, w.rng.randint(chars * 8 // 10, chars * 12 // 10))
        rows.append({"text": text, "id": str(w.rng.randint(10_000, 72_000)), "title": title})
    return rows


def build_gutenberg_raw(seed: int, n_books: int = 4) -> list[dict]:
    w = writer_for("gutenberg_raw", seed)
    return [raw_gutenberg_book(w, i) for i in range(n_books)]


def build_dolly15k(seed: int, n_rows: int = 1_000) -> list[dict]:
    w = writer_for("dolly15k", seed)
    return [dolly_row(w, DOLLY_CATEGORIES[i % len(DOLLY_CATEGORIES)]) for i in range(n_rows)]


def build_oasst1(seed: int, n_trees: dict | None = None) -> dict[str, list[dict]]:
    w = writer_for("oasst1", seed)
    n_trees = n_trees or {"train": 300, "validation": 30}
    return {split: build_trees(w, n) for split, n in n_trees.items()}


def build_roam(seed: int, n_pages: int = 48, n_daily: int = 12) -> dict[str, bytes]:
    w = writer_for("roam", seed)
    titles = documents.roam_titles(w, n_pages)
    days = [f"daily/2024-03-{d:02d}" for d in range(1, n_daily + 1)]
    notes = {f"{t}.md": documents.roam_note(w, t, [x for x in titles if x != t]).encode() for t in titles + days}
    return {**notes, **roam_export(writer_for("roam_export", seed), titles)}


def split_flat_export(rows: list[dict], n_trees: int) -> tuple[list[dict], list[dict]]:
    """(the first n_trees trees with their annotation columns null, the rest); trees' rows are contiguous."""
    tree_ids = list(dict.fromkeys(r["message_tree_id"] for r in rows))
    cut = next((i for i, r in enumerate(rows) if r["message_tree_id"] in tree_ids[n_trees:]), len(rows))
    return [{**r, **dict.fromkeys(ANNOTATIONS)} for r in rows[:cut]], rows[cut:]


def build_primer_jsonl(seed: int, n_examples: int = 200) -> list[dict]:
    w = writer_for("primer_jsonl", seed)
    return [{"messages": primer_messages(w, long=(i % 40 == 7))} for i in range(n_examples)]


def build_primer_txt(seed: int, n_dialogues: int = 200) -> list[str]:
    w = writer_for("primer_txt", seed)
    out = []
    for _ in range(n_dialogues):
        msgs = [m for m in primer_messages(w, long=False) if m["role"] != "system"]
        out.append("\n".join(f"{m['role']}: {m['content']}" for m in msgs))
    return out


# ---------------------------------------------------------------- writers


def write_parquet(rows: list[dict], schema: pa.Schema, path: Path) -> None:
    table = pa.Table.from_pylist(rows, schema=schema)
    with atomic_open(path, "wb") as fh:
        pq.write_table(table, fh, row_group_size=ROW_GROUP_ROWS, compression="snappy")


def write_jsonl(rows: list[dict], path: Path) -> None:
    atomic_write_text(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))


def write_source(name: str, root: Path, seed: int) -> list[Path]:
    """Build one source and write its files under `root`; returns the paths written."""
    sample = root / "data" / "sample"
    written: list[Path] = []

    def pq_out(rows, schema, path):
        write_parquet(rows, schema, path)
        written.append(path)

    if name == "fineweb_edu":
        rows = build_fineweb_edu(seed)
        half = len(rows) // 2
        no_date = [{k: v for k, v in r.items() if k != "date"} for r in rows[:half]]
        pq_out(no_date, FINEWEB_NO_DATE_SCHEMA, sample / "fineweb_edu" / "train-00000-of-00002.parquet")
        pq_out(rows[half:], FINEWEB_SCHEMA, sample / "fineweb_edu" / "train-00001-of-00002.parquet")
    elif name == "wikitext":
        for split, texts in build_wikitext(seed).items():
            pq_out([{"text": t} for t in texts], WIKITEXT_SCHEMA, sample / "wikitext" / f"{split}.parquet")
    elif name == "gutenberg":
        pq_out(build_gutenberg(seed), GUTENBERG_SCHEMA, sample / "gutenberg" / "train-00000-of-00001.parquet")
    elif name == "gutenberg_raw":
        path = sample / "gutenberg_raw" / "en-00000-of-00001.parquet"
        pq_out(build_gutenberg_raw(seed), GUTENBERG_RAW_SCHEMA, path)
    elif name == "dolly15k":
        path = sample / "dolly15k" / "databricks-dolly-15k.jsonl"
        write_jsonl(build_dolly15k(seed), path)
        written.append(path)
    elif name == "oasst1":
        splits = build_oasst1(seed)
        flat, nested = split_flat_export(splits["train"], OASST1_FLAT_TREES)
        pq_out(flat, OASST1_FLAT_SCHEMA, sample / "oasst1" / "train-00000-of-00002.parquet")
        pq_out(nested, OASST1_SCHEMA, sample / "oasst1" / "train-00001-of-00002.parquet")
        pq_out(splits["validation"], OASST1_SCHEMA, sample / "oasst1" / "validation.parquet")
    elif name == "roam":
        for rel, data in build_roam(seed).items():
            atomic_write_bytes(sample / "roam" / rel, data)
            written.append(sample / "roam" / rel)
    elif name == "primer":
        write_jsonl(build_primer_jsonl(seed), root / "data" / "primer.jsonl")
        atomic_write_text(root / "data" / "primer.txt", DIALOGUE_DELIMITER.join(build_primer_txt(seed)) + "\n")
        written += [root / "data" / "primer.jsonl", root / "data" / "primer.txt"]
    else:
        raise ValueError(f"unknown sample source {name!r}; choose from {', '.join(SOURCES)}")
    return written
