"""Load, normalize and validate the pipeline configuration against `config_schema.yaml`.

`prepare_config` is what the Snakefile and the CLIs call: it coerces command-line strings
(`--config demo=true` arrives as the string 'true'), fills every default from the schema, and
validates. A misspelt key or a wrong type stops with the key's dotted name and what was expected.
"""

from __future__ import annotations

import copy
import difflib
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

SCHEMA_PATH = Path(__file__).with_name("config_schema.yaml")


class ConfigError(ValueError):
    """A configuration value is missing, misspelt or of the wrong type."""


@lru_cache(maxsize=1)
def load_schema() -> dict:
    import yaml

    with open(SCHEMA_PATH, encoding="utf-8") as f:
        return yaml.safe_load(f)


def _resolve(node: dict, schema: dict) -> dict:
    """A schema node with its `$ref` merged in (sibling keys win, as defaults live beside refs)."""
    ref = node.get("$ref")
    if not ref:
        return node
    target = schema
    for part in ref.lstrip("#/").split("/"):
        target = target[part]
    return {**_resolve(target, schema), **{k: v for k, v in node.items() if k != "$ref"}}


def _types(node: dict) -> list[str]:
    t = node.get("type", [])
    return [t] if isinstance(t, str) else list(t)


def _coerce(value: Any, node: dict) -> Any:
    """Turn a command-line string into the type the schema asks for, when it unambiguously is one."""
    if not isinstance(value, str):
        return value
    types = _types(node)
    if "string" in types:
        return value
    low = value.strip().lower()
    if "boolean" in types and low in ("true", "false", "yes", "no", "1", "0"):
        return low in ("true", "yes", "1")
    if "null" in types and low in ("null", "none", "~", ""):
        return None
    if "integer" in types:
        try:
            return int(value.replace("_", ""))
        except ValueError:
            pass
    if "number" in types:
        try:
            return float(value)
        except ValueError:
            pass
    return value


def _fill(config: Any, node: dict, schema: dict) -> Any:
    """Coerce strings and fill defaults, recursively, following the schema."""
    node = _resolve(node, schema)
    config = _coerce(config, node)
    if not isinstance(config, dict) or "object" not in _types(node):
        return config
    props = node.get("properties", {})
    for key, sub in props.items():
        sub = _resolve(sub, schema)
        if key not in config and "default" in sub:
            config[key] = copy.deepcopy(sub["default"])
        if key in config:
            config[key] = _fill(config[key], sub, schema)
    extra = node.get("additionalProperties")
    if isinstance(extra, dict):
        for key in config:
            if key not in props:
                config[key] = _fill(config[key], extra, schema)
    return config


def _message(err) -> str:
    path = ".".join(str(p) for p in err.absolute_path) or "(top level)"
    if err.validator == "additionalProperties":
        allowed = sorted(err.schema.get("properties", {}))
        unknown = sorted(set(err.instance) - set(allowed))
        parts = []
        for key in unknown:
            near = difflib.get_close_matches(key, allowed, n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            where = f"{path}.{key}" if path != "(top level)" else key
            parts.append(f"unknown key {where!r}{hint}")
        return "; ".join(parts) + f"; allowed keys here: {', '.join(allowed)}"
    if err.validator == "type":
        want = err.validator_value
        want = " or ".join(want) if isinstance(want, list) else want
        return f"key {path!r}: expected {want}, got {type(err.instance).__name__} {err.instance!r}"
    return f"key {path!r}: {err.message}"


def _check_sources(config: dict) -> list[str]:
    """Source names in mixtures and stream lists must be the registry's; weights sum to 1; a tokenizer to
    train has a pretrain source to sample from (checked here, before any job runs, not by the job)."""
    from niels_gpt.data.registry import PRETRAIN_SOURCES, SFT_SOURCES, STREAM_SOURCES

    problems = []
    for path, names, known in (
        ("sft.mix", config["sft"]["mix"], SFT_SOURCES),
        ("streams.p_train", config["streams"]["p_train"], STREAM_SOURCES),
        ("streams.enabled_sources", config["streams"]["enabled_sources"], STREAM_SOURCES),
        ("streams.required_sources", config["streams"]["required_sources"], STREAM_SOURCES),
    ):
        unknown = sorted(set(names) - set(known))
        if unknown:
            problems.append(f"key {path!r}: unknown source(s) {unknown}; expected some of {', '.join(known)}")
    for path, mix in (("sft.mix", config["sft"]["mix"]), ("streams.p_train", config["streams"]["p_train"])):
        total = sum(mix.values())
        if abs(total - 1.0) > 1e-6:
            problems.append(f"key {path!r}: probabilities must sum to 1, got {total:.6g} ({mix})")
    if config["tokenizer"]["model_path"] is None and not any(config["sources"][s]["enabled"] for s in PRETRAIN_SOURCES):
        problems.append(
            "key 'tokenizer': no pretrain source is enabled to train the tokenizer on; enable one "
            f"(sources.<name>.enabled, of {', '.join(PRETRAIN_SOURCES)}) or set tokenizer.model_path"
        )
    req, ena = config["streams"]["required_sources"], config["streams"]["enabled_sources"]
    if not set(req) <= set(ena):
        problems.append(
            f"key 'streams.required_sources': {sorted(set(req) - set(ena))} not in streams.enabled_sources {ena}"
        )
    return problems


def prepare_config(config: dict | None, *, source: str = "config") -> dict:
    """Normalize, fill defaults and validate; returns a new dict. Raises ConfigError."""
    import jsonschema

    schema = load_schema()
    filled = _fill(copy.deepcopy(config or {}), schema, schema)
    validator = jsonschema.Draft7Validator(schema)
    errors = sorted(validator.iter_errors(filled), key=lambda e: list(map(str, e.absolute_path)))
    problems = [_message(e) for e in errors]
    if not problems:
        problems = _check_sources(filled)
    if problems:
        raise ConfigError(f"{source}: invalid configuration:\n  - " + "\n  - ".join(problems))
    if filled["cache_dir"] is None:
        filled["cache_dir"] = default_cache_dir(filled["demo"])
    return filled


MIXTURES = (("sft", "mix"), ("streams", "p_train"))


def replace_mixtures(config: dict, given: Mapping) -> None:
    """Each mixture in `given` (the values of --config) replaces config's own, in place: a mixture is one
    value, not a dict to merge key by key (config.yaml's {primer, oasst1, dolly15k} + a command line's
    {primer: 0.3, oasst1: 0.7} would keep dolly15k's weight and sum to 1.2)."""
    for section, key in MIXTURES:
        value = given.get(section)
        if isinstance(value, Mapping) and isinstance(value.get(key), Mapping):
            config.setdefault(section, {})[key] = dict(value[key])


def default_cache_dir(demo: bool) -> str:
    """Where the caches go when cache_dir is null: the demo and the real build never share a folder."""
    from niels_gpt.layout import CACHE_DIR, DEMO_CACHE_DIR

    return DEMO_CACHE_DIR if demo else CACHE_DIR


def load_config(path: str | Path = "config.yaml", overrides: dict | None = None) -> dict:
    """Read a config.yaml, deep-merge `overrides` into it, then `prepare_config`."""
    import yaml

    try:
        with open(path, encoding="utf-8") as f:
            raw = yaml.safe_load(f) or {}
    except FileNotFoundError:
        raise ConfigError(f"{path}: config file not found") from None
    return prepare_config(deep_merge(raw, overrides or {}), source=str(path))


def deep_merge(base: dict, override: dict) -> dict:
    out = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def schema_defaults() -> dict:
    """The configuration with every default filled in (what an empty config.yaml means)."""
    return prepare_config({}, source="defaults")
