"""`report-figures` and `leakage`: the report's figures and the train/val leakage audit.

  python -m niels_gpt.cache.cli leakage [--out cache/report/leakage.json] [--num-threads 2]
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
    "leakage.max_fraction set, exit 1 naming the worst offenders when a share is above it."
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
    from niels_gpt.report.job import leakage_json_path, write_leakage

    cfg = resolve_config(args)
    out = args.out or leakage_json_path(cfg)
    write_leakage(cfg, out, num_threads=args.num_threads, tokenizer=tokenizer_path(args, cfg["cache_dir"]))
    return 0


def run_figures(args) -> int:
    from niels_gpt.report.job import write_figures

    cfg = resolve_config(args)
    out_dir = args.out_dir or layout.report_dir(cfg["cache_dir"])
    for path in write_figures(cfg, args.family, out_dir, tokenizer=tokenizer_path(args, cfg["cache_dir"])):
        log(f"{args.family} figure -> {path}")
    return 0
