"""`build-sft` and `build-sft-primer`: one SFT source -> `{out-dir}/{train,val}_tokens.bin, _idx.npy, meta.json`.

  python -m niels_gpt.cache.cli build-sft --source oasst1 --tokenizer cache/tokenizer/spm.model --out-dir cache/sft/oasst1
  python -m niels_gpt.cache.cli build-sft-primer --primer-jsonl data/primer.jsonl --out-dir cache/sft --seed 42 \\
      --val-frac 0.1 --t-max 1024          (seed 001; writes {out-dir}/primer/)

Every flag is bound to a config key; unset flags come from --config-file / config.yaml / defaults.
"""

from __future__ import annotations

import argparse
import os

from niels_gpt.cache.cli_common import add_config_file_flag, add_config_flag, resolve_config
from niels_gpt.cache.sft_job import SFT_SOURCE_NAMES

# flag -> the only source it applies to (anything else is refused rather than silently ignored)
SOURCE_ONLY_FLAGS = {
    "include_system": "dolly15k",
    "english_only": "oasst1",
    "max_messages": "oasst1",
    "primer_jsonl": "primer",
}
HUB_FLAGS = ("dataset_id", "split", "revision", "data_files")  # not for primer, a local file


def _tokenizer_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--tokenizer",
        default=None,
        help="SentencePiece model (default: {cache_dir}/tokenizer/spm.model, from config cache_dir)",
    )


def register(sub) -> None:
    p = sub.add_parser(
        "build-sft",
        help="build one SFT cache (dolly15k, oasst1 or primer)",
        description="Render every chat with the one template (assistant-only labels), split by example or "
        "by group (oasst1: by tree) with the seeded split, and write uint16 tokens + int64 offsets + meta.json.",
    )
    p.add_argument("--source", required=True, choices=SFT_SOURCE_NAMES, help="which SFT source")
    _tokenizer_flag(p)
    p.add_argument("--out-dir", default=None, help="output folder (default: {cache_dir}/sft/{source})")
    add_config_file_flag(p)
    add_config_flag(p, "--demo", "demo", help="read the bundled offline sample data")
    add_config_flag(p, "--seed", "seed", type=int)
    add_config_flag(p, "--enabled", "sources.{source}.enabled", sources=SFT_SOURCE_NAMES, action=argparse.BooleanOptionalAction,
                    help="build it (--no-enabled writes a 'not built' meta)")  # fmt: skip
    add_config_flag(p, "--dataset-id", "sources.{source}.dataset_id", sources=SFT_SOURCE_NAMES, type=str, help="hub dataset id")
    add_config_flag(p, "--split", "sources.{source}.split", sources=SFT_SOURCE_NAMES, type=str, help="hub split")
    add_config_flag(p, "--revision", "sources.{source}.revision", sources=SFT_SOURCE_NAMES, type=str, help="hub revision")
    add_config_flag(p, "--val-frac", "sources.{source}.val_frac", sources=SFT_SOURCE_NAMES, type=float, help="share held out for val")
    add_config_flag(p, "--truncation", "sources.{source}.truncation", sources=SFT_SOURCE_NAMES, choices=["head", "tail"],
                    help="which end of a long example is kept")  # fmt: skip
    add_config_flag(p, "--t-max", "sft.t_max", type=int, help="context length T_max")
    add_config_flag(p, "--include-system", "sources.dolly15k.include_system", help="(dolly15k) prepend a system message")
    add_config_flag(p, "--english-only", "sources.oasst1.english_only", help="(oasst1) keep lang == 'en' only")
    add_config_flag(p, "--max-messages", "sources.oasst1.max_messages", type=int, help="(oasst1) cap per thread")
    add_config_flag(p, "--primer-jsonl", "sources.primer.jsonl", type=str, help="(primer) chat examples file")
    add_config_flag(p, "--data-files", "sources.{source}.demo_data_files", sources=SFT_SOURCE_NAMES,
                    help="local files in the hub schema, used when demo=true (repeatable)")  # fmt: skip
    p.set_defaults(func=run_build_sft, _parser=p)

    q = sub.add_parser(
        "build-sft-primer",
        help="build the primer SFT cache from data/primer.jsonl (seed 001)",
        description="Seed 001's command: validate data/primer.jsonl strictly and build {out-dir}/primer/.",
    )
    add_config_flag(q, "--primer-jsonl", "sources.primer.jsonl", type=str, help="chat examples, one JSON object per line")
    q.add_argument("--out-dir", default=None, help="SFT root; the cache goes to {out-dir}/primer (default: {cache_dir}/sft)")
    _tokenizer_flag(q)
    add_config_file_flag(q)
    add_config_flag(q, "--seed", "seed", type=int)
    add_config_flag(q, "--val-frac", "sources.primer.val_frac", type=float, help="share of examples held out")
    add_config_flag(q, "--t-max", "sft.t_max", type=int, help="context length T_max")
    add_config_flag(q, "--truncation", "sources.primer.truncation", choices=["head", "tail"],
                    help="which end of a long example is kept")  # fmt: skip
    q.set_defaults(func=run_build_sft_primer, _parser=q)


def _check_source_flags(args, parser) -> None:
    for dest, only in SOURCE_ONLY_FLAGS.items():
        if getattr(args, dest, None) is not None and args.source != only:
            parser.error(f"--{dest.replace('_', '-')} applies to --source {only} only, not {args.source}")
    if args.source == "primer":
        for dest in HUB_FLAGS:
            if getattr(args, dest, None) is not None:
                parser.error(f"--{dest.replace('_', '-')} does not apply to primer (a local file: use --primer-jsonl)")


def _build(cfg: dict, source: str, tokenizer: str | None, out_dir: str) -> int:
    from niels_gpt.cache.sft_job import build_sft_source, format_summary

    tokenizer = tokenizer or os.path.join(cfg["cache_dir"], "tokenizer", "spm.model")
    meta = build_sft_source(cfg, source, tokenizer_path=tokenizer, out_dir=out_dir)
    print(format_summary(meta, out_dir), flush=True)
    return 0


def run_build_sft(args, parser) -> int:
    _check_source_flags(args, parser)
    cfg = resolve_config(args, parser)
    out_dir = args.out_dir or os.path.join(cfg["cache_dir"], "sft", args.source)
    return _build(cfg, args.source, args.tokenizer, out_dir)


def run_build_sft_primer(args, parser) -> int:
    cfg = resolve_config(args, parser)
    out_dir = os.path.join(args.out_dir or os.path.join(cfg["cache_dir"], "sft"), "primer")
    return _build(cfg, "primer", args.tokenizer, out_dir)
