"""`build-pretrain` and `merge-pretrain`: one source's pretrain token cache.

    python -m niels_gpt.cache.cli build-pretrain --source fineweb_edu \\
        --tokenizer cache/tokenizer/spm.model --out-dir cache/pretrain/fineweb_edu [--demo] [--set KEY=VALUE ...]

Scale-out (parts.py): `build-pretrain ... --part K --set pretrain.num_parts=N --out-dir {dir}/parts/part_00K`
builds part K of N of a streamed source; `merge-pretrain --source S --out-dir {dir}` writes {dir}/meta.json,
the manifest of the N parts in {dir}/parts (nothing is copied: readers read the parts' shards through it).
Every setting is a config key (sources.<source>.*, pretrain.*).
"""

from __future__ import annotations

import argparse

from niels_gpt import layout
from niels_gpt.command_line import add_config_args, add_source_args, resolve_config, tokenizer_path
from niels_gpt.data.registry import PRETRAIN_SOURCES, STREAMED_SOURCES
from niels_gpt.log import log


def register(sub) -> None:
    p = sub.add_parser(
        "build-pretrain",
        help="tokenize one pretrain source into uint16 shards + meta.json",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_source_args(p, sources=PRETRAIN_SOURCES, family="pretrain")
    p.add_argument(
        "--part",
        type=int,
        default=None,
        help="build only part K (0-based) of pretrain.num_parts into --out-dir (default: the whole source)",
    )
    p.add_argument(
        "--read-margin",
        type=float,
        default=0.0,
        help="read this fraction past each token budget (the raw build curation cuts back; default: 0)",
    )
    add_config_args(p)
    p.set_defaults(func=run_build_pretrain)

    q = sub.add_parser(
        "merge-pretrain",
        help="merge the part caches of a streamed source into one cache: a manifest of their shards (scale-out)",
        description="List the shards of parts 0..N-1 (N = pretrain.num_parts) of a source, train and val, in part "
        "order, in {out-dir}/meta.json (paths relative to --out-dir, with token counts and sha256); no token is "
        "copied. Every reader of the cache reads the parts' shards through it.",
    )
    q.add_argument("--source", required=True, choices=STREAMED_SOURCES, help="source whose parts to merge")
    q.add_argument("--parts-dir", default=None, help="folder of part_000 ... (default: {out-dir}/parts)")
    q.add_argument("--out-dir", default=None, help="merged cache folder (default: {cache_dir}/pretrain/{source})")
    add_config_args(q)
    q.set_defaults(func=run_merge_pretrain)


def run_build_pretrain(args) -> int:
    from niels_gpt.pretrain.job import build_pretrain_source

    cfg = resolve_config(args)
    num_parts = cfg["pretrain"]["num_parts"] if args.part is not None else 1
    build_pretrain_source(
        cfg,
        args.source,
        tokenizer_path=tokenizer_path(args, cfg["cache_dir"]),
        out_dir=args.out_dir or layout.pretrain_dir(cfg["cache_dir"], args.source),
        num_threads=args.num_threads,
        num_parts=num_parts,
        part=args.part,
        spec=args.spec,
        read_margin=args.read_margin,
    )
    return 0


def run_merge_pretrain(args) -> int:
    from niels_gpt.pretrain.job import summary_lines
    from niels_gpt.pretrain.parts import merge_pretrain_parts

    cfg = resolve_config(args)
    out_dir = args.out_dir or layout.pretrain_dir(cfg["cache_dir"], args.source)
    parts_dir = args.parts_dir or f"{out_dir}/{layout.PARTS_DIR}"
    n = cfg["pretrain"]["num_parts"]
    log(f"{args.source}: merging {n} parts from {parts_dir}")
    meta = merge_pretrain_parts(parts_dir, out_dir, num_parts=n, source=args.source)
    for line in summary_lines(meta):
        log(line)
    log(f"wrote {out_dir}/{layout.META}")
    return 0
