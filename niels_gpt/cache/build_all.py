"""`build-all`: every enabled cache, in-process, for users without Snakemake.

    python -m niels_gpt.cache.cli build-all --cache-dir cache --seed 42 [--demo]

Order: tokenizer (kept if `{cache-dir}/tokenizer/spm.model` exists, unless --retrain-tokenizer),
pretrain caches (disabled sources get a "not built" meta), SFT caches, byte streams. The same
functions the Snakemake rules call; Snakemake adds incremental rebuilds and parallel jobs. Milestones
go to stderr (niels_gpt.log).
"""

from __future__ import annotations

import os
import time

from niels_gpt import layout
from niels_gpt.command_line import add_config_args, resolve_config
from niels_gpt.data.registry import PRETRAIN_SOURCES, SFT_SOURCES
from niels_gpt.log import log


def register(sub) -> None:
    p = sub.add_parser(
        "build-all",
        help="build the tokenizer and every pretrain, SFT and stream cache in one process",
        description=__doc__,
    )
    p.add_argument("--cache-dir", default=None, help="output root [cache_dir; default: cache]")
    p.add_argument("--seed", type=int, default=None, help="the one seed of every split and shuffle [seed; default: 42]")
    p.add_argument("--retrain-tokenizer", action="store_true", help="train the tokenizer even if one exists")
    add_config_args(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from niels_gpt.pretrain.job import build_pretrain_source
    from niels_gpt.sft.job import build_sft_source, format_summary
    from niels_gpt.streams.job import build_stream_from_config
    from niels_gpt.tokenizer.job import build_tokenizer

    cfg = resolve_config(args, {"cache_dir": args.cache_dir, "seed": args.seed})
    root = cfg["cache_dir"]
    started = time.time()
    model = layout.tokenizer_model(root)
    if args.retrain_tokenizer or not os.path.exists(model):
        build_tokenizer(cfg, layout.tokenizer_dir(root))
    else:
        log(f"tokenizer: keeping {model} (--retrain-tokenizer to train again)")
    for source in PRETRAIN_SOURCES:
        log(f"== pretrain/{source}")
        build_pretrain_source(cfg, source, tokenizer_path=model, out_dir=layout.pretrain_dir(root, source))
    for source in SFT_SOURCES:
        log(f"== sft/{source}")
        out_dir = layout.sft_dir(root, source)
        log(format_summary(build_sft_source(cfg, source, tokenizer_path=model, out_dir=out_dir), out_dir))
    for source in cfg["streams"]["enabled_sources"]:
        log(f"== streams/{source}")
        build_stream_from_config(cfg, source, layout.streams_dir(root))
    log(f"build-all: done in {time.time() - started:.1f}s -> {root}/")
    return 0
