"""What every command of `python -m niels_gpt.cache.cli` shares: where its config comes from, and one
clear error line instead of a traceback.

A build command's configuration is, in order of precedence (later wins):
  1. `--config-file FILE`, else `./config.yaml` if it exists, else the schema defaults; a `--spec`
     without `--config-file` starts from the schema defaults (the Snakemake rules pass exactly the
     values a job depends on this way, so an unrelated edit of config.yaml never reaches a job);
  2. `--spec JSON`: config values as one JSON object, nested like config.yaml;
  3. `--set KEY=VALUE` (repeatable): one dotted key, the value read as YAML (`--set seed=7`,
     `--set sources.fineweb_edu.max_train_tokens=null`);
  4. the command's own flags (`--demo`, and the flags `build-all` / `build-sft-primer` document).
The result goes through `prepare_config`, so every value is validated like config.yaml.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Mapping
from typing import Any

from niels_gpt import interrupt
from niels_gpt.config import ConfigError, deep_merge, load_config, prepare_config

DEFAULT_CONFIG_FILE = "config.yaml"
# Errors a user can fix: shown as one line, no traceback (set NIELS_GPT_TRACEBACK=1 to see it).
USER_ERRORS: tuple[type[BaseException], ...] = (ConfigError, ValueError, OSError)


def _json_object(text: str) -> dict:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise argparse.ArgumentTypeError(f"not valid JSON ({e})") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object of config values, got {type(value).__name__}")
    return value


def _key_value(text: str) -> tuple[str, Any]:
    import yaml

    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE with a dotted config key (e.g. seed=7), got {text!r}")
    try:
        return key.strip(), yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError as e:
        raise argparse.ArgumentTypeError(f"{key}: value {raw!r} is not valid YAML ({e})") from None


def add_config_args(parser: argparse.ArgumentParser) -> None:
    """--config-file, --spec, --set and --demo: how any command takes configuration values."""
    group = parser.add_argument_group("configuration (see the module docstring of niels_gpt.command_line)")
    group.add_argument(
        "--config-file",
        default=None,
        metavar="FILE",
        help=f"config file to read (default: ./{DEFAULT_CONFIG_FILE} if present, else built-in defaults)",
    )
    group.add_argument(
        "--spec",
        type=_json_object,
        default=None,
        metavar="JSON",
        help="config values as one JSON object, nested like config.yaml, over the built-in defaults "
        "(not config.yaml, unless --config-file names it); the Snakemake rules use this",
    )
    group.add_argument(
        "--set",
        dest="set_values",
        type=_key_value,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set one config key (dotted, e.g. sources.roam.val_frac=0.2; YAML value); repeatable",
    )
    group.add_argument(
        "--demo",
        action="store_true",
        default=None,
        help="read the bundled offline sample data (the same as --set demo=true)",
    )


def add_num_threads_arg(parser: argparse.ArgumentParser) -> None:
    """--num-threads: how many CPUs a tokenizing build uses (its encoding worker processes)."""
    parser.add_argument(
        "--num-threads",
        type=int,
        default=-1,
        help="CPUs to tokenize with: that many encoding worker processes; the output does not depend on it "
        "(default: -1 = every CPU this process may use)",
    )


def add_tokenizer_arg(parser: argparse.ArgumentParser, *, help: str | None = None) -> None:
    """--tokenizer: the SentencePiece model a command encodes with or checks against. Its default is the
    model of the cache tree the command works on ({cache_dir}/tokenizer/spm.model): `tokenizer_path`."""
    parser.add_argument(
        "--tokenizer",
        default=None,
        metavar="MODEL",
        help=help or "SentencePiece model (default: {cache_dir}/tokenizer/spm.model)",
    )


def add_source_args(parser: argparse.ArgumentParser, *, sources: tuple[str, ...], family: str) -> None:
    """--source (one of `sources`), --tokenizer, --out-dir (default: {cache_dir}/{family}/{source}) and
    --num-threads: what a command that builds one source's cache of `family` takes."""
    parser.add_argument("--source", required=True, choices=sources, help=f"{family} source to build")
    add_tokenizer_arg(parser)
    parser.add_argument("--out-dir", default=None, help=f"cache folder (default: {{cache_dir}}/{family}/{{source}})")
    add_num_threads_arg(parser)


def tokenizer_path(args: argparse.Namespace, cache_dir: str | os.PathLike) -> str:
    """--tokenizer if given, else the model of the cache tree at `cache_dir`."""
    from niels_gpt.layout import tokenizer_model

    return args.tokenizer or tokenizer_model(cache_dir)


def nested(dotted: Mapping[str, Any]) -> dict:
    """{"a.b": 1} -> {"a": {"b": 1}}."""
    out: dict = {}
    for key, value in dotted.items():
        parts = key.split(".")
        node = out
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"--set {key}: {part!r} is set to a value, so it cannot also hold keys")
        node[parts[-1]] = value
    return out


def resolve_config(args: argparse.Namespace, flags: Mapping[str, Any] | None = None) -> dict:
    """The validated config of a command: file, --spec, --set, --demo, then `flags` ({dotted key: value},
    None values ignored), in that order of precedence."""
    overrides = dict(args.set_values)
    if args.demo:
        overrides["demo"] = True
    overrides.update({k: v for k, v in (flags or {}).items() if v is not None})
    values = deep_merge(args.spec or {}, nested(overrides))
    path = args.config_file
    if path is None and args.spec is None and os.path.exists(DEFAULT_CONFIG_FILE):
        path = DEFAULT_CONFIG_FILE
    if path:
        return load_config(path, values)
    return prepare_config(values, source="--spec and flags" if args.spec else "command line")


def _forget_interrupt_seen_by_exec() -> None:
    """Let a handled Ctrl-C exit with the code asked for. CPython (3.10 to 3.13 at least) notes a
    KeyboardInterrupt that leaves an exec() or eval() of a string (dataclasses and namedtuple build their
    methods that way, often during a lazy import) as unhandled, even when it is caught later, and under
    `python -m` ends the process by SIGINT after `sys.exit(130)`: the exit status was -2 or 130 depending
    on where the Ctrl-C landed. Every exec() of a string starts by clearing that note."""
    exec("pass")


def run_cli(main: Callable[[list[str] | None], int], argv: list[str] | None = None) -> int:
    """`main(argv)`, with Ctrl-C -> exit 130 (never followed by a published file: interrupt.py) and a user
    error -> one `error: ...` line and exit 1. Any error after a Ctrl-C is the Ctrl-C: a KeyboardInterrupt
    raised while an extension module initializes comes back as that module's ImportError (sentencepiece's
    "initialization failed")."""
    try:
        with interrupt.recorded():
            try:
                return main(argv)
            except Exception:
                interrupt.check()
                raise
    except KeyboardInterrupt:
        _forget_interrupt_seen_by_exec()
        print("interrupted", file=sys.stderr)
        return 130
    except USER_ERRORS as e:
        if os.environ.get("NIELS_GPT_TRACEBACK"):
            raise
        print(f"error: {e}", file=sys.stderr)
        return 1
