"""Shared plumbing of the CLIs: config-backed flags and one clear error instead of a traceback.

Every build command takes `--config-file` plus one flag per config key it uses. A flag left unset
falls back to the config file (or the schema default, which its --help shows); a flag that is set
overrides that key. The result goes through `prepare_config`, so flags are validated exactly like
config.yaml.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from typing import Any

from niels_gpt.config import ConfigError, deep_merge, load_config, prepare_config, schema_defaults

_FLAG_KEYS = "_niels_config_flags"


def _get(d: dict, dotted: str) -> Any:
    for part in dotted.split("."):
        d = d[part]
    return d


def _set(d: dict, dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    for part in parts[:-1]:
        d = d.setdefault(part, {})
    d[parts[-1]] = value


def _json_object(text: str) -> dict:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise argparse.ArgumentTypeError(f"--spec is not valid JSON ({e})") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("--spec must be a JSON object of config values")
    return value


def add_config_file_flag(parser: argparse.ArgumentParser) -> None:
    """`--config-file` and `--spec`, the two ways to supply config values besides single flags."""
    parser.add_argument(
        "--config-file",
        default=None,
        help="config.yaml to take unset values from (default: ./config.yaml if present, else built-in defaults)",
    )
    parser.add_argument(
        "--spec",
        type=_json_object,
        default=None,
        metavar="JSON",
        help="config values as one JSON object (nested like config.yaml), applied over built-in defaults "
        "instead of a config file; the Snakemake rules pass exactly the values a job depends on this way",
    )


class _Null:
    """A flag given as `null`/`none`: sets a nullable key (e.g. a budget) to None, i.e. unlimited."""

    def __repr__(self) -> str:
        return "null"


NULL = _Null()


def _nullable(convert: Callable[[str], Any]) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        return NULL if text.strip().lower() in ("null", "none") else convert(text)

    parse.__name__ = getattr(convert, "__name__", "value")  # argparse names the type in its errors
    return parse


def _split_glob(text: str) -> tuple[str, str]:
    split, sep, pattern = text.partition("=")
    if not sep or not split or not pattern:
        raise argparse.ArgumentTypeError(f"expected SPLIT=GLOB (e.g. train=data/x/*.parquet), got {text!r}")
    return split, pattern


def _shown(value: Any) -> Any:
    """A default as help shows it: strings that are empty or hold newlines quoted, counts with commas."""
    if isinstance(value, str) and ("\n" in value or not value):
        return repr(value)
    if isinstance(value, dict):
        return "see config_schema.yaml"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return value


def add_config_flag(
    parser: argparse.ArgumentParser,
    flag: str,
    key: str,
    help: str = "",
    *,
    source: str | None = None,
    sources: list[str] | tuple[str, ...] | None = None,
    **kwargs,
) -> None:
    """Add `--flag` bound to dotted config `key`; its help shows the schema default.

    `key` may contain "{source}" (e.g. "sources.{source}.max_train_tokens"): it is filled in from
    `args.source` when the config is resolved; help then shows the default for `source` if given, or
    every default of `sources` (those that have the key). A key whose value is a mapping
    (demo_data_files) takes repeated `--flag SPLIT=GLOB`.
    """
    defaults = schema_defaults()
    per_source = {}
    for name in sources or ():
        try:
            per_source[name] = _get(defaults, key.format(source=name))
        except KeyError:
            continue
    try:
        default = _get(defaults, key.format(source=source)) if ("{" not in key or source) else None
    except KeyError:
        default = None
    if default is None and per_source and source is None:
        default = next(iter(per_source.values()))  # for the flag's kind (bool, mapping); help lists them all
    if isinstance(default, bool):
        kwargs.setdefault("action", argparse.BooleanOptionalAction)
    if isinstance(default, dict) and key.endswith("data_files"):
        kwargs.setdefault("action", "append")
        kwargs.setdefault("type", _split_glob)
        kwargs.setdefault("metavar", "SPLIT=GLOB")
    if "type" in kwargs and kwargs.get("action") is None:
        kwargs["type"] = _nullable(kwargs["type"])
    where = key if "{" not in key or source else key + ", per source"
    if per_source and source is None:
        listed = "; ".join(f"{name}={_shown(value)}" for name, value in per_source.items())
        text = f"{help} [config: {where}; defaults: {listed}]"
    else:
        text = f"{help} [config: {where}; default: {_shown(default)}]"
    parser.add_argument(flag, default=None, help=text.strip(), **kwargs)
    dest = flag.lstrip("-").replace("-", "_")
    getattr(parser, _FLAG_KEYS, None) or setattr(parser, _FLAG_KEYS, {})
    getattr(parser, _FLAG_KEYS)[dest] = key


def resolve_config(args: argparse.Namespace, parser: argparse.ArgumentParser) -> dict:
    """Config file (if any) + every flag that was set, validated."""
    spec = getattr(args, "spec", None)
    path = getattr(args, "config_file", None)
    if path is None and spec is None and os.path.exists("config.yaml"):
        path = "config.yaml"
    overrides: dict = {}
    for dest, key in getattr(parser, _FLAG_KEYS, {}).items():
        value = getattr(args, dest, None)
        if value is None:
            continue
        if "{source}" in key:
            key = key.format(source=args.source)
        if value is NULL:
            value = None
        elif isinstance(value, list) and value and isinstance(value[0], tuple):
            value = dict(value)  # --data-files SPLIT=GLOB, repeated
        _set(overrides, key, value)
    if path:
        return load_config(path, deep_merge(spec or {}, overrides))
    return prepare_config(deep_merge(spec or {}, overrides), source="--spec and flags" if spec else "command line")


# Errors a user can fix: shown as one line, no traceback (set NIELS_GPT_TRACEBACK=1 to see it).
USER_ERRORS: tuple[type[BaseException], ...] = (ConfigError, ValueError, OSError)


def run_cli(main: Callable[[list[str] | None], int], argv: list[str] | None = None) -> int:
    try:
        return main(argv)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except USER_ERRORS as e:
        if os.environ.get("NIELS_GPT_TRACEBACK"):
            raise
        print(f"error: {e}", file=sys.stderr)
        return 1
