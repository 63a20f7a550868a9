"""meta.json: the one contract every cache artifact carries, and the only code that writes or removes one.

Every artifact (the tokenizer, a pretrain cache or one part of it, an SFT cache, a byte stream) has a
meta.json that is written last and atomically, so its presence means the files it describes are
complete, and that a rebuild removes first (`unpublish`), so a half-removed artifact never looks
complete. Every meta.json starts with the same header (`header`):

  kind                  tokenizer | pretrain | sft | streams (the family, layout.FAMILIES)
  format_version        the version of the bytes its writer produces (layout.FORMAT_VERSION, ...)
  built                 true; or false, with `reason`, for an artifact left unbuilt on purpose (`not_built`)
  seed                  the config seed it was built with
  dataset_name          what was read: a hub dataset id, a local file or folder, a source name
  dataset_config        the dataset's config (None when it has none)
  dataset_revision      the commit of a hub dataset actually read (None for local files and folders)
  tokenizer_sha256      the tokenizer its ids belong to, with its vocab_size, special_token_ids and
  vocab_size, special_token_ids, eot_id   eot_id (all None for byte streams, and when not built)

`write_meta` checks the fields its kind requires (`check_required`) before anything is published;
`verify` runs the same check on every meta.json it reads.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from niels_gpt.atomic import atomic_write_json, tmp_path_for
from niels_gpt.layout import FAMILIES

KINDS = tuple(FAMILIES)
TOKENIZER_FIELDS = ("tokenizer_sha256", "vocab_size", "special_token_ids", "eot_id")
HEADER = (
    "kind",
    "format_version",
    "built",
    "seed",
    "dataset_name",
    "dataset_config",
    "dataset_revision",
    *TOKENIZER_FIELDS,
)
# What a token cache's meta.json always records: what was read, how it was split, with which seed and tokenizer
REQUIRED_COMMON = HEADER + ("split_rule", "token_dtype")
REQUIRED_PRETRAIN = REQUIRED_COMMON + ("train_tokens", "val_tokens", "shard_bytes", "shards")
REQUIRED_SFT = REQUIRED_COMMON + ("train_examples", "val_examples", "files")
REQUIRED_TOKENIZER = HEADER + ("model_file", "sha256")
REQUIRED_STREAM = HEADER + ("source", "split", "n_bytes", "sha256")
# A built artifact's required fields, by kind; one that is not built needs only HEADER and `reason`
REQUIRED = {
    "tokenizer": REQUIRED_TOKENIZER,
    "pretrain": REQUIRED_PRETRAIN,
    "sft": REQUIRED_SFT,
    "streams": REQUIRED_STREAM,
}
NOT_BUILT_REQUIRED = HEADER + ("reason",)


def tokenizer_fields(tokenizer) -> dict:
    """The header's TOKENIZER_FIELDS: of a SentencePieceTokenizer, copied from the meta of an artifact
    built with one (a dict: a merge of part caches), or all None (no tokenizer)."""
    if tokenizer is None:
        return dict.fromkeys(TOKENIZER_FIELDS)
    if isinstance(tokenizer, Mapping):
        return {k: tokenizer.get(k) for k in TOKENIZER_FIELDS}
    return {
        "tokenizer_sha256": tokenizer.sha256,
        "vocab_size": tokenizer.vocab_size,
        "special_token_ids": dict(tokenizer.special_ids),
        "eot_id": tokenizer.eot_id,
    }


def header(
    kind: str,
    *,
    format_version: int,
    seed: int | None,
    tokenizer=None,
    dataset_name: str | None = None,
    dataset_config: str | None = None,
    dataset_revision: str | None = None,
    built: bool = True,
) -> dict:
    """The fields every meta.json starts with (see the module docstring); `tokenizer` as `tokenizer_fields`
    takes it (None for byte streams, or an artifact built without one)."""
    if kind not in KINDS:
        raise ValueError(f"unknown artifact kind {kind!r}; expected one of {', '.join(KINDS)}")
    return {
        "kind": kind,
        "format_version": format_version,
        "built": built,
        "seed": seed,
        "dataset_name": dataset_name,
        "dataset_config": dataset_config,
        "dataset_revision": dataset_revision,
        **tokenizer_fields(tokenizer),
    }


def not_built(kind: str, *, reason: str, **fields: Any) -> dict:
    """The one "not built" record: the header with `built: false` and why (e.g. "sources.x.enabled is false").

    `fields` are `header`'s keyword arguments. Readers refuse such an artifact with `reason`; `verify`
    skips it."""
    return {**header(kind, built=False, **fields), "reason": reason}


def is_built(meta: dict) -> bool:
    """False only for a "not built" record."""
    return meta.get("built") is not False


def check_required(
    meta: dict[str, Any], required: Iterable[str] | None = None, *, path: str | os.PathLike = "meta.json"
) -> None:
    """ValueError naming `path` and every missing field: of `required` when given, else of the fields
    `meta["kind"]` requires (REQUIRED, or NOT_BUILT_REQUIRED for a "not built" record)."""
    if required is None:
        kind = meta.get("kind")
        if kind not in REQUIRED:
            raise ValueError(f"{path}: kind {kind!r} is not an artifact kind ({', '.join(KINDS)})")
        required = REQUIRED[kind] if is_built(meta) else NOT_BUILT_REQUIRED
    missing = [k for k in required if k not in meta]
    if missing:
        raise ValueError(f"{path}: missing required field(s) {', '.join(missing)}")


def write_meta(path: str | os.PathLike, meta: dict) -> None:
    """Check the required fields, then write `path` atomically (canonical JSON: same dict => same bytes)."""
    check_required(meta, path=path)
    atomic_write_json(path, meta)


def read_meta(path: str | os.PathLike) -> dict:
    """The meta.json at `path`; errors say how to build it, or that it is damaged."""
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


def unpublish(meta_path: str | os.PathLike, files: Iterable[str | os.PathLike] = ()) -> None:
    """Take an artifact down before it is rebuilt: its meta.json first (from then on nothing looks
    complete), then each of `files`, and the temporary `*.tmp` of each. Missing files are fine."""
    for path in (Path(meta_path), *map(Path, files)):
        for p in (path, tmp_path_for(path)):
            p.unlink(missing_ok=True)
