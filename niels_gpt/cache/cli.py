"""Command-line entry point: `python -m niels_gpt.cache.cli <command> --help`.

Commands are registered by small modules (one per artifact family); `build-all` builds every
enabled cache in-process, for users without Snakemake. The Snakemake rules call the same commands.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from niels_gpt.cache.cli_common import run_cli

# each module defines register(subparsers) and adds its commands
COMMAND_MODULES = (
    "niels_gpt.cache.cli_tokenizer",
    "niels_gpt.cache.cli_pretrain",
    "niels_gpt.cache.cli_sft",
    "niels_gpt.cache.cli_streams",
    "niels_gpt.cache.cli_all",
    "niels_gpt.cache.cli_inspect",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m niels_gpt.cache.cli",
        description="Build and inspect niels_gpt token caches. Values default to config.yaml; flags override.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name != name:
                raise
            continue  # command family not built yet
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    return args.func(args, args._parser) or 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
