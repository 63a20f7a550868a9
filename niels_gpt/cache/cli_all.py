"""`build-all`: every enabled cache, in-process, for users without Snakemake (seed 000).

Order: tokenizer (kept if `{cache-dir}/tokenizer/spm.model` exists, unless --retrain-tokenizer),
pretrain caches (disabled sources get a "not built" meta), SFT caches, byte streams. The same
functions the Snakemake rules call; Snakemake adds incremental rebuilds and parallel jobs.
"""

from __future__ import annotations

import os
import time

from niels_gpt.cache.cli_common import add_config_file_flag, add_config_flag, resolve_config


def register(sub) -> None:
    p = sub.add_parser(
        "build-all",
        help="build the tokenizer and every pretrain, SFT and stream cache in one process",
        description=__doc__,
    )
    p.add_argument("--cache-dir", default=None, help="output root (default: config cache_dir, 'cache')")
    p.add_argument("--retrain-tokenizer", action="store_true", help="train the tokenizer even if one exists")
    add_config_file_flag(p)
    add_config_flag(p, "--demo", "demo", help="read the bundled offline sample data")
    add_config_flag(p, "--seed", "seed", type=int)
    p.set_defaults(func=run, _parser=p)


def run(args, parser) -> int:
    from niels_gpt.cache.pretrain_job import build_pretrain_source
    from niels_gpt.cache.sft_job import build_sft_source
    from niels_gpt.cache.tokenizer_job import build_tokenizer
    from niels_gpt.data.registry import PRETRAIN_SOURCES, SFT_SOURCES
    from niels_gpt.streams import build_stream_from_config

    cfg = resolve_config(args, parser)
    root = args.cache_dir or cfg["cache_dir"]
    started = time.time()
    model = os.path.join(root, "tokenizer", "spm.model")
    if args.retrain_tokenizer or not os.path.exists(model):
        build_tokenizer(cfg, os.path.join(root, "tokenizer"))
    else:
        print(f"tokenizer: keeping {model} (--retrain-tokenizer to train again)")
    for source in PRETRAIN_SOURCES:
        print(f"== pretrain/{source}", flush=True)
        build_pretrain_source(cfg, source, tokenizer_path=model, out_dir=os.path.join(root, "pretrain", source))
    for source in SFT_SOURCES:
        print(f"== sft/{source}", flush=True)
        build_sft_source(cfg, source, tokenizer_path=model, out_dir=os.path.join(root, "sft", source))
    for source in cfg["streams"]["enabled_sources"]:
        print(f"== streams/{source}", flush=True)
        build_stream_from_config(cfg, source, os.path.join(root, "streams"))
    print(f"build-all: done in {time.time() - started:.1f}s -> {root}/")
    return 0
