"""`build-pretrain`: one source's pretrain token cache, every constant a flag bound to config.yaml.

    python -m niels_gpt.cache.cli build-pretrain --source fineweb_edu \
        --tokenizer cache/tokenizer/spm.model --out-dir cache/pretrain/fineweb_edu [--demo] [--max-train-tokens N]

Scale-out (pretrain_parts.py): `build-pretrain ... --num-parts N --part K --out-dir {dir}/parts/part_00K`
builds part K of N of a streamed source; `merge-pretrain --source S --parts-dir {dir}/parts --out-dir {dir}`
merges the N parts into the usual cache. Without --part, build-pretrain builds the whole source.

Unset flags fall back to --config-file / config.yaml / the schema defaults. Per-source flags exist only
for the sources whose config has that key (e.g. --train-split is wikitext's, --root is roam's); giving
one to another source is an error, never a silently ignored value. Budgets take an int (1_000_000 works) or `null` (all).
"""

from __future__ import annotations

import argparse
import os

from niels_gpt.cache.cli_common import _split_glob, add_config_file_flag, add_config_flag, resolve_config
from niels_gpt.cache.pretrain_job import PRETRAIN_SOURCES, build_pretrain_source, summary_lines
from niels_gpt.config import schema_defaults

# flag -> (field under sources.<source>, help, argparse kwargs); applies to sources whose config has the field
SOURCE_FLAGS = {
    "--enabled": ("enabled", "Build this source (--no-enabled writes a 'not built' meta.json).",
                  {"action": argparse.BooleanOptionalAction}),
    "--dataset-id": ("dataset_id", "Hub dataset id.", {}),
    "--dataset-config": ("config", "Hub dataset config name.", {}),
    "--split": ("split", "Hub split to stream.", {}),
    "--train-split": ("train_split", "Split read as train.", {}),
    "--val-split": ("val_split", "Split read as val.", {}),
    "--revision": ("revision", "Hub revision (branch, tag or commit).", {}),
    "--shuffle-buffer": ("shuffle_buffer", "datasets shuffle buffer (0 = no shuffle).", {"type": int}),
    "--max-train-tokens": ("max_train_tokens", "Exact train token budget (int or null).", {"type": int}),
    "--max-val-tokens": ("max_val_tokens", "Exact val token budget (int or null).", {"type": int}),
    "--val-doc-prob": ("val_doc_prob", "Probability a streamed document goes to val.", {"type": float}),
    "--root": ("root", "Folder of markdown notes.", {}),
    "--demo-root": ("demo_root", "Notes folder used with --demo.", {}),
    "--val-frac": ("val_frac", "Share of note files held out for val.", {"type": float}),
    "--data-files": ("demo_data_files", "Local data files used with --demo (repeatable).",
                     {"action": "append", "type": _split_glob, "metavar": "SPLIT=GLOB"}),
}


def _sources_with(field: str) -> list[str]:
    defaults = schema_defaults()["sources"]
    return [s for s in PRETRAIN_SOURCES if field in defaults[s]]


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "build-pretrain",
        help="tokenize one pretrain source into uint16 shards + meta.json",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--source", required=True, choices=PRETRAIN_SOURCES, help="Pretrain source to build.")
    p.add_argument("--tokenizer", default=None, help="SentencePiece model [default: {cache_dir}/tokenizer/spm.model]")
    p.add_argument("--out-dir", default=None, help="Cache folder [default: {cache_dir}/pretrain/{source}]")
    p.add_argument("--num-threads", type=int, default=-1,
                   help="sentencepiece encoding threads (-1 = every core) [default: -1]")
    add_config_file_flag(p)
    add_config_flag(p, "--cache-dir", "cache_dir", "Root of generated artifacts.")
    add_config_flag(p, "--demo", "demo", "Read the bundled offline sample data.")
    add_config_flag(p, "--seed", "seed", "Seed of the split rule (and the loader's shuffle).", type=int)
    add_config_flag(p, "--shard-bytes", "pretrain.shard_bytes", "Bytes per shard before rotating.", type=int)
    add_config_flag(p, "--num-parts", "pretrain.num_parts", "Parts a streamed source is split into (with --part).", type=int)
    p.add_argument("--part", type=int, default=None,
                   help="Build only part K (0-based) of --num-parts into --out-dir [default: the whole source]")
    for flag, (field, text, kwargs) in SOURCE_FLAGS.items():
        add_config_flag(p, flag, f"sources.{{source}}.{field}", text, sources=_sources_with(field), **kwargs)
    p.set_defaults(func=run_build_pretrain, _parser=p)
    register_merge(subparsers)


def register_merge(subparsers) -> None:
    from niels_gpt.data.registry import SPLIT_SOURCES

    p = subparsers.add_parser(
        "merge-pretrain",
        help="merge the part caches of a split source into its usual cache (scale-out)",
        description="Concatenate parts 0..N-1 of a source (train and val, in part order), re-shard at "
        "--shard-bytes, write {out-dir}/{train,val}/shard_NNNNN.bin and meta.json last.",
    )
    p.add_argument("--source", required=True, choices=SPLIT_SOURCES, help="Source whose parts to merge.")
    p.add_argument("--parts-dir", default=None, help="Folder of part_000 ... [default: {out-dir}/parts]")
    p.add_argument("--out-dir", default=None, help="Merged cache folder [default: {cache_dir}/pretrain/{source}]")
    add_config_file_flag(p)
    add_config_flag(p, "--cache-dir", "cache_dir", "Root of generated artifacts.")
    add_config_flag(p, "--shard-bytes", "pretrain.shard_bytes", "Bytes per merged shard before rotating.", type=int)
    add_config_flag(p, "--num-parts", "pretrain.num_parts", "Parts to merge (part_000 .. part_{N-1}).", type=int)
    p.set_defaults(func=run_merge_pretrain, _parser=p)


def _check_flags_apply(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    for flag, (field, _, _) in SOURCE_FLAGS.items():
        if getattr(args, flag.lstrip("-").replace("-", "_")) is not None and args.source not in _sources_with(field):
            parser.error(
                f"{flag} does not apply to --source {args.source} (sources.{args.source} has no {field!r}; "
                f"it is a flag of {', '.join(_sources_with(field))})"
            )


def run_build_pretrain(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    _check_flags_apply(args, parser)
    cfg = resolve_config(args, parser)
    tokenizer = args.tokenizer or os.path.join(cfg["cache_dir"], "tokenizer", "spm.model")
    out_dir = args.out_dir or os.path.join(cfg["cache_dir"], "pretrain", args.source)
    if args.part is None and args.num_parts not in (None, 1):
        parser.error(f"--num-parts {args.num_parts} needs --part K (0..{args.num_parts - 1}): the part to build")
    num_parts = 1 if args.part is None else cfg["pretrain"]["num_parts"]
    build_pretrain_source(cfg, args.source, tokenizer_path=tokenizer, out_dir=out_dir, num_threads=args.num_threads,
                          num_parts=num_parts, part=args.part)  # fmt: skip
    return 0


def run_merge_pretrain(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from niels_gpt.cache.pretrain_parts import PARTS_DIR, merge_pretrain_parts

    cfg = resolve_config(args, parser)
    out_dir = args.out_dir or os.path.join(cfg["cache_dir"], "pretrain", args.source)
    parts_dir = args.parts_dir or os.path.join(out_dir, PARTS_DIR)
    n = cfg["pretrain"]["num_parts"]
    print(f"{args.source}: merging {n} parts from {parts_dir}")
    meta = merge_pretrain_parts(parts_dir, out_dir, num_parts=n, shard_bytes=cfg["pretrain"]["shard_bytes"], source=args.source)
    for line in summary_lines(meta):
        print(line)
    print(f"wrote {out_dir}/meta.json")
    return 0
