"""`verify`, `info` and `inspect` as commands: flags, defaults, what goes to stdout and what to stderr."""

from __future__ import annotations

import json

import pytest

from niels_gpt.cache.cli import main
from niels_gpt.command_line import run_cli
from niels_gpt.tokenizer import train_sentencepiece
from tests.support.cli import cache_cli, row, verify_cli
from tests.support.corpus import tiny_corpus


def test_missing_cache_is_one_error_that_says_how_to_build(tmp_path, capsys):
    rc = run_cli(main, ["verify", str(tmp_path / "nope")])
    err = capsys.readouterr().err
    assert rc == 1 and err.count("\n") == 1
    assert err.startswith("error: ") and "snakemake" in err


def test_tokenizer_flag_overrides_the_tree_tokenizer(tree, capsys, tmp_path):
    other = train_sentencepiece(tiny_corpus(200, seed=9), tmp_path / "other.model", vocab_size=380, num_threads=1)
    rc, out = verify_cli(capsys, tree / "sft" / "y", "--quick", "--tokenizer", tmp_path / "other.model")
    assert rc == 1 and other.sha256 in out


def test_verify_and_info_print_what_they_are_asked_for_on_stdout_only(tree, capsys):
    rc, out, err = cache_cli(capsys, "verify", tree, "--quick")
    assert rc == 0 and err == "" and out.splitlines()[-1].startswith(f"verify {tree}: 5 ok")
    rc, out, err = cache_cli(capsys, "info", tree, "--json")
    assert rc == 0 and err == "" and json.loads(out)["rows"]
    rc, out, err = cache_cli(capsys, "inspect", tree / "streams" / "wiki_val.bin", "--n", 1)
    assert rc == 0 and err == "" and "--- [1] bytes" in out


def test_the_path_defaults_to_cache_dir_of_config_yaml(tree, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "config.yaml").write_text(f"cache_dir: {tree}\n")
    rc, out, _ = cache_cli(capsys, "verify", "--quick")
    # the config's tree must hold what the config builds: its sources are not x / y / off
    assert rc == 1 and f"verify {tree}: 5 ok, 11 failed" in out
    assert (
        f"sft/primer            FAIL: missing: never built, or its build failed; build it: "
        f"snakemake {tree}/sft/primer/meta.json"
    ) in out.splitlines()
    rc, out, _ = cache_cli(capsys, "info")
    assert rc == 0 and row(out, "sft/y", "train", "yes")


@pytest.mark.parametrize("command", ["verify", "info", "inspect"])
def test_every_command_takes_the_tokenizer_flag_with_its_default(capsys, command):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--tokenizer MODEL" in text and "(default: {cache}/tokenizer/spm.model of PATH's cache tree)" in text
