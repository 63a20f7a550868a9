"""`curate`, `apply-curation` and `certify`: curation between the raw caches and the usual ones.

  python -m niels_gpt.cache.cli curate --raw DIR [DIR ...] --tokenizer cache/tokenizer/spm.model
  python -m niels_gpt.cache.cli apply-curation --raw cache/curation/raw/pretrain/wikitext \\
      --decisions cache/curation/decisions/pretrain/wikitext.json --out-dir cache/pretrain/wikitext
  python -m niels_gpt.cache.cli certify --out cache/report/certificate.json \\
      [--leakage-part cache/report/leakage_tokens.json]

Settings: the dedup.*, decontamination.* and leakage.n_tokens keys (config.yaml, --spec, --set); certify's
--leakage-part also leakage.top_units.
"""

from __future__ import annotations

import json

from niels_gpt.command_line import add_config_args, add_tokenizer_arg, resolve_config, tokenizer_path
from niels_gpt.log import log


def register(sub) -> None:
    p = sub.add_parser("curate", help="decide the duplicates and contaminated spans of every raw cache")
    p.add_argument("--raw", nargs="+", required=True, help="raw cache folders (cache/curation/raw/...)")
    p.add_argument("--num-threads", type=int, default=2, help="threads keying documents (result unchanged; default: 2)")
    add_tokenizer_arg(p)
    add_config_args(p)
    p.set_defaults(func=run_curate)

    q = sub.add_parser("apply-curation", help="write the curated copy of one raw cache")
    q.add_argument("--raw", required=True, help="the raw cache folder")
    q.add_argument("--decisions", required=True, help="its decisions file (written by curate)")
    q.add_argument("--out-dir", required=True, help="where the curated cache goes")
    q.add_argument("--family", required=True, choices=("pretrain", "sft"), help="the cache's family")
    add_config_args(q)
    q.set_defaults(func=run_apply)

    c = sub.add_parser("certify", help="0 shared n-grams between train splits and val splits / benchmarks")
    c.add_argument("--out", required=True, help="certificate.json to write")
    c.add_argument("--summary", default=None, help="the curation summary to include")
    c.add_argument("--table", default=None, help="curation_table.html to write (what was removed, the pairs)")
    c.add_argument("--waived", default=None, help="waived_ngrams.npy: boilerplate n-grams curation did not protect")
    c.add_argument("--num-threads", type=int, default=2, help="threads scanning train splits (default: 2)")
    c.add_argument(
        "--leakage-part",
        default=None,
        help="also write the token space's part of the leakage audit from the same scan "
        "(cache/report/leakage_tokens.json; leakage.top_units units listed)",
    )
    add_tokenizer_arg(c)
    add_config_args(c)
    c.set_defaults(func=run_certify)


def settings(cfg: dict) -> dict:
    return {"dedup": cfg["dedup"], "decontamination": cfg["decontamination"], "n_tokens": cfg["leakage"]["n_tokens"]}


def run_curate(args) -> int:
    from niels_gpt.curation.curate import curate

    cfg = resolve_config(args)
    summary = curate(
        cfg,
        cache_dir=cfg["cache_dir"],
        raw_dirs=args.raw,
        tokenizer_path=tokenizer_path(args, cfg["cache_dir"]),
        num_threads=args.num_threads,
    )
    for name, splits in summary["caches"].items():
        for split, r in splits.items():
            removed = ", ".join(f"{k} {v['units']:,} ({v['tokens']:,} tokens)" for k, v in r["counts"].items())
            kept = f"kept {r['kept_tokens']:,} of {r['read_tokens']:,} tokens read"
            log(f"{name} {split}: {kept}; {removed or 'nothing removed'}")
    return 0


def run_apply(args) -> int:
    from niels_gpt.curation.apply import apply_pretrain, apply_sft

    cfg = resolve_config(args)
    if args.family == "pretrain":
        meta = apply_pretrain(
            args.raw, args.out_dir, args.decisions, shard_bytes=cfg["pretrain"]["shard_bytes"], settings=settings(cfg)
        )
    else:
        meta = apply_sft(args.raw, args.out_dir, args.decisions, settings=settings(cfg))
    log(f"wrote {args.out_dir}: " + json.dumps({k: meta.get(k) for k in ("train_tokens", "val_tokens")}))
    return 0


def run_certify(args) -> int:
    from niels_gpt.curation.certificate import certify

    cfg = resolve_config(args)
    certify(
        cfg["cache_dir"],
        n=cfg["leakage"]["n_tokens"],
        benchmarks=cfg["decontamination"]["benchmarks"],
        tokenizer_path=tokenizer_path(args, cfg["cache_dir"]),
        summary_file=args.summary,
        out=args.out,
        table=args.table,
        num_threads=args.num_threads,
        required=cfg["decontamination"]["enabled"],
        waived_file=args.waived,
        leakage_part=args.leakage_part,
        top=cfg["leakage"]["top_units"],
    )
    return 0
