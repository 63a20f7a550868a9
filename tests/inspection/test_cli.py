"""`verify`, `info` and `inspect` as commands: flags, defaults, what goes to stdout and what to stderr."""

from __future__ import annotations

from niels_gpt.cache.cli import main
from niels_gpt.command_line import run_cli
from niels_gpt.tokenizer import train_sentencepiece
from tests.support.cli import verify_cli
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
