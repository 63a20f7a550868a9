"""Command-line entry point: `python -m niels_gpt.cache.cli COMMAND --help`.

Build commands (the Snakemake rules call them; `build-all` runs them all in one process for users
without Snakemake, curated unless --no-curation): build-tokenizer, build-pretrain, merge-pretrain, build-sft,
build-sft-primer, build-streams, curate, apply-curation, certify, build-all. Read-only commands over a built
cache: verify, info, inspect; the report's figures and the train/val leakage audit: report-figures, leakage.
Each stage package registers its own commands; configuration flags are explained in niels_gpt.command_line.
"""

from __future__ import annotations

import argparse
import os
import sys

from niels_gpt.cache import build_all
from niels_gpt.command_line import run_cli
from niels_gpt.curation import cli as curation_cli
from niels_gpt.inspection import cli as inspection_cli
from niels_gpt.pretrain import cli as pretrain_cli
from niels_gpt.report import cli as report_cli
from niels_gpt.sft import cli as sft_cli
from niels_gpt.streams import cli as streams_cli
from niels_gpt.tokenizer import cli as tokenizer_cli

COMMAND_MODULES = (
    tokenizer_cli,
    pretrain_cli,
    sft_cli,
    streams_cli,
    build_all,
    inspection_cli,
    report_cli,
    curation_cli,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m niels_gpt.cache.cli",
        description="Build and inspect niels_gpt token caches. Values come from ./config.yaml (or --config-file, "
        "--spec, --set) and are validated like the workflow's.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in COMMAND_MODULES:
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args) or 0


if __name__ == "__main__":
    # No command hands `datasets` a torch tensor, and with torch installed its streamed datasets import
    # torch only to offer it (~2 s of CPU and ~200 MB per build process); USE_TORCH=1 turns it back on.
    os.environ.setdefault("USE_TORCH", "0")
    sys.exit(run_cli(main))
