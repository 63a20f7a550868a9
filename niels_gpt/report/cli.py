"""`report-figures` and `leakage`: the report's figures and the train/val leakage audit.

  python -m niels_gpt.cache.cli leakage [--out cache/report/leakage.json] [--num-threads 2]
  python -m niels_gpt.cache.cli leakage --space tokens|bytes --out cache/report/leakage_tokens.json
  python -m niels_gpt.cache.cli leakage --parts cache/report/leakage_tokens.json cache/report/leakage_bytes.json
  python -m niels_gpt.cache.cli report-figures --family pretrain|sft|tokenizer|streams|leakage [--out-dir DIR]

Both read the caches under `cache_dir` (config.yaml, --spec, --set). `leakage` uses the `leakage.*`
keys (n-gram lengths, units listed, the gate `leakage.max_fraction`) and exits 1 with the worst
offenders named when the gate fails; `report-figures --family leakage` draws leakage.json.
"""

from __future__ import annotations

from niels_gpt import layout
from niels_gpt.command_line import add_config_args, add_tokenizer_arg, resolve_config, tokenizer_path
from niels_gpt.log import log
from niels_gpt.report.job import FIGURE_FAMILIES

LEAKAGE_DOC = (
    "Train/val leakage audit: for every val split, the share of its n-grams (13 tokens; 50 bytes for the "
    "streams) found in each train split, and the val documents most affected. Settings: leakage.* keys; with "
    "leakage.max_fraction set, exit 1 naming the worst offenders when a share is above it. The workflow runs it "
    "in two steps: --space tokens and --space bytes each write one space's part (no gate), --parts joins them "
    "into leakage.json (the same bytes as one whole audit) and applies the gate."
)
FIGURES_DOC = (
    "Draw one family of the report's figures (SVG) from the caches under cache_dir and their meta.json "
    "(--family leakage: from leakage.json)."
)


LEAKAGE_HELP = "train/val leakage audit: share of each val split's n-grams found in each train split"
THREADS_HELP = "threads scanning train splits (result unchanged; default: 2)"


def register(sub) -> None:
    p = sub.add_parser("leakage", help=LEAKAGE_HELP, description=LEAKAGE_DOC)
    p.add_argument("--out", default=None, help="leakage.json to write (default: {cache_dir}/report/leakage.json)")
    p.add_argument("--num-threads", type=int, default=2, help=THREADS_HELP)
    step = p.add_mutually_exclusive_group()
    step.add_argument(
        "--space",
        choices=layout.LEAKAGE_SPACES,
        default=None,
        help="audit only this space and write its part (--out required)",
    )
    step.add_argument(
        "--parts", nargs="+", metavar="PART", default=None, help="join the spaces' parts into leakage.json"
    )
    add_tokenizer_arg(p)
    add_config_args(p)
    p.set_defaults(func=run_leakage)

    q = sub.add_parser("report-figures", help="draw one family of the report's figures (SVG)", description=FIGURES_DOC)
    q.add_argument("--family", required=True, choices=FIGURE_FAMILIES, help="which figures")
    q.add_argument("--out-dir", default=None, help="output folder (default: {cache_dir}/report)")
    add_tokenizer_arg(q)
    add_config_args(q)
    q.set_defaults(func=run_figures)


def run_leakage(args) -> int:
    from niels_gpt.report.job import leakage_json_path, write_leakage, write_leakage_joined, write_leakage_part

    cfg = resolve_config(args)
    tokenizer = tokenizer_path(args, cfg["cache_dir"])
    if args.space:
        if not args.out:
            raise ValueError("leakage --space: give --out, the part's path (e.g. cache/report/leakage_tokens.json)")
        write_leakage_part(cfg, args.space, args.out, num_threads=args.num_threads, tokenizer=tokenizer)
        return 0
    out = args.out or leakage_json_path(cfg)
    if args.parts:
        write_leakage_joined(cfg, args.parts, out)
    else:
        write_leakage(cfg, out, num_threads=args.num_threads, tokenizer=tokenizer)
    return 0


def run_figures(args) -> int:
    from niels_gpt.report.job import write_figures

    cfg = resolve_config(args)
    out_dir = args.out_dir or layout.report_dir(cfg["cache_dir"])
    for path in write_figures(cfg, args.family, out_dir, tokenizer=tokenizer_path(args, cfg["cache_dir"])):
        log(f"{args.family} figure -> {path}")
    return 0
