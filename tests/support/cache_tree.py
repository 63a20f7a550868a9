"""Small cache trees laid out like `cache/`, built with the real writers, for the inspection and report tests.

`build_tree`: cache/{tokenizer, pretrain/x (3+ shards, budget-cut), pretrain/off (not built), sft/y,
streams/wiki_{train,val}}, for verify/info/inspect.

`build_special_tree`: sft/primer and sft/dolly15k whose chats open with the same short turns (each
shorter than a 13-gram) and go on with text of their own, so their train and val splits share text
only across the special tokens between the turns.

`build_report_tree`: under the registry's source names, for the report and the leakage audit:
cache/{tokenizer, pretrain/{wikitext, roam} (the other pretrain sources: not built), sft/primer (long
examples: some cut), streams/{wiki, roam}_{train,val}}. With `plant=True` wikitext val document
PLANTED_DOC is copied into roam's train documents and wiki val segment PLANTED_SEGMENT into the roam
train stream: the duplicates the leakage audit must find.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from niels_gpt.config import schema_defaults
from niels_gpt.layout import pretrain_dir, sft_dir, streams_dir, tokenizer_dir
from niels_gpt.pretrain.writer import build_pretrain_cache, build_pretrain_cache_presplit, write_not_built_meta
from niels_gpt.sft.writer import build_sft_cache
from niels_gpt.streams import write_stream
from niels_gpt.tokenizer.job import build_tokenizer
from tests.support.chats import random_chats
from tests.support.corpus import tiny_corpus

KNOWN_CHAT = [
    {"role": "system", "content": "be brief"},
    {"role": "user", "content": "hello there"},
    {"role": "assistant", "content": "general kenobi"},
    {"role": "user", "content": "and then?"},
    {"role": "assistant", "content": "the river\nopens"},
]
STREAM_TEXT = "Ünïcødé stream text ✓\n\n" + "\n\n".join(tiny_corpus(20, seed=7))
PRETRAIN_DOCS = tiny_corpus(60, seed=3)

WIKI_TRAIN, WIKI_VAL = tiny_corpus(40, seed=11), tiny_corpus(8, seed=12)
ROAM_TRAIN, ROAM_VAL = tiny_corpus(30, seed=13), tiny_corpus(5, seed=14)
PLANTED_DOC = 3  # the wikitext val document copied into roam train
STREAM_SEP = "\n\n"
WIKI_SEGMENTS = {"train": tiny_corpus(30, seed=21), "val": tiny_corpus(6, seed=22)}
ROAM_SEGMENTS = {"train": tiny_corpus(20, seed=23), "val": tiny_corpus(4, seed=24)}
PLANTED_SEGMENT = 2  # the wiki val segment copied into the roam train stream
T_MAX = 48  # short, so that some primer examples are cut
SHARED_TURNS = [("user", "the river"), ("assistant", "stone light"), ("user", "garden window"), ("system", "paper")]


def install_tokenizer(root: Path, model_path: str) -> dict:
    """{root}/tokenizer/: `model_path` adopted by the tokenizer job (tokenizer.model_path); returns its meta."""
    cfg = schema_defaults()
    cfg["tokenizer"]["model_path"] = str(model_path)
    return build_tokenizer(cfg, tokenizer_dir(root))


def _not_built(root: Path, source: str, shard_bytes: int) -> None:
    write_not_built_meta(
        pretrain_dir(root, source),
        reason=f"sources.{source}.enabled is false",
        dataset_name=source,
        dataset_config=None,
        seed=0,
        shard_bytes=shard_bytes,
    )


def _streams(root: Path, texts: dict[str, dict[str, str]], sep: str | None = None) -> None:
    """{source: {split: text}} written as streams (with the separator their segments are cut at)."""
    for source, splits in texts.items():
        for split, text in splits.items():
            inputs = {"source": source, "split": split, **({"sep": sep} if sep else {})}
            write_stream(streams_dir(root), source, split, text.encode("utf-8"), inputs)


def build_tree(tmp_path: Path, tokenizer, model_path: str) -> Path:
    """The tree of verify/info/inspect (see the module docstring)."""
    root = tmp_path / "cache"
    install_tokenizer(root, model_path)
    loader_counts = {"boilerplate_books_stripped": 2, "boilerplate_chars_removed": 345}  # as gutenberg records them
    build_pretrain_cache(
        iter(["  \n", *PRETRAIN_DOCS[:5], "", *PRETRAIN_DOCS[5:]]),  # two blank documents, skipped
        pretrain_dir(root, "x"),
        provenance={"source": "x", "stream": {"cleaning": loader_counts}},
        tokenizer=tokenizer,
        max_train_tokens=2500,
        max_val_tokens=None,
        shard_bytes=2000,
        seed=0,
        shuffle_buffer=None,
        val_doc_prob=0.2,
        num_threads=1,
    )
    _not_built(root, "off", shard_bytes=2000)
    long_prompt = [{"role": "user", "content": "the river " * 100}, {"role": "assistant", "content": "yes"}]
    chats = [KNOWN_CHAT] + random_chats(30, seed=5) + [long_prompt] * 4  # head truncation at 64 drops these
    build_sft_cache(chats, sft_dir(root, "y"), tokenizer=tokenizer, val_frac=0.2, seed=0, t_max=64, source="y")
    half = len(STREAM_TEXT) // 2
    _streams(root, {"wiki": {"train": STREAM_TEXT[:half], "val": STREAM_TEXT[half:]}})
    return root


def build_special_tree(tmp_path: Path, tokenizer, model_path: str) -> Path:
    """The tree whose splits share text only across special tokens (see the module docstring)."""
    root = tmp_path / "cache"
    install_tokenizer(root, model_path)
    for source, seed, val_frac in (("primer", 31, 0.5), ("dolly15k", 32, 0.0)):
        own = tiny_corpus(12, seed=seed)
        chats = [
            [{"role": r, "content": c} for r, c in SHARED_TURNS] + [{"role": "assistant", "content": t}] for t in own
        ]
        build_sft_cache(chats, sft_dir(root, source), tokenizer=tokenizer, val_frac=val_frac, seed=0, t_max=512)
    return root


def build_report_tree(tmp_path: Path, tokenizer, model_path: str, *, plant: bool) -> Path:
    """The tree of the report tests (see the module docstring)."""
    root = tmp_path / "cache"
    install_tokenizer(root, model_path)
    roam_train = ROAM_TRAIN + ([WIKI_VAL[PLANTED_DOC]] if plant else [])
    for source, train, val in (("wikitext", WIKI_TRAIN, WIKI_VAL), ("roam", roam_train, ROAM_VAL)):
        build_pretrain_cache_presplit(
            train,
            val,
            pretrain_dir(root, source),
            tokenizer=tokenizer,
            max_train_tokens=None,
            max_val_tokens=None,
            shard_bytes=3000,  # several shards: n-grams must cross shard boundaries
            seed=0,
            dataset_name=source,
            num_threads=1,
        )
    for source in ("fineweb_edu", "gutenberg"):
        _not_built(root, source, shard_bytes=3000)
    chats = random_chats(40, seed=5, max_words=20)
    build_sft_cache(
        chats, sft_dir(root, "primer"), tokenizer=tokenizer, val_frac=0.25, seed=0, t_max=T_MAX, source="primer"
    )
    roam_segments = dict(ROAM_SEGMENTS)
    if plant:
        roam_segments["train"] = roam_segments["train"] + [WIKI_SEGMENTS["val"][PLANTED_SEGMENT]]
    segments = {"wiki": WIKI_SEGMENTS, "roam": roam_segments}
    _streams(root, {s: {k: STREAM_SEP.join(v) for k, v in by.items()} for s, by in segments.items()}, STREAM_SEP)
    return root


def meta_of(folder: Path) -> dict:
    """The meta.json of an artifact folder, read as plain JSON."""
    return json.loads((folder / "meta.json").read_text())


def edit_meta(path: Path, **changes) -> dict:
    """Set (or, with value None, remove) top-level fields of a meta.json; returns the original."""
    meta = json.loads(path.read_text())
    edited = {**meta, **changes}
    path.write_text(json.dumps({k: v for k, v in edited.items() if k not in changes or v is not None}))
    return meta


def edit_tokens(path: Path, fn) -> None:
    """Apply `fn` to a token file's ids in place (to damage a cache)."""
    tokens = np.fromfile(path, dtype="<u2")
    fn(tokens)
    tokens.tofile(path)
