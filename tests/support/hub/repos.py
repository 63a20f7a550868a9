"""The hub repositories the config can name, written under a root in their real layouts and cards.

`write_hub_repos(root, sizes)` writes every repository as `root/<namespace>/<name>/` (what HubServer
serves), each with its README.md front matter as the real card has it (a `configs` block mapping
splits to `data_files` globs, and `dataset_info` with features and split sizes where the real card
has one) and its data files filled with generated rows (rows.py) in the real columns:

  HuggingFaceFW/fineweb-edu            data/CC-MAIN-2024-10/train-000NN-of-000MM.parquet (and one file of
                                       CC-MAIN-2024-18); configs default (data/*/*) and one per dump
  Salesforce/wikitext                  <config>/{train,validation,test}-000NN-of-000MM.parquet for the four
                                       configs (wikitext-103-raw-v1's train in two files); dataset_info
  databricks/databricks-dolly-15k      one root databricks-dolly-15k.jsonl; no configs block
  OpenAssistant/oasst1                 data/{train,validation}-00000-of-00001-<hash>.parquet, the nested
                                       columns (detoxify, emojis, labels); dataset_info, no configs block
  manu/project_gutenberg               data/{lang}-000NN-of-000MM-<hash>.parquet, splits are language
                                       codes (en in several files, de, fr); columns id, text; dataset_info
  nikolina-p/gutenberg_clean_en_splits data/{train,validation,test}/ folders (splits by folder name);
                                       columns text, id, title

It returns what it wrote: {repo id: {config: {split: [files]}}}. `HubSizes` sets the files per
split and the rows per file; its defaults make a small test hub.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from niels_gpt.atomic import atomic_open, atomic_write_text
from niels_gpt.data.dolly import DATASET_ID as DOLLY
from niels_gpt.data.fineweb_edu import DATASET_ID as FINEWEB
from niels_gpt.data.gutenberg import DATASET_ID as GUTENBERG
from niels_gpt.data.oasst1 import DATASET_ID as OASST1
from niels_gpt.data.wikitext import CONFIG as WIKITEXT_103
from niels_gpt.data.wikitext import DATASET_ID as WIKITEXT
from scripts.sample_data.sources import (
    FINEWEB_SCHEMA,
    GUTENBERG_RAW_SCHEMA,
    GUTENBERG_SCHEMA,
    OASST1_SCHEMA,
    ROW_GROUP_ROWS,
    WIKITEXT_SCHEMA,
)
from tests.support.hub import rows

GUTENBERG_RAW = "manu/project_gutenberg"
REPOS = (FINEWEB, WIKITEXT, DOLLY, OASST1, GUTENBERG_RAW, GUTENBERG)
FINEWEB_DUMPS = ("CC-MAIN-2024-10", "CC-MAIN-2024-18")  # the first is the config's; the second makes default differ
WIKITEXT_CONFIGS = (WIKITEXT_103, "wikitext-103-v1", "wikitext-2-raw-v1", "wikitext-2-v1")
RAW_LANGUAGES = ("en", "de", "fr")  # manu/project_gutenberg's splits written here (the real one has more)
YAML_DTYPES = {pa.string(): "string", pa.int32(): "int32", pa.int64(): "int64", pa.float64(): "float64"}
YAML_DTYPES[pa.bool_()] = "bool"

Layout = dict[str, dict[str, list[str]]]  # config -> split -> files


@dataclass(frozen=True)
class HubSizes:
    """How much each repository holds. The defaults: a test hub of under 1 MB, written in a second or two."""

    fineweb_files: int = 3  # files of the CC-MAIN-2024-10 dump (CC-MAIN-2024-18 gets one)
    fineweb_rows: int = 30  # rows per fineweb-edu file
    wikitext_articles: int = 10  # articles per wikitext-103-raw-v1 train file (two files)
    wikitext_eval_articles: int = 3  # articles per file of every other split and config
    dolly_rows: int = 40
    oasst1_trees: int = 12  # train trees; validation gets a tenth (at least 2)
    gutenberg_files: int = 2  # files of the en split (raw) and of the train split (cleaned)
    gutenberg_books: int = 2  # books per file (one per file of the other splits)
    book_chars: int = 6_000
    seed: int = 0
    distinct_text: bool = False  # fineweb-edu and wikitext rows past the generators' pools: rows.varied


def write_hub_repos(root: str | Path, sizes: HubSizes = HubSizes()) -> dict[str, Layout]:
    """Write every repository of REPOS under `root`; returns {repo id: {config: {split: [files]}}}."""
    root = Path(root)
    writers = {
        FINEWEB: _fineweb,
        WIKITEXT: _wikitext,
        DOLLY: _dolly,
        OASST1: _oasst1,
        GUTENBERG_RAW: _gutenberg_raw,
        GUTENBERG: _gutenberg_clean,
    }
    return {repo_id: writers[repo_id](root / repo_id, sizes) for repo_id in REPOS}


# ---------------------------------------------------------------------- files and cards


def write_parquet(path: Path, records: Iterable[dict], schema: pa.Schema) -> tuple[int, int]:
    """Write `records` in row groups of ROW_GROUP_ROWS; returns (rows, Arrow bytes)."""
    n = nbytes = 0
    with atomic_open(path, "wb") as f, pq.ParquetWriter(f, schema, compression="snappy") as out:
        it = iter(records)
        while batch := list(itertools.islice(it, ROW_GROUP_ROWS)):
            table = pa.Table.from_pylist(batch, schema=schema)
            out.write_table(table)
            n, nbytes = n + table.num_rows, nbytes + table.nbytes
    return n, nbytes


def write_card(folder: Path, front: dict, title: str) -> None:
    body = f"# {title}\n\nGenerated rows in this dataset's layout and columns, for the niels_gpt tests.\n"
    atomic_write_text(folder / "README.md", f"---\n{yaml.safe_dump(front, sort_keys=False)}---\n\n{body}")


def yaml_features(schema: pa.Schema) -> list[dict]:
    """A card's `features`: plain columns by dtype, a struct of lists as `sequence` (as the hub's
    cards write a sequence of dicts), another struct as `struct`."""
    out = []
    for field in schema:
        t = field.type
        if pa.types.is_struct(t) and all(pa.types.is_list(c.type) for c in t):
            out.append(
                {"name": field.name, "sequence": [{"name": c.name, "dtype": YAML_DTYPES[c.type.value_type]} for c in t]}
            )
        elif pa.types.is_struct(t):
            out.append({"name": field.name, "struct": [{"name": c.name, "dtype": YAML_DTYPES[c.type]} for c in t]})
        else:
            out.append({"name": field.name, "dtype": YAML_DTYPES[t]})
    return out


def dataset_info(schema: pa.Schema, splits: dict[str, tuple[int, int]], files: Iterable[Path]) -> dict:
    """A card's `dataset_info`: features, each split's examples and Arrow bytes, sizes."""
    split_rows = [{"name": s, "num_bytes": b, "num_examples": n} for s, (n, b) in splits.items()]
    total = sum(b for _, b in splits.values())
    return {
        "features": yaml_features(schema),
        "splits": split_rows,
        "download_size": sum(p.stat().st_size for p in files),
        "dataset_size": total,
    }


def shard_name(split: str, k: int, n: int, suffix: str = "") -> str:
    return f"{split}-{k:05d}-of-{n:05d}{suffix}.parquet"


def content_hash(*parts: object) -> str:
    """The 16-hex tail some hub exports add to a file name (`-b42a775f407cee45`)."""
    return "-" + hashlib.sha256(":".join(map(str, parts)).encode()).hexdigest()[:16]


def _in_files(records: Iterator[dict], per_file: int, paths: list[Path], schema: pa.Schema) -> tuple[int, int]:
    """Write `per_file` records of `records` to each path in turn; returns (rows, Arrow bytes) in all."""
    sizes = [write_parquet(p, itertools.islice(records, per_file), schema) for p in paths]
    return sum(n for n, _ in sizes), sum(b for _, b in sizes)


def _rel(folder: Path, paths: list[Path]) -> list[str]:
    return [p.relative_to(folder).as_posix() for p in paths]


# ---------------------------------------------------------------------- the repositories


def _fineweb(folder: Path, sizes: HubSizes) -> Layout:
    layout: Layout = {"default": {"train": []}}
    configs = [{"config_name": "default", "data_files": [{"split": "train", "path": "data/*/*"}]}]
    for dump, n_files in zip(FINEWEB_DUMPS, (sizes.fineweb_files, 1)):
        paths = [folder / "data" / dump / shard_name("train", k, n_files) for k in range(n_files)]
        _in_files(
            rows.fineweb_rows(sizes.seed, dump, sizes.fineweb_rows * n_files, sizes.distinct_text),
            sizes.fineweb_rows,
            paths,
            FINEWEB_SCHEMA,
        )
        layout[dump] = {"train": _rel(folder, paths)}
        layout["default"]["train"] += layout[dump]["train"]
        configs.append({"config_name": dump, "data_files": [{"split": "train", "path": f"data/{dump}/*"}]})
    front = {"license": "odc-by", "task_categories": ["text-generation"], "language": ["en"]}
    write_card(folder, {**front, "pretty_name": "FineWeb-Edu", "configs": configs}, "FineWeb-Edu")
    return layout


def _wikitext(folder: Path, sizes: HubSizes) -> Layout:
    layout: Layout = {}
    infos, configs = [], []
    for config in WIKITEXT_CONFIGS:
        shards = {"test": 1, "train": 2 if config.startswith("wikitext-103") else 1, "validation": 1}
        splits, files = {}, []
        for split, n in shards.items():
            per_file = (
                sizes.wikitext_articles if (config, split) == (WIKITEXT_103, "train") else sizes.wikitext_eval_articles
            )
            articles = rows.wikitext_articles(sizes.seed, f"{config}:{split}", per_file * n, sizes.distinct_text)
            paths = [folder / config / shard_name(split, k, n) for k in range(n)]
            written = [
                write_parquet(
                    p, ({"text": t} for a in itertools.islice(articles, per_file) for t in a), WIKITEXT_SCHEMA
                )
                for p in paths
            ]
            splits[split] = (sum(r for r, _ in written), sum(b for _, b in written))
            files += paths
            layout.setdefault(config, {})[split] = _rel(folder, paths)
        infos.append({"config_name": config, **dataset_info(WIKITEXT_SCHEMA, splits, files)})
        data_files = [{"split": s, "path": f"{config}/{s}-*"} for s in shards]
        configs.append({"config_name": config, "data_files": data_files})
    front = {"language": ["en"], "license": ["cc-by-sa-3.0", "gfdl"], "pretty_name": "WikiText"}
    write_card(folder, {**front, "dataset_info": infos, "configs": configs}, "WikiText")
    return layout


def _dolly(folder: Path, sizes: HubSizes) -> Layout:
    import json

    name = "databricks-dolly-15k.jsonl"
    lines = (json.dumps(r, ensure_ascii=False) + "\n" for r in rows.dolly_rows(sizes.seed, sizes.dolly_rows))
    with atomic_open(folder / name, "w") as f:
        f.writelines(lines)
    front = {"license": "cc-by-sa-3.0", "task_categories": ["question-answering", "summarization"]}
    write_card(folder, {**front, "language": ["en"], "size_categories": ["10K<n<100K"]}, "databricks-dolly-15k")
    return {"default": {"train": [name]}}


def _oasst1(folder: Path, sizes: HubSizes) -> Layout:
    trees = {"train": sizes.oasst1_trees, "validation": max(2, sizes.oasst1_trees // 10)}
    splits, paths = {}, []
    for split, n in trees.items():
        path = folder / "data" / shard_name(split, 0, 1, content_hash(sizes.seed, OASST1, split))
        splits[split] = write_parquet(path, rows.oasst1_rows(sizes.seed, split, n), OASST1_SCHEMA)
        paths.append(path)
    front = {"license": "apache-2.0", "dataset_info": dataset_info(OASST1_SCHEMA, splits, paths)}
    front |= {"language": ["en", "es", "ru", "de"], "tags": ["human-feedback"], "size_categories": ["100K<n<1M"]}
    write_card(folder, {**front, "pretty_name": "OpenAssistant Conversations"}, "OpenAssistant Conversations")
    return {"default": {split: _rel(folder, [p]) for split, p in zip(trees, paths)}}


def _gutenberg_raw(folder: Path, sizes: HubSizes) -> Layout:
    splits, files, layout = {}, [], {}
    for lang in RAW_LANGUAGES:
        n = sizes.gutenberg_files if lang == "en" else 1
        per_file = sizes.gutenberg_books if lang == "en" else 1
        paths = [folder / "data" / shard_name(lang, k, n, content_hash(sizes.seed, lang, k)) for k in range(n)]
        books = rows.book_rows(sizes.seed, f"raw:{lang}", per_file * n, sizes.book_chars, raw=True)
        splits[lang] = _in_files(books, per_file, paths, GUTENBERG_RAW_SCHEMA)
        files += paths
        layout[lang] = _rel(folder, paths)
    configs = [{"config_name": "default", "data_files": [{"split": s, "path": f"data/{s}-*"} for s in RAW_LANGUAGES]}]
    front = {"dataset_info": dataset_info(GUTENBERG_RAW_SCHEMA, splits, files), "configs": configs}
    write_card(folder, {**front, "license": "apache-2.0", "pretty_name": "Project Gutenberg"}, "Project Gutenberg")
    return {"default": layout}


def _gutenberg_clean(folder: Path, sizes: HubSizes) -> Layout:
    layout = {}
    for split in ("train", "validation", "test"):
        n = sizes.gutenberg_files if split == "train" else 1
        per_file = sizes.gutenberg_books if split == "train" else 1
        paths = [folder / "data" / split / shard_name(split, k, n) for k in range(n)]
        books = rows.book_rows(sizes.seed, f"clean:{split}", per_file * n, sizes.book_chars, raw=False)
        _in_files(books, per_file, paths, GUTENBERG_SCHEMA)
        layout[split] = _rel(folder, paths)
    front = {"license": "mit", "language": ["en"], "task_categories": ["text-generation"]}
    write_card(folder, {**front, "pretty_name": "Gutenberg clean English splits"}, "Gutenberg clean English")
    return {"default": layout}
