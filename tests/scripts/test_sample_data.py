"""scripts.sample_data: the offline sample files, their hub schemas and structure; they regenerate exactly."""

from __future__ import annotations

import json
import re
import unicodedata
from collections import Counter, defaultdict
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from scripts.sample_data import sources
from scripts.sample_data.__main__ import main

ROOT = Path(__file__).resolve().parents[2]

SAMPLE = ROOT / "data" / "sample"

STR, F64, I64, I32, BOOL = pa.string(), pa.float64(), pa.int64(), pa.int32(), pa.bool_()
EXPECTED_PARQUET = {  # written out independently of the generator's own schema constants
    "fineweb_edu/train-00000-of-00002.parquet": "fineweb without date",
    "fineweb_edu/train-00001-of-00002.parquet": "fineweb",
    "wikitext/train.parquet": "wikitext",
    "wikitext/validation.parquet": "wikitext",
    "wikitext/test.parquet": "wikitext",
    "gutenberg/train-00000-of-00001.parquet": "gutenberg",
    "gutenberg_raw/en-00000-of-00001.parquet": "project_gutenberg",
    "oasst1/train-00000-of-00002.parquet": "oasst1 flat export",
    "oasst1/train-00001-of-00002.parquet": "oasst1",
    "oasst1/validation.parquet": "oasst1",
}
SCHEMAS = {
    "fineweb": [
        ("text", STR),
        ("id", STR),
        ("dump", STR),
        ("url", STR),
        ("date", STR),
        ("file_path", STR),
        ("language", STR),
        ("language_score", F64),
        ("token_count", I64),
        ("score", F64),
        ("int_score", I64),
    ],
    "wikitext": [("text", STR)],
    "gutenberg": [("text", STR), ("id", STR), ("title", STR)],
    "project_gutenberg": [("id", STR), ("text", STR)],
    "oasst1": [
        ("message_id", STR),
        ("parent_id", STR),
        ("user_id", STR),
        ("created_date", STR),
        ("text", STR),
        ("role", STR),
        ("lang", STR),
        ("review_count", I32),
        ("review_result", BOOL),
        ("deleted", BOOL),
        ("rank", I32),
        ("synthetic", BOOL),
        ("model_name", STR),
        (
            "detoxify",
            pa.struct(
                [
                    (k, F64)
                    for k in [
                        "toxicity",
                        "severe_toxicity",
                        "obscene",
                        "identity_attack",
                        "insult",
                        "threat",
                        "sexual_explicit",
                    ]
                ]
            ),
        ),
        ("message_tree_id", STR),
        ("tree_state", STR),
        ("emojis", pa.struct([("name", pa.list_(STR)), ("count", pa.list_(I32))])),
        ("labels", pa.struct([("name", pa.list_(STR)), ("value", pa.list_(F64)), ("count", pa.list_(I32))])),
    ],
}
SCHEMAS["fineweb without date"] = [f for f in SCHEMAS["fineweb"] if f[0] != "date"]
SCHEMAS["oasst1 flat export"] = [
    (name, pa.null() if name in ("detoxify", "emojis", "labels") else t) for name, t in SCHEMAS["oasst1"]
]
DOLLY_CATEGORIES = {
    "open_qa",
    "general_qa",
    "classification",
    "closed_qa",
    "brainstorming",
    "information_extraction",
    "summarization",
    "creative_writing",
}


def _rows(rel: str) -> list[dict]:
    return pq.read_table(SAMPLE / rel).to_pylist()


@pytest.mark.parametrize("rel", sorted(EXPECTED_PARQUET))
def test_parquet_files_have_the_hub_schema(rel):
    schema = pq.read_schema(SAMPLE / rel)
    got = [(f.name, f.type) for f in schema]
    assert got == SCHEMAS[EXPECTED_PARQUET[rel]], f"{rel}: {got}"
    assert pq.ParquetFile(SAMPLE / rel).metadata.num_rows > 0


def test_loads_through_datasets_like_the_hub(isolated_hf_cache):
    from datasets import load_dataset

    from niels_gpt.data.hub import HubRead, open_dataset

    files = {"train": str(SAMPLE / "fineweb_edu" / "*.parquet")}
    ds = open_dataset(HubRead("HuggingFaceFW/fineweb-edu", streaming=True, data_files=files))
    first = next(iter(ds))
    assert list(first) == [name for name, _ in SCHEMAS["fineweb without date"]] + ["date"]
    assert first["dump"] == "CC-MAIN-2024-10" and re.fullmatch(r"<urn:uuid:[0-9a-f-]{36}>", first["id"])
    dolly = load_dataset("json", data_files=str(SAMPLE / "dolly15k" / "databricks-dolly-15k.jsonl"), split="train")
    assert dolly.column_names == ["instruction", "context", "response", "category"]


def test_dolly_categories_and_contexts():
    lines = (SAMPLE / "dolly15k" / "databricks-dolly-15k.jsonl").read_text(encoding="utf-8").splitlines()
    rows = [json.loads(line) for line in lines]
    assert all(list(r) == ["instruction", "context", "response", "category"] for r in rows)
    assert {r["category"] for r in rows} == DOLLY_CATEGORIES
    for r in rows:
        has_context = r["category"] in {"closed_qa", "information_extraction", "summarization"}
        assert bool(r["context"]) == has_context, r
        assert r["instruction"] and r["response"]


@pytest.mark.parametrize("split", ["train", "validation"])
def test_oasst1_trees_are_real_trees(split):
    rows = [r for p in sorted((SAMPLE / "oasst1").glob(f"{split}*.parquet")) for r in _rows(f"oasst1/{p.name}")]
    by_id = {r["message_id"]: r for r in rows}
    assert len(by_id) == len(rows)
    children = defaultdict(list)
    seen, child_before_parent = set(), 0
    for r in rows:
        if r["parent_id"] is None:
            assert r["role"] == "prompter" and r["message_tree_id"] == r["message_id"]
        else:
            parent = by_id[r["parent_id"]]  # resolves within the split
            assert parent["message_tree_id"] == r["message_tree_id"]
            assert {parent["role"], r["role"]} == {"prompter", "assistant"}
            children[r["parent_id"]].append(r)
            child_before_parent += r["parent_id"] not in seen
        seen.add(r["message_id"])
    assert child_before_parent > 0, "rows must not be in parent-before-child order everywhere"
    assert any(len(c) >= 2 for c in children.values()), "no branching"
    assert any(r["deleted"] for r in rows)
    assert len({r["lang"] for r in rows}) >= 3

    def depth(mid):
        return 1 + max((depth(c["message_id"]) for c in children[mid]), default=0)

    roots = [r["message_id"] for r in rows if r["parent_id"] is None]
    assert max(depth(m) for m in roots) >= 10
    if split == "train":
        assert len(roots) >= 200


def test_wikitext_rows_look_like_wikitext_raw():
    texts = [r["text"] for r in _rows("wikitext/train.parquet")]
    assert "" in texts
    heads = [t for t in texts if re.fullmatch(r" (= )+[^=\n]+ (= )*=? ?\n", t) or t.startswith(" = ")]
    assert any(re.fullmatch(r" = [^=]+ = \n", t) for t in heads)
    assert any(re.fullmatch(r" = = [^=]+ = = \n", t) for t in heads)
    assert any(re.fullmatch(r" = = = [^=]+ = = = \n", t) for t in heads)
    paras = [t for t in texts if t and not t.startswith(" = ")]
    assert all(t.startswith(" ") and t.endswith(" \n") for t in paras)
    assert any(" @-@ " in t for t in paras) and any(" @,@ " in t for t in paras)


def test_primer_jsonl_follows_the_primer_rules():
    lines = (ROOT / "data" / "primer.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) >= 150
    longest = 0
    for n, line in enumerate(lines, 1):
        ex = json.loads(line)
        assert list(ex) == ["messages"] and ex["messages"], n
        for m in ex["messages"]:
            assert list(m) == ["role", "content"] and m["role"] in {"system", "user", "assistant"}, n
            assert isinstance(m["content"], str)
        assert any(m["role"] == "assistant" for m in ex["messages"]), n
        assert all(m["role"] != "system" for m in ex["messages"][1:]), n
        longest = max(longest, sum(len(m["content"]) for m in ex["messages"]))
    assert longest > 6_000


def test_primer_txt_has_dialogues():
    text = (ROOT / "data" / "primer.txt").read_text(encoding="utf-8")
    dialogues = text.split("\n\n<dialogue>\n\n")
    assert len(dialogues) >= 20
    assert all(d.startswith("user: ") and "\nassistant: " in d for d in dialogues)


def test_roam_notes_are_linked_markdown():
    notes = sorted((SAMPLE / "roam").rglob("*.md"))
    assert len(notes) >= 50 and any(p.parent.name == "daily" for p in notes)
    text = {p.relative_to(SAMPLE / "roam").with_suffix("").as_posix(): p.read_text(encoding="utf-8") for p in notes}
    links = Counter(m for t in text.values() for m in re.findall(r"\[\[([^\]]+)\]\]", t) if m != "TODO")
    assert links and all(name in text for name in links)
    body = "".join(text.values())
    assert "\t- " in body and "\n    - " in body and "```python" in body and "#" in body


def test_regenerating_gives_the_committed_files(tmp_path):
    main(["--out-root", str(tmp_path)])
    generated = sorted(p.relative_to(tmp_path).as_posix() for p in (tmp_path / "data").rglob("*") if p.is_file())
    committed = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "data").rglob("*") if p.is_file())
    assert generated == committed, "data/ holds files the generator does not write, or misses some"
    for rel in generated:
        assert (tmp_path / rel).read_bytes() == (ROOT / rel).read_bytes(), (
            f"{rel} is stale: rerun python -m scripts.sample_data"
        )


def test_raw_gutenberg_books_have_the_raw_layout():
    from niels_gpt.data.gutenberg import book_span

    for row in _rows("gutenberg_raw/en-00000-of-00001.parquet"):
        text = row["text"]
        assert (
            text.startswith("\ufeffThe Project Gutenberg eBook of ")
            and "\r\n" in text
            and "\n" not in text.replace("\r\n", "")
        )
        start, stop = book_span(text.replace("\r\n", "\n"))
        assert 400 < start and stop < len(text) - 2_000  # a header and a long footer around the book


def test_roam_export_pages_come_in_both_shapes_with_awkward_names():
    root = SAMPLE / "roam"
    names = {p.relative_to(root).as_posix() for p in root.rglob("*.md")}
    assert {" Leading space.md", "Projects/Harbour Survey/Budget.md", "March 1st, 2024.md"} <= names
    assert any(unicodedata.normalize("NFC", n) != n for n in names)  # a decomposed (macOS) name
    raw = {n: (root / n).read_bytes() for n in names}
    assert any(b.startswith("\ufeff".encode()) for b in raw.values()) and any(b"\r\n" in b for b in raw.values())
    assert any(not b.decode("utf-8-sig").strip() for b in raw.values())  # empty and whitespace-only pages
    texts = [b.decode("utf-8-sig") for b in raw.values()]
    assert any(t.startswith("# ") and "\n- " not in t for t in texts)  # flat
    assert any(re.search(r"\(\([\w-]{9}\)\)", t) and "#[[" in t for t in texts)  # bulleted, block refs, tags


def test_row_builders_are_deterministic_and_seeded():
    small = {"train": 5, "validation": 2, "test": 2}
    assert sources.build_wikitext(3, small) == sources.build_wikitext(3, small)
    assert sources.build_wikitext(3, small) != sources.build_wikitext(4, small)
    assert sources.build_fineweb_edu(3, 20) == sources.build_fineweb_edu(3, 20)
