"""`build-sft` and `build-sft-primer`: one SFT source -> `{out-dir}/{train,val}_tokens.bin, _idx.npy, meta.json`.

  python -m niels_gpt.cache.cli build-sft --source oasst1 --tokenizer cache/tokenizer/spm.model \\
      --out-dir cache/sft/oasst1
  python -m niels_gpt.cache.cli build-sft-primer --primer-jsonl data/primer.jsonl --out-dir cache/sft --seed 42 \\
      --val-frac 0.1 --t-max 1024          (writes {out-dir}/primer/)

Every setting is a config key (sources.<source>.*, sft.t_max, seed): --spec, --set or --config-file.
`build-sft-primer` also takes its settings as the flags above. Both log examples and tokens per split
(stderr).
"""

from __future__ import annotations

from niels_gpt import layout
from niels_gpt.command_line import (
    add_config_args,
    add_num_threads_arg,
    add_source_args,
    add_tokenizer_arg,
    resolve_config,
    tokenizer_path,
)
from niels_gpt.data.registry import SFT_SOURCES
from niels_gpt.log import log


def register(sub) -> None:
    p = sub.add_parser(
        "build-sft",
        help="build one SFT cache (dolly15k, oasst1 or primer)",
        description="Render every chat with the one template (assistant-only labels), split by example or by group "
        "(oasst1: by tree) with the seeded split, and write uint16 tokens + int64 offsets + meta.json.",
    )
    add_source_args(p, sources=SFT_SOURCES, family="sft")
    add_config_args(p)
    p.set_defaults(func=run_build_sft)

    q = sub.add_parser(
        "build-sft-primer",
        help="build the primer SFT cache from data/primer.jsonl",
        description="Validate data/primer.jsonl strictly and build {out-dir}/primer/.",
    )
    q.add_argument(
        "--primer-jsonl", default=None, help="chat examples, one JSON object per line [sources.primer.jsonl]"
    )
    q.add_argument(
        "--out-dir", default=None, help="SFT root; the cache goes to {out-dir}/primer (default: {cache_dir}/sft)"
    )
    add_tokenizer_arg(q)
    add_num_threads_arg(q)
    q.add_argument("--seed", type=int, default=None, help="split seed [seed]")
    q.add_argument("--val-frac", type=float, default=None, help="share of examples held out [sources.primer.val_frac]")
    q.add_argument("--t-max", type=int, default=None, help="context length T_max [sft.t_max]")
    add_config_args(q)
    q.set_defaults(func=run_build_sft_primer)


def _build(args, cfg: dict, source: str, out_dir: str) -> int:
    from niels_gpt.sft.job import build_sft_source, format_summary

    tokenizer = tokenizer_path(args, cfg["cache_dir"])
    meta = build_sft_source(cfg, source, tokenizer_path=tokenizer, out_dir=out_dir, num_threads=args.num_threads)
    log(format_summary(meta, out_dir))
    return 0


def run_build_sft(args) -> int:
    cfg = resolve_config(args)
    return _build(args, cfg, args.source, args.out_dir or layout.sft_dir(cfg["cache_dir"], args.source))


def run_build_sft_primer(args) -> int:
    flags = {
        "sources.primer.jsonl": args.primer_jsonl,
        "seed": args.seed,
        "sources.primer.val_frac": args.val_frac,
        "sft.t_max": args.t_max,
    }
    cfg = resolve_config(args, flags)
    out_dir = f"{args.out_dir}/primer" if args.out_dir else layout.sft_dir(cfg["cache_dir"], "primer")
    return _build(args, cfg, "primer", out_dir)
