"""What every CLI command shares: where its config comes from (file < --spec < --set < --demo < its flags),
--spec / --set refused with the reason, --tokenizer and --num-threads, one `error:` line for a user error,
Ctrl-C -> exit 130 with nothing half-built left looking complete."""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from niels_gpt.cache.cli import main
from niels_gpt.command_line import (
    add_config_args,
    add_num_threads_arg,
    add_tokenizer_arg,
    nested,
    resolve_config,
    run_cli,
    tokenizer_path,
)
from niels_gpt.config import ConfigError
from niels_gpt.layout import RESUME_DIR

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
        for line in proc.stderr:  # wait until the first pretrain cache is being built (milestones: stderr)
            lines.append(line)
            if line.startswith("== pretrain/"):
                proc.send_signal(signal.SIGINT)
                break
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    building = [  # "== pretrain/fineweb_edu: raw cache (read_margin 0.1)": the raw build curation reads
        re.match(r"== pretrain/(\w+): raw cache", line).group(1)
        for line in lines + err.splitlines(True)
        if line.startswith("== pretrain/")
    ]
    assert proc.returncode == 130, err[-2000:]
    assert err.rstrip().endswith("interrupted") and "Traceback" not in err
    for interrupted in (cache / "curation" / "raw" / "pretrain" / building[-1], cache / "pretrain" / building[-1]):
        published = [p for p in interrupted.rglob("shard_*.bin") if RESUME_DIR not in p.parts]  # checkpoint stays
        assert not (interrupted / "meta.json").exists() and not published
    assert (cache / "tokenizer" / "meta.json").exists()  # what finished before stays


def test_an_error_after_a_ctrl_c_exits_130(capsys):
    """A Ctrl-C landing in an extension module's init comes back as its ImportError (seen with sentencepiece)."""
    from tests.common.test_interrupt import swallowed_ctrl_c

    def main(argv):
        swallowed_ctrl_c()  # the build went on
        raise ImportError("initialization failed")

    before = signal.getsignal(signal.SIGINT)
    assert run_cli(main, []) == 130 and capsys.readouterr().err == "interrupted\n"
    assert signal.getsignal(signal.SIGINT) is before
    with pytest.raises(ImportError):  # without a Ctrl-C it stays a bug with its traceback
        run_cli(lambda argv: __import__("no_such_module_here"), [])


def test_a_ctrl_c_that_passed_through_an_exec_still_exits_130(tmp_path):
    """Where the Ctrl-C lands decides nothing: one raised inside an exec() of a string (as while a dataclass
    builds its methods) made `python -m` die by SIGINT (-2) after run_cli had returned 130."""
    (tmp_path / "interrupted_in_exec.py").write_text(
        "import sys\n"
        "from niels_gpt.command_line import run_cli\n"
        "sys.exit(run_cli(lambda argv: exec('raise KeyboardInterrupt')))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "interrupted_in_exec"]
    done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stderr) == (130, "interrupted\n")


def parser(*add_args) -> argparse.ArgumentParser:
    out = argparse.ArgumentParser(prog="cmd")
    for add in add_args:
        add(out)
    return out


def test_later_sources_of_config_win_file_spec_set_demo_flags(tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"seed": 1, "streams": {"T": 11, "doc_separator": "|"}}))
    read = parser(add_config_args).parse_args

    def resolved(*args, flags=None):
        cfg = resolve_config(read(["--config-file", str(config), *args]), flags)
        return cfg["seed"], cfg["streams"]["T"], cfg["streams"]["doc_separator"], cfg["demo"]

    assert resolved() == (1, 11, "|", False)
    assert resolved("--spec", '{"seed": 2, "streams": {"T": 12}}') == (2, 12, "|", False)
    assert resolved("--spec", '{"seed": 2}', "--set", "seed=3", "--set", "streams.T=13") == (3, 13, "|", False)
    assert resolved("--set", "demo=false", "--demo") == (1, 11, "|", True)
    assert resolved("--set", "seed=3", flags={"seed": 4, "streams.T": None}) == (4, 11, "|", False)  # None: not given


def test_config_yaml_here_is_read_unless_a_spec_is_given(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    read = parser(add_config_args).parse_args
    assert resolve_config(read([]))["seed"] == 42  # no config.yaml: the schema defaults
    (tmp_path / "config.yaml").write_text("seed: 9\n")
    assert resolve_config(read([]))["seed"] == 9
    assert resolve_config(read(["--spec", "{}"]))["seed"] == 42  # a job's spec is over the defaults only
    assert resolve_config(read(["--spec", "{}", "--config-file", "config.yaml"]))["seed"] == 9


def test_dotted_keys_become_nested_dicts():
    assert nested({"a.b": 1, "a.c.d": 2, "e": 3}) == {"a": {"b": 1, "c": {"d": 2}}, "e": 3}
    with pytest.raises(ConfigError, match=r"^--set a.b: 'a' is set to a value, so it cannot also hold keys$"):
        nested({"a": 1, "a.b": 2})


def test_tokenizer_defaults_to_the_model_of_the_cache_tree():
    read = parser(add_tokenizer_arg).parse_args
    assert tokenizer_path(read([]), "runs/cache") == os.path.join("runs/cache", "tokenizer", "spm.model")
    assert tokenizer_path(read(["--tokenizer", "my.model"]), "runs/cache") == "my.model"
    assert "{cache_dir}/tokenizer/spm.model" in parser(add_tokenizer_arg).format_help()
    custom = parser(lambda p: add_tokenizer_arg(p, help="the model the caches must match"))
    assert "the model the caches must match" in custom.format_help()


def test_num_threads_is_an_int_and_every_cpu_by_default(capsys):
    read = parser(add_num_threads_arg).parse_args
    assert read([]).num_threads == -1 and read(["--num-threads", "3"]).num_threads == 3
    with pytest.raises(SystemExit):
        read(["--num-threads", "two"])
    assert "invalid int value: 'two'" in capsys.readouterr().err


def test_run_cli_passes_the_exit_code_and_makes_user_errors_one_line(capsys):
    def failing(error):
        def main(argv):
            raise error

        return main

    assert run_cli(lambda argv: 3, []) == 3
    for error in (ValueError("bad value"), FileNotFoundError("x.bin: missing"), ConfigError("bad key")):
        assert run_cli(failing(error), []) == 1
        assert capsys.readouterr().err == f"error: {error}\n"
    assert run_cli(failing(KeyboardInterrupt()), []) == 130 and capsys.readouterr().err == "interrupted\n"
    with pytest.raises(RuntimeError):  # not a user error: the traceback is the report
        run_cli(failing(RuntimeError("bug")), [])
