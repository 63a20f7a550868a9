"""A small cache tree under the registry's source names, built with the real writers, for the report tests.

    cache/tokenizer, pretrain/{wikitext, roam} (the rest: not built), sft/primer (long examples: some
    cut), streams/{wiki, roam}_{train,val}

With `plant=True` wikitext val document PLANTED_DOC is copied into roam's train documents and wiki val
segment PLANTED_SEGMENT into the roam train stream: the duplicates the leakage audit must find.
"""

from __future__ import annotations

from pathlib import Path

from niels_gpt.layout import pretrain_dir, sft_dir, streams_dir
from niels_gpt.pretrain.writer import build_pretrain_cache_presplit, write_not_built_meta
from niels_gpt.sft.writer import build_sft_cache
from niels_gpt.streams import write_stream
from tests.support.cache_tree import install_tokenizer
from tests.support.chats import random_chats
from tests.support.corpus import tiny_corpus

WIKI_TRAIN, WIKI_VAL = tiny_corpus(40, seed=11), tiny_corpus(8, seed=12)
ROAM_TRAIN, ROAM_VAL = tiny_corpus(30, seed=13), tiny_corpus(5, seed=14)
PLANTED_DOC = 3  # the wikitext val document copied into roam train
STREAM_SEP = "\n\n"
WIKI_SEGMENTS = {"train": tiny_corpus(30, seed=21), "val": tiny_corpus(6, seed=22)}
ROAM_SEGMENTS = {"train": tiny_corpus(20, seed=23), "val": tiny_corpus(4, seed=24)}
PLANTED_SEGMENT = 2  # the wiki val segment copied into the roam train stream
T_MAX = 48  # short, so that some primer examples are cut


def build_report_tree(root: Path, tokenizer, model_path: str, *, plant: bool) -> Path:
    cache = root / "cache"
    install_tokenizer(cache, model_path, tokenizer)
    roam_train = ROAM_TRAIN + ([WIKI_VAL[PLANTED_DOC]] if plant else [])
    for source, train, val in (("wikitext", WIKI_TRAIN, WIKI_VAL), ("roam", roam_train, ROAM_VAL)):
        build_pretrain_cache_presplit(
            train,
            val,
            pretrain_dir(cache, source),
            tokenizer=tokenizer,
            max_train_tokens=None,
            max_val_tokens=None,
            shard_bytes=3000,  # several shards: n-grams must cross shard boundaries
            seed=0,
            dataset_name=source,
            num_threads=1,
        )
    for source in ("fineweb_edu", "gutenberg"):
        write_not_built_meta(
            pretrain_dir(cache, source),
            reason=f"sources.{source}.enabled is false",
            dataset_name=source,
            dataset_config=None,
            seed=0,
            shard_bytes=3000,
        )
    chats = random_chats(40, seed=5, max_words=20)
    build_sft_cache(
        chats, sft_dir(cache, "primer"), tokenizer=tokenizer, val_frac=0.25, seed=0, t_max=T_MAX, source="primer"
    )
    roam_segments = dict(ROAM_SEGMENTS)
    if plant:
        roam_segments["train"] = roam_segments["train"] + [WIKI_SEGMENTS["val"][PLANTED_SEGMENT]]
    for source, segments in (("wiki", WIKI_SEGMENTS), ("roam", roam_segments)):
        for split, texts in segments.items():
            meta = {"source": source, "split": split, "sep": STREAM_SEP}
            write_stream(streams_dir(cache), source, split, STREAM_SEP.join(texts).encode("utf-8"), meta)
    return cache
