"""A primer.jsonl in a temporary folder, and `build-sft-primer` run on it as a user would."""

from __future__ import annotations

import json

from niels_gpt.cache.cli import main
from niels_gpt.command_line import run_cli


def write_primer(path, chats):
    """One {"messages": [...]} object per line."""
    path.write_text("".join(json.dumps({"messages": c}) + "\n" for c in chats), encoding="utf-8")
    return path


def build_primer(tmp_path, tok_path, primer, out="sft", seed=42, extra=()) -> int:
    """`build-sft-primer` into {tmp_path}/{out}/primer (val_frac 0.1, T_max 1024); returns its exit code."""
    argv = [
        "build-sft-primer",
        "--primer-jsonl",
        str(primer),
        "--out-dir",
        str(tmp_path / out),
        "--seed",
        str(seed),
        "--val-frac",
        "0.1",
        "--t-max",
        "1024",
        "--tokenizer",
        tok_path,
        *extra,
    ]
    return run_cli(main, argv)
