"""`build-tokenizer` (tokenizer/cli.py): --out-dir defaults to {cache_dir}/tokenizer, milestones on stderr,
a user error in one line."""

from __future__ import annotations

from niels_gpt.cache.cli import main
from niels_gpt.command_line import run_cli
from niels_gpt.meta import read_meta


def test_cli_reports_a_missing_model_path_in_one_line(tmp_path, capsys):
    rc = run_cli(
        main,
        ["build-tokenizer", "--out-dir", str(tmp_path), "--set", f"tokenizer.model_path={tmp_path / 'nope.model'}"],
    )
    assert rc == 1
    err = capsys.readouterr().err
    assert err.startswith("error: tokenizer.model_path") and "Traceback" not in err


def test_out_dir_defaults_to_the_tokenizer_folder_of_cache_dir(tmp_path, tiny_tokenizer, tiny_tokenizer_path, capsys):
    cache = tmp_path / "elsewhere"
    argv = ["build-tokenizer", "--set", f"cache_dir={cache}", "--set", f"tokenizer.model_path={tiny_tokenizer_path}"]
    assert run_cli(main, [*argv, "--spec", "{}"]) == 0
    assert read_meta(cache / "tokenizer" / "meta.json")["sha256"] == tiny_tokenizer.sha256
    assert (cache / "tokenizer" / "spm.model").read_bytes() == open(tiny_tokenizer_path, "rb").read()
    out, err = capsys.readouterr()
    assert out == "" and f"-> {cache / 'tokenizer' / 'spm.model'}" in err
