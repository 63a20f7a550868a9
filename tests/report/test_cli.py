"""`leakage` and `report-figures` as commands: milestones on stderr, nothing on stdout, the --tokenizer flag."""

from __future__ import annotations

import pytest

from niels_gpt.cache.cli import main
from niels_gpt.report.job import FIGURE_FAMILIES
from niels_gpt.tokenizer import train_sentencepiece
from tests.support.cli import cache_cli
from tests.support.corpus import tiny_corpus


def test_leakage_logs_one_line_per_val_split_and_where_it_wrote(planted_tree, tmp_path, capsys):
    out = tmp_path / "leakage.json"
    rc, stdout, stderr = cache_cli(capsys, "leakage", "--set", f"cache_dir={planted_tree}", "--out", out)
    assert rc == 0 and stdout == "" and out.exists()
    lines = stderr.splitlines()
    for name in ("pretrain/wikitext", "pretrain/roam", "sft/primer", "streams/wiki", "streams/roam"):
        assert any(line.startswith(f"{name} val: ") for line in lines), name
    assert "left out: pretrain/fineweb_edu: not built: sources.fineweb_edu.enabled is false" in lines
    assert lines[-1] == f"leakage audit -> {out}"


def test_report_figures_log_each_file(report_tree, tmp_path, capsys):
    rc, stdout, stderr = cache_cli(
        capsys, "report-figures", "--family", "streams", "--set", f"cache_dir={report_tree}", "--out-dir", tmp_path
    )
    assert rc == 0 and stdout == "" and stderr == f"streams figure -> {tmp_path / 'streams_mix.svg'}\n"


def test_the_tokenizer_defaults_to_the_tree_and_the_flag_replaces_it(report_tree, tmp_path, capsys, tiny_tokenizer):
    args = ["report-figures", "--family", "tokenizer", "--set", f"cache_dir={report_tree}", "--out-dir", tmp_path]
    assert cache_cli(capsys, *args)[0] == 0
    assert f"of the {tiny_tokenizer.vocab_size:,} vocabulary ids" in (tmp_path / "tokenizer_vocab_use.svg").read_text()
    other = train_sentencepiece(tiny_corpus(200, seed=9), tmp_path / "other.model", vocab_size=380, num_threads=1)
    assert cache_cli(capsys, *args, "--tokenizer", tmp_path / "other.model")[0] == 0
    assert f"of the {other.vocab_size:,} vocabulary ids" in (tmp_path / "tokenizer_vocab_use.svg").read_text()


def test_report_figures_takes_one_figure_family(capsys):
    with pytest.raises(SystemExit):
        main(["report-figures", "--family", "nope"])
    assert "invalid choice: 'nope'" in capsys.readouterr().err
    assert FIGURE_FAMILIES == ("pretrain", "sft", "tokenizer", "streams", "leakage")
