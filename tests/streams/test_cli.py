"""streams/cli.py: `build-streams --source ... --out-dir ...` with config keys from --set."""

from __future__ import annotations

import json


def test_cli_build_streams(demo, tmp_path, monkeypatch, capsys):
    from niels_gpt.cache.cli import main
    from niels_gpt.command_line import run_cli

    monkeypatch.chdir(tmp_path)  # no config.yaml here: built-in defaults + flags
    primer = demo["sources"]["primer"]["text"]
    out = tmp_path / "streams"
    args = [
        "build-streams",
        "--source",
        "primer",
        "--out-dir",
        str(out),
        "--set",
        f"sources.primer.text={primer}",
        "--set",
        "streams.T=8",
    ]
    assert run_cli(main, args + ["--set", "sources.primer.val_frac=0.3", "--set", "seed=1"]) == 0
    assert "primer val:" in capsys.readouterr().err
    meta = json.loads((out / "primer_val.meta.json").read_text())
    assert meta["val_frac"] == 0.3 and meta["seed"] == 1
    assert (out / "primer_val.bin").read_bytes().count(b"assistant:") == 3
    assert run_cli(main, args + ["--set", "streams.T=100000"]) == 1
    assert "shorter than T+1 = 100,001 bytes" in capsys.readouterr().err


def test_cli_out_dir_defaults_to_the_streams_folder_of_cache_dir(demo, tmp_path, monkeypatch, capsys):
    from niels_gpt.cache.cli import main
    from niels_gpt.command_line import run_cli

    monkeypatch.chdir(tmp_path)
    primer = demo["sources"]["primer"]["text"]
    args = ["build-streams", "--source", "primer", "--set", f"sources.primer.text={primer}", "--set", "streams.T=8"]
    assert run_cli(main, args + ["--set", f"cache_dir={tmp_path / 'c'}"]) == 0
    assert sorted(p.name for p in (tmp_path / "c" / "streams").iterdir()) == [
        "primer_train.bin",
        "primer_train.meta.json",
        "primer_val.bin",
        "primer_val.meta.json",
    ]
    assert capsys.readouterr().out == ""  # milestones go to stderr
