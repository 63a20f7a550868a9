"""scripts.config_table: one README row per configuration key, with the schema's default; markers required."""

from __future__ import annotations

import re

import pytest

from niels_gpt.config import prepare_config
from scripts.config_table import BEGIN, END, config_table, readme_with_table


def _rows() -> dict[str, str]:
    """{dotted key: default cell} of the generated table."""
    lines = config_table().splitlines()
    assert lines[:2] == ["| key | default | meaning |", "| --- | --- | --- |"]
    rows = [re.match(r"\| `([^`]+)` \| (`.*?`) \| ", line) for line in lines[2:]]
    assert all(rows), lines
    keys = [m.group(1) for m in rows]
    assert len(keys) == len(set(keys)), "a key listed twice"
    return {m.group(1): m.group(2) for m in rows}


def test_every_row_names_a_key_of_the_validated_config():
    config = prepare_config({})
    for dotted in _rows():
        node = config
        for part in dotted.split("."):
            assert isinstance(node, dict) and part in node, f"{dotted}: not in the validated default config"
            node = node[part]


def test_defaults_are_the_validated_defaults():
    config, rows = prepare_config({}), _rows()
    assert rows["seed"] == f"`{config['seed']}`" and rows["demo"] == "`false`"
    assert rows["cache_dir"] == "`null`" and config["cache_dir"] == "cache"  # null: cache/ or cache-demo/


def test_the_table_replaces_only_what_stands_between_the_markers():
    text = f"intro\n{BEGIN}\nstale table\n{END}\noutro\n"
    out = readme_with_table(text)
    assert out == f"intro\n{BEGIN}\n{config_table()}\n{END}\noutro\n"
    assert readme_with_table(out) == out


def test_a_readme_without_the_markers_is_refused():
    with pytest.raises(SystemExit, match="markers"):
        readme_with_table("no table here\n")


# What a schema node may hold. An unquoted comma inside a YAML flow mapping (`{description: a (b, c)., ...}`)
# ends the description at the comma and turns the rest into a key of its own: any other key is such a cut.
SCHEMA_KEYWORDS = {
    "$ref", "$schema", "additionalProperties", "default", "definitions", "description", "enum", "exclusiveMinimum",
    "exclusiveMaximum", "maxLength", "multipleOf",
    "items", "maximum", "minimum", "minItems", "patternProperties", "propertyNames", "properties", "required",
    "title", "type", "uniqueItems", "maxItems", "minLength", "oneOf", "anyOf", "allOf", "not", "pattern", "const",
}  # fmt: skip


def test_no_description_is_cut_at_a_comma():
    from niels_gpt.config import load_schema

    def cuts(node: dict, path: str):
        for key, value in node.items():
            if key in ("properties", "definitions", "patternProperties"):
                for name, sub in value.items():
                    yield from cuts(sub, f"{path}.{name}")
            elif key not in SCHEMA_KEYWORDS:
                yield f"{path}: {key!r}"
            elif key in ("items", "not") and isinstance(value, dict):
                yield from cuts(value, f"{path}[]")

    assert list(cuts(load_schema(), "")) == []
    revision = config_table().split("| `sources.fineweb_edu.revision` | `null` | ", 1)[1].split("\n", 1)[0]
    assert revision == "Hub revision (branch, tag or commit); null reads the default branch. |"
