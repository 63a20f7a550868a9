"""`build-tokenizer`: train (or adopt) the SentencePiece model -> {out-dir}/spm.model + meta.json."""

from __future__ import annotations

from niels_gpt.cache.cli_common import add_config_file_flag, add_config_flag, resolve_config


def register(sub) -> None:
    p = sub.add_parser(
        "build-tokenizer",
        help="train the SentencePiece tokenizer on a sample of the enabled pretrain sources",
        description="Train SentencePiece (ordinary pieces + the 4 chat specials as control symbols, byte "
        "fallback) on a seeded, size-capped sample of the enabled pretrain sources, or adopt --model-path.",
    )
    p.add_argument("--out-dir", default="cache/tokenizer", help="output folder (default: %(default)s)")
    add_config_file_flag(p)
    add_config_flag(p, "--demo", "demo", help="read the bundled offline sample data")
    add_config_flag(p, "--seed", "seed", type=int)
    add_config_flag(p, "--vocab-size", "tokenizer.vocab_size", type=int, help="ordinary pieces")
    add_config_flag(p, "--model-type", "tokenizer.model_type", choices=["unigram", "bpe"])
    add_config_flag(p, "--character-coverage", "tokenizer.character_coverage", type=float)
    add_config_flag(p, "--sample-chars", "tokenizer.sample_chars", type=int, help="cap on training characters")
    add_config_flag(p, "--num-threads", "tokenizer.num_threads", type=int, help="trainer threads (part of the result)")
    add_config_flag(p, "--model-path", "tokenizer.model_path", type=str, help="adopt this .model instead of training")
    for source in ("fineweb_edu", "wikitext", "gutenberg", "roam"):
        flag = "--" + source.replace("_", "-")
        add_config_flag(p, flag, f"sources.{source}.enabled", help=f"sample {source}")
    p.set_defaults(func=run, _parser=p)


def run(args, parser) -> int:
    from niels_gpt.cache.tokenizer_job import build_tokenizer

    cfg = resolve_config(args, parser)
    build_tokenizer(cfg, args.out_dir)
    return 0
