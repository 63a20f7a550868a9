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


def test_the_two_space_parts_joined_give_the_whole_audits_bytes(planted_tree, tmp_path, capsys):
    """The workflow's two steps (one part per space, then the join with the gate) write the same leakage.json
    as one whole audit; the bytes part reads no token cache and needs no tokenizer."""
    where = ["--set", f"cache_dir={planted_tree}"]
    assert cache_cli(capsys, "leakage", *where, "--out", tmp_path / "whole.json")[0] == 0
    for space in ("bytes", "tokens"):
        rc, _, stderr = cache_cli(capsys, "leakage", "--space", space, *where, "--out", tmp_path / f"{space}.json")
        assert rc == 0 and stderr.splitlines()[-1] == f"leakage audit, {space} -> {tmp_path / f'{space}.json'}"
        names = {line.split(" val: ")[0] for line in stderr.splitlines() if " val: " in line}
        assert names and {n.split("/")[0] for n in names} == ({"streams"} if space == "bytes" else {"pretrain", "sft"})
    parts = [tmp_path / "bytes.json", tmp_path / "tokens.json"]  # any order
    rc, _, stderr = cache_cli(capsys, "leakage", "--parts", *parts, *where, "--out", tmp_path / "joined.json")
    assert rc == 0 and (tmp_path / "joined.json").read_bytes() == (tmp_path / "whole.json").read_bytes()
    assert any(line.startswith("streams/wiki val: ") for line in stderr.splitlines())

    gate = ["--set", "leakage.max_fraction=0.02"]
    rc, _, stderr = cache_cli(capsys, "leakage", "--parts", *parts, *where, *gate, "--out", tmp_path / "gated.json")
    assert rc == 1 and "error: leakage gate: " in stderr and not (tmp_path / "gated.json").exists()


def test_a_missing_stale_or_unreadable_part_is_one_clear_error(planted_tree, tmp_path, capsys):
    where = ["--set", f"cache_dir={planted_tree}"]
    assert cache_cli(capsys, "leakage", "--space", "bytes", *where, "--out", tmp_path / "bytes.json")[0] == 0
    out = ["--out", tmp_path / "leakage.json"]
    rc, _, stderr = cache_cli(capsys, "leakage", "--parts", tmp_path / "bytes.json", *where, *out)
    assert rc == 1 and stderr.strip().splitlines()[-1] == "error: leakage parts: no part for the tokens space"
    rc, _, stderr = cache_cli(
        capsys, "leakage", "--parts", tmp_path / "bytes.json", *where, "--set", "leakage.n_bytes=40", *out
    )
    assert rc == 1 and "audited bytes with n = 50, but leakage.n_bytes is 40" in stderr
    (tmp_path / "tokens.json").write_text("{not json")
    rc, _, stderr = cache_cli(
        capsys, "leakage", "--parts", tmp_path / "bytes.json", tmp_path / "tokens.json", *where, *out
    )
    assert rc == 1 and f"{tmp_path / 'tokens.json'}: cannot read a leakage part" in stderr
    rc, _, stderr = cache_cli(capsys, "leakage", "--space", "tokens", *where)
    assert rc == 1 and "leakage --space: give --out" in stderr
    assert not (tmp_path / "leakage.json").exists()
