"""meta.json: the contract every cache directory carries.

Written last and atomically, so its presence means the artifacts it lists are complete. Every token
cache's meta.json holds at least REQUIRED_COMMON (what was read, how it was split, with which seed and
tokenizer) plus its totals; `check_required` enforces that before a writer publishes it.
"""

from __future__ import annotations

import json
from typing import Any

from niels_gpt.atomic import atomic_write_json
from niels_gpt.hashing import sha256_file  # noqa: F401  (part of this module's interface)

REQUIRED_COMMON = (
    "dataset_name",
    "dataset_config",
    "split_rule",
    "seed",
    "token_dtype",
    "tokenizer_sha256",
    "vocab_size",
    "special_token_ids",
)
REQUIRED_PRETRAIN = REQUIRED_COMMON + ("train_tokens", "val_tokens", "shard_bytes")
REQUIRED_SFT = REQUIRED_COMMON + ("train_examples", "val_examples")


def write_meta(path: str, meta: dict) -> None:
    atomic_write_json(path, meta)


def read_meta(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        raise FileNotFoundError(
            f"{path}: no meta.json - the cache was never built or its build did not finish; "
            "build it with `snakemake -j4 <target>` or `python -m niels_gpt.cache.cli ...`"
        ) from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not valid JSON ({e})") from None


def check_required(meta: dict[str, Any], required: tuple[str, ...], *, path: str = "meta.json") -> None:
    missing = [k for k in required if k not in meta]
    if missing:
        raise ValueError(f"{path}: missing required field(s) {', '.join(missing)}")
