"""Config: schema defaults == config.yaml, clear errors for typos and wrong types, CLI-string coercion."""

from __future__ import annotations

import ast
import fnmatch
import re
from pathlib import Path

import pytest
import yaml

from niels_gpt.config import (
    SCHEMA_PATH,
    ConfigError,
    deep_merge,
    load_config,
    load_schema,
    prepare_config,
    schema_defaults,
)

ROOT = Path(__file__).resolve().parents[2]


def test_config_yaml_states_every_default():
    with open(ROOT / "config.yaml") as f:
        stated = yaml.safe_load(f)
    assert stated["cache_dir"] is None  # null: cache/ for the real build, cache-demo/ for the demo
    assert prepare_config(stated) == schema_defaults() and schema_defaults()["cache_dir"] == "cache"
    assert {**stated, "cache_dir": "cache"} == schema_defaults()  # every other key with its default, as is


def test_the_demo_and_the_real_build_default_to_their_own_cache_folders():
    assert prepare_config({"demo": True})["cache_dir"] == "cache-demo"
    assert prepare_config({"demo": "true"})["cache_dir"] == "cache-demo"  # as --config demo=true arrives
    assert prepare_config({})["cache_dir"] == "cache"
    assert prepare_config({"demo": True, "cache_dir": "mine"})["cache_dir"] == "mine"


def test_a_vocabulary_beyond_uint16_and_a_tokenizer_with_nothing_to_train_on_are_refused():
    with pytest.raises(ConfigError, match="'tokenizer.vocab_size': 65533 is greater than the maximum of 65532"):
        prepare_config({"tokenizer": {"vocab_size": 65533}})
    assert prepare_config({"tokenizer": {"vocab_size": 65532}})["tokenizer"]["vocab_size"] == 65532
    off = {name: {"enabled": False} for name in ("fineweb_edu", "wikitext", "gutenberg", "roam")}
    with pytest.raises(ConfigError, match="no pretrain source is enabled to train the tokenizer on"):
        prepare_config({"sources": off})
    prepare_config({"sources": off, "tokenizer": {"model_path": "mine.model"}})  # an adopted model needs none


def test_a_mixture_from_the_command_line_replaces_the_files_mixture():
    from niels_gpt.config import replace_mixtures

    config = {"sft": {"mix": {"primer": 0.1, "oasst1": 0.7, "dolly15k": 0.2}, "t_max": 9}}
    replace_mixtures(config, {"sft": {"mix": {"primer": 0.3, "oasst1": 0.7}}, "seed": 1})
    assert config["sft"] == {"mix": {"primer": 0.3, "oasst1": 0.7}, "t_max": 9}
    replace_mixtures(config, {"sft": {"t_max": 5}})  # no mixture given: nothing replaced
    assert config["sft"]["mix"] == {"primer": 0.3, "oasst1": 0.7}


def _walk(node, path=""):
    yield path, node
    for key, sub in node.get("properties", {}).items():
        yield from _walk(sub, f"{path}.{key}".lstrip("."))


def test_every_schema_key_has_description_and_default():
    schema = load_schema()
    for path, node in _walk(schema):
        if not path:
            continue
        assert "description" in node or "$ref" in node, path
        assert "default" in node, path
    for path, node in _walk(schema):
        if node.get("type") == "object" and "properties" in node:
            assert node.get("additionalProperties") is False, path


def test_misspelt_key_names_the_key_and_suggests():
    with pytest.raises(
        ConfigError, match=r"unknown key 'sources.oasst1.max_mesages' \(did you mean 'max_messages'\?\)"
    ):
        prepare_config({"sources": {"oasst1": {"max_mesages": 3}}})


def test_wrong_type_names_the_key_and_the_expected_type():
    with pytest.raises(ConfigError, match=r"tokenizer.vocab_size.*expected integer"):
        prepare_config({"tokenizer": {"vocab_size": "lots"}})


def test_command_line_strings_are_coerced():
    cfg = prepare_config({"demo": "true", "seed": "7", "sources": {"wikitext": {"max_train_tokens": "null"}}})
    assert cfg["demo"] is True and cfg["seed"] == 7
    assert cfg["sources"]["wikitext"]["max_train_tokens"] is None


def test_mixture_must_sum_to_one():
    with pytest.raises(ConfigError, match="sum to 1"):
        prepare_config({"sft": {"mix": {"primer": 0.5, "oasst1": 0.2, "dolly15k": 0.2}}})


def test_required_streams_must_be_enabled():
    with pytest.raises(ConfigError, match="required_sources"):
        prepare_config({"streams": {"enabled_sources": ["wiki"], "required_sources": ["wiki", "roam"]}})


def test_load_config_merges_overrides(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("seed: 3\ntokenizer:\n  vocab_size: 500\n")
    cfg = load_config(path, {"tokenizer": {"model_type": "bpe"}})
    assert cfg["seed"] == 3 and cfg["tokenizer"] == {
        **schema_defaults()["tokenizer"],
        "vocab_size": 500,
        "model_type": "bpe",
    }


def test_schema_file_ships_in_the_package_data():
    """An installed niels_gpt reads config_schema.yaml beside config.py: setuptools must package it."""
    pyproject = (ROOT / "pyproject.toml").read_text()
    patterns = re.search(r"\[tool\.setuptools\.package-data\]\s*niels_gpt\s*=\s*\[([^\]]*)\]", pyproject).group(1)
    assert any(fnmatch.fnmatch(SCHEMA_PATH.name, p.strip().strip("\"'")) for p in patterns.split(","))
    assert SCHEMA_PATH.parent == ROOT / "niels_gpt" and load_schema()["properties"]["seed"]["default"] == 42


def test_mixture_names_must_be_known_sources():
    with pytest.raises(ConfigError, match=r"sft.mix.*unknown source\(s\) \['dolly'\]"):
        prepare_config({"sft": {"mix": {"primer": 0.1, "oasst1": 0.7, "dolly": 0.2}}})


def schema_keys(node: dict, path: str = ""):
    """Dotted names of the schema's leaf keys (a section with properties is not a key of its own)."""
    if "properties" not in node:
        yield path
        return
    for key, sub in node["properties"].items():
        yield from schema_keys(sub, f"{path}.{key}".lstrip("."))


def test_every_config_key_has_a_test_of_its_effect():
    """tests/README.md maps every schema key to the tests of its effect; the tests must exist."""
    rows = re.findall(r"^\| `([\w.]+)` \| (.+) \|$", (ROOT / "tests" / "README.md").read_text(), re.M)
    mapped = {key: [t.strip() for t in tests.split(",")] for key, tests in rows}
    keys = list(schema_keys(load_schema()))
    assert len(keys) > 70 and len(mapped) == len(rows), "a key listed twice in tests/README.md"
    assert sorted(set(keys) - set(mapped)) == [], "schema keys without a test of their effect in tests/README.md"
    assert sorted(set(mapped) - set(keys)) == [], "tests/README.md lists keys the schema does not have"
    for key, refs in mapped.items():
        for ref in refs:
            file, _, name = ref.partition("::")
            source = (ROOT / "tests" / file).read_text()
            tests = {n.name for n in ast.parse(source).body if isinstance(n, ast.FunctionDef)}
            assert name in tests, f"{key}: {ref} is not a test"
            assert key.rsplit(".", 1)[-1] in source, f"{key}: {file} never names it"


@pytest.mark.parametrize(
    "given, key, want",
    [
        *[({"demo": word}, "demo", True) for word in ("true", "True", "YES", "yes", "1")],
        *[({"demo": word}, "demo", False) for word in ("false", "FALSE", "no", "No", "0")],
        *[
            ({"sources": {"wikitext": {"max_train_tokens": w}}}, "sources.wikitext.max_train_tokens", None)
            for w in ("null", "None", "~", "")
        ],
        ({"sources": {"wikitext": {"max_train_tokens": "1_000"}}}, "sources.wikitext.max_train_tokens", 1000),
        ({"seed": "1"}, "seed", 1),  # an integer key: "1" is a number, not a boolean
        ({"seed": "0"}, "seed", 0),
        ({"sources": {"fineweb_edu": {"val_doc_prob": "0.5"}}}, "sources.fineweb_edu.val_doc_prob", 0.5),
        (
            {"sft": {"mix": {"primer": "0.5", "oasst1": "0.25", "dolly15k": "0.25"}}},
            "sft.mix",
            {"primer": 0.5, "oasst1": 0.25, "dolly15k": 0.25},
        ),
        ({"cache_dir": "true"}, "cache_dir", "true"),  # a string key keeps the string
        ({"tokenizer": {"model_path": "null"}}, "tokenizer.model_path", "null"),  # string or null: a string
    ],
)
def test_command_line_strings_are_coerced_to_the_type_the_schema_asks(given, key, want):
    value = prepare_config(given)
    for part in key.split("."):
        value = value[part]
    assert value == want and type(value) is type(want)


@pytest.mark.parametrize(
    "given, message",
    [
        ({"seed": "none"}, "key 'seed': expected integer, got str 'none'"),
        ({"tokenizer": {"vocab_size": "1.5"}}, "key 'tokenizer.vocab_size': expected integer, got str '1.5'"),
        ({"tokenizer": {"model_path": 5}}, "key 'tokenizer.model_path': expected string or null, got int 5"),
        ({"tokenizer": "small"}, "key 'tokenizer': expected object, got str 'small'"),
        (
            {"tokenzier": {}},
            "unknown key 'tokenzier' (did you mean 'tokenizer'?); allowed keys here: cache_dir, decontamination, "
            "dedup, demo, ",
        ),
        (
            {"zzz": 1, "qqq": 2},
            "unknown key 'qqq'; unknown key 'zzz'; allowed keys here: cache_dir, decontamination, dedup, demo, hub, ",
        ),
        (
            {"streams": {"p_train": {"wiki": 0.5, "roam": 0.5, "books": 0.0}}},
            "key 'streams.p_train': unknown source(s) ['books']; expected some of wiki, roam, primer",
        ),
        (
            {"sft": {"mix": {"primer": 0.1, "oasst1": 0.7, "dolly": 0.2}}},
            "  - key 'sft.mix': unknown source(s) ['dolly']; expected some of dolly15k, oasst1, primer",
        ),
        (
            {"sft": {"mix": {"primer": 0.5, "oasst1": 0.2, "dolly15k": 0.2}}},
            "  - key 'sft.mix': probabilities must sum",
        ),
        ({"streams": {"enabled_sources": ["wiki", "web"]}}, "key 'streams.enabled_sources': unknown source(s) ['web']"),
        ({"streams": {"required_sources": ["web"]}}, "key 'streams.required_sources': unknown source(s) ['web']"),
        (
            {"streams": {"p_train": {"wiki": 0.5, "roam": 0.2, "primer": 0.2}}},
            "key 'streams.p_train': probabilities must sum to 1, got 0.9 ",
        ),
    ],
)
def test_each_refused_value_is_named_with_what_was_expected(given, message):
    with pytest.raises(ConfigError) as e:
        prepare_config(given)
    assert str(e.value).startswith("config: invalid configuration:\n  - ") and message in str(e.value)


def test_several_problems_are_listed_in_key_order():
    with pytest.raises(ConfigError) as e:
        prepare_config({"tokenizer": {"vocab_size": "x"}, "leakage": {"n_tokens": "y"}}, source="my.yaml")
    assert str(e.value) == (
        "my.yaml: invalid configuration:\n"
        "  - key 'leakage.n_tokens': expected integer, got str 'y'\n"
        "  - key 'tokenizer.vocab_size': expected integer, got str 'x'"
    )


def test_results_share_nothing_with_the_input_or_the_defaults():
    given = {"sources": {"roam": {"val_frac": "0.2"}}}
    cfg = prepare_config(given)
    assert given == {"sources": {"roam": {"val_frac": "0.2"}}}  # the caller's dict is not coerced in place
    cfg["sources"]["fineweb_edu"]["demo_data_files"]["train"] = "elsewhere/*.parquet"
    cfg["sft"]["mix"]["primer"] = 0.9
    assert (
        schema_defaults()["sources"]["fineweb_edu"]["demo_data_files"]["train"] == "data/sample/fineweb_edu/*.parquet"
    )
    assert prepare_config({})["sft"]["mix"]["primer"] == 0.1
    base, override = {"a": {"b": [1]}, "c": {"d": 1}}, {"c": {"e": [2]}}
    merged = deep_merge(base, override)
    merged["a"]["b"].append(3)
    merged["c"]["e"].append(4)
    assert (base, override) == ({"a": {"b": [1]}, "c": {"d": 1}}, {"c": {"e": [2]}})


def test_load_config_reads_config_yaml_here_and_names_the_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "config.yaml").write_text("seed: 5\n")
    assert load_config()["seed"] == 5
    (tmp_path / "bad.yaml").write_text("seed: many\n")
    with pytest.raises(ConfigError, match=r"^bad.yaml: invalid configuration:\n  - key 'seed': expected integer"):
        load_config("bad.yaml")
    with pytest.raises(ConfigError, match=r"^nope.yaml: config file not found$"):
        load_config("nope.yaml")
