"""`build-tokenizer`: train (or adopt) the SentencePiece model -> {out-dir}/spm.model + meta.json."""

from __future__ import annotations

from niels_gpt import layout
from niels_gpt.command_line import add_config_args, resolve_config


def register(sub) -> None:
    p = sub.add_parser(
        "build-tokenizer",
        help="train the SentencePiece tokenizer on a sample of the enabled pretrain sources",
        description="Train SentencePiece (tokenizer.vocab_size ordinary pieces + the 4 chat specials as control "
        "symbols, byte fallback) on a seeded sample of tokenizer.sample_chars characters of the enabled pretrain "
        "sources, or adopt tokenizer.model_path. Every setting is a config key (tokenizer.*, sources.*.enabled).",
    )
    p.add_argument("--out-dir", default=None, help="output folder (default: {cache_dir}/tokenizer)")
    add_config_args(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from niels_gpt.tokenizer.job import build_tokenizer

    cfg = resolve_config(args)
    build_tokenizer(cfg, args.out_dir or layout.tokenizer_dir(cfg["cache_dir"]))
    return 0
