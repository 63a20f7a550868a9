"""What every CLI command shares: --spec / --set refused with the reason, one `error:` line for a user
error, Ctrl-C -> exit 130 with nothing half-built left looking complete."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from niels_gpt.cache.cli import main
from niels_gpt.command_line import run_cli

ROOT = Path(__file__).resolve().parents[2]
STREAMS = ["build-streams", "--source", "primer", "--out-dir"]


@pytest.mark.parametrize(
    "flag, value, reason",
    [
        ("--spec", "{seed: 7}", "argument --spec: not valid JSON (Expecting property name enclosed in double quotes"),
        ("--spec", "[1, 2]", "argument --spec: expected a JSON object of config values, got list"),
        ("--set", "seed", "argument --set: expected KEY=VALUE with a dotted config key (e.g. seed=7), got 'seed'"),
        ("--set", "=7", "argument --set: expected KEY=VALUE with a dotted config key (e.g. seed=7), got '=7'"),
        ("--set", "seed=[7", "argument --set: seed: value '[7' is not valid YAML"),
    ],
)
def test_a_malformed_spec_or_set_is_a_usage_error_naming_the_flag(tmp_path, capsys, flag, value, reason):
    with pytest.raises(SystemExit) as e:
        main([*STREAMS, str(tmp_path), flag, value])
    assert e.value.code == 2 and reason in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["--spec", '{"sources": {"primer": {"delimitter": "x"}}}'],
            "error: --spec and flags: invalid configuration:\n  - unknown key 'sources.primer.delimitter' "
            "(did you mean 'delimiter'?); allowed keys here:",
        ),
        (
            ["--set", "streams.T=0"],
            "error: command line: invalid configuration:\n  - key 'streams.T': 0 is less than the minimum of 1",
        ),
        (
            ["--set", "streams=3", "--set", "streams.T=8"],
            "error: --set streams.T: 'streams' is set to a value, so it cannot also hold keys",
        ),
    ],
)
def test_a_spec_or_set_value_the_schema_refuses_is_one_error_line(tmp_path, capsys, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)  # no config.yaml here: the schema defaults
    assert run_cli(main, [*STREAMS, str(tmp_path / "out"), *args]) == 1
    err = capsys.readouterr().err
    assert err.startswith(message) and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_traceback_on_request(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NIELS_GPT_TRACEBACK", "1")
    with pytest.raises(ValueError, match="unknown key 'sources.primer.delimitter'"):
        run_cli(main, [*STREAMS, str(tmp_path), "--set", "sources.primer.delimitter=x"])


def test_ctrl_c_exits_130_and_leaves_no_cache_that_looks_complete(tmp_path, tiny_tokenizer_path):
    """A real SIGINT to `python -m niels_gpt.cache.cli build-all` while it builds a pretrain cache."""
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"tokenizer": {"model_path": tiny_tokenizer_path}}))
    cache = tmp_path / "cache"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    cmd = [sys.executable, "-m", "niels_gpt.cache.cli", "build-all", "--demo", "--config-file", str(config)]
    proc = subprocess.Popen(
        [*cmd, "--cache-dir", str(cache)], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        lines = []
        for line in proc.stdout:  # wait until the first pretrain cache is being built
            lines.append(line)
            if line.startswith("== pretrain/"):
                proc.send_signal(signal.SIGINT)
                break
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    building = [
        line.split("/", 1)[1].strip() for line in lines + out.splitlines(True) if line.startswith("== pretrain/")
    ]
    assert proc.returncode == 130, err[-2000:]
    assert err.rstrip().endswith("interrupted") and "Traceback" not in err
    interrupted = cache / "pretrain" / building[-1]
    assert not (interrupted / "meta.json").exists() and not list(interrupted.rglob("shard_*.bin"))
    assert (cache / "tokenizer" / "meta.json").exists()  # what finished before stays
