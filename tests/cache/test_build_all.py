"""`build-all`: every cache in one process, curated as the workflow curates them, for users without Snakemake:
`verify`, the same bytes as `snakemake cache/all`, --no-curation, and failures."""

from __future__ import annotations

import json
import shutil

import pytest
import yaml

from niels_gpt.cache.cli import main
from niels_gpt.command_line import run_cli
from tests.support.build_all import build_all_like_workflow, differing

SMALL = {
    "tokenizer": {"vocab_size": 500, "sample_chars": 120_000},
    "sources": {
        "fineweb_edu": {"max_train_tokens": 20_000, "max_val_tokens": 2_000, "val_doc_prob": 0.2},
        "wikitext": {"max_train_tokens": 20_000, "max_val_tokens": 5_000},
    },
    "sft": {"t_max": 256},
    "dedup": {"read_margin": 0.05},
}
SMALL_MARGIN = 0.05


# The demo at small budgets and no byte streams (the tests below need only the token caches).
SMALL_DEMO = ["--set=streams.enabled_sources=[]", "--set=streams.required_sources=[]"]
SMALL_DEMO += [f"--set=sources.fineweb_edu.{k}={v}" for k, v in (("max_train_tokens", 5000), ("max_val_tokens", 500))]
SMALL_DEMO += ["--set=sources.wikitext.max_train_tokens=5000", "--set=sources.roam.max_train_tokens=5000"]


def test_build_all_demo_builds_every_cache_and_verifies(tmp_path, isolated_hf_cache, capsys):
    config = tmp_path / "small.yaml"
    config.write_text(yaml.safe_dump(SMALL))
    cache = tmp_path / "cache"
    rc = run_cli(main, ["build-all", "--cache-dir", str(cache), "--seed", "42", "--demo", "--config-file", str(config)])
    assert rc == 0, capsys.readouterr().err
    fineweb = json.loads((cache / "pretrain" / "fineweb_edu" / "meta.json").read_text())
    train = fineweb["curation"]["splits"]["train"]  # curation's cuts: the budget less the shortfall
    assert train["budget"] == 20_000 and fineweb["train_tokens"] == 20_000 - train["shortfall_tokens"] > 15_000
    assert fineweb["val_tokens"] == 2_000
    assert fineweb["provenance"]["read_margin"] == SMALL_MARGIN
    raw = json.loads((cache / "curation" / "raw" / "pretrain" / "fineweb_edu" / "meta.json").read_text())
    assert raw["max_train_tokens"] == 21_000  # the raw build read dedup.read_margin past the budget
    certificate = json.loads((cache / "report" / "certificate.json").read_text())
    assert certificate["holds"] and len(certificate["train_splits"]) == 6
    assert (cache / "curation" / "summary.json").exists() and (cache / "curation" / "waived_ngrams.npy").exists()
    for folder in (cache / "pretrain" / "gutenberg", cache / "curation" / "raw" / "pretrain" / "gutenberg"):
        assert json.loads((folder / "meta.json").read_text())["built"] is False  # disabled: "not built"
    decisions = json.loads((cache / "curation" / "decisions" / "pretrain" / "gutenberg.json").read_text())
    assert decisions["splits"] == {}  # curate's empty decision for a cache that was not built
    for source in ("dolly15k", "oasst1", "primer"):
        assert json.loads((cache / "sft" / source / "meta.json").read_text())["train_examples"] > 0
    for stream in ("wiki", "roam", "primer"):
        assert (cache / "streams" / f"{stream}_val.bin").stat().st_size > 0
    capsys.readouterr()
    assert run_cli(main, ["verify", str(cache)]) == 0, capsys.readouterr().out
    run_readme_python_blocks(tmp_path)


def run_readme_python_blocks(workdir) -> None:
    """The README's training-script snippets run as written against a freshly built cache."""
    import os
    import re
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)\n```", readme, re.S)
    usage = blocks[0]  # the first block: reading the caches in a training script
    old = os.getcwd()
    os.chdir(workdir)
    try:
        exec(compile(usage, "README.md", "exec"), {})
    finally:
        os.chdir(old)


def test_build_all_keeps_an_existing_tokenizer_unless_told_to_retrain(
    tmp_path, isolated_hf_cache, tiny_tokenizer_path, tiny_tokenizer, monkeypatch, capsys
):
    """The tokenizer step alone: the cache builders are replaced by stand-ins recording the model they get."""
    import shutil

    from niels_gpt.pretrain import job as pretrain_job
    from niels_gpt.sft import job as sft_job
    from niels_gpt.streams import job as streams_job

    used = []
    monkeypatch.setattr(
        pretrain_job, "build_pretrain_source", lambda cfg, s, tokenizer_path, out_dir: used.append(tokenizer_path)
    )
    monkeypatch.setattr(
        sft_job, "build_sft_source", lambda cfg, s, tokenizer_path, out_dir: {"built": False, "source": s}
    )
    monkeypatch.setattr(streams_job, "build_stream_from_config", lambda cfg, s, out: None)
    cache = tmp_path / "cache"
    (cache / "tokenizer").mkdir(parents=True)
    model = cache / "tokenizer" / "spm.model"
    shutil.copy(tiny_tokenizer_path, model)
    args = [
        "build-all",
        "--cache-dir",
        str(cache),
        "--demo",
        "--spec",
        '{"tokenizer": {"vocab_size": 450, "sample_chars": 60000}}',
        "--no-curation",  # the builders are stand-ins: nothing to curate
    ]

    assert run_cli(main, args) == 0
    assert f"tokenizer: keeping {model} (--retrain-tokenizer to train again)" in capsys.readouterr().err
    assert (
        model.read_bytes() == open(tiny_tokenizer_path, "rb").read()
        and not (cache / "tokenizer" / "meta.json").exists()
    )
    assert used == [str(model)] * 4

    assert run_cli(main, [*args, "--retrain-tokenizer"]) == 0
    assert "keeping" not in capsys.readouterr().err
    meta = json.loads((cache / "tokenizer" / "meta.json").read_text())
    assert meta["vocab_size"] == 454 and meta["sha256"] != tiny_tokenizer.sha256
    assert meta["trained_on"]["sample_chars_cap"] == 60_000


CURATED = (  # what build-all and the workflow both write, compared byte for byte
    ("curation", "raw"),
    ("curation", "decisions"),
    ("curation", "summary.json"),
    ("curation", "waived_ngrams.npy"),
    ("pretrain",),
    ("sft",),
    ("streams",),
    ("report", "certificate.json"),
    ("report", "curation_table.html"),
)


def test_build_all_writes_the_workflows_bytes(workflow_demo_build, tmp_path, isolated_hf_cache, capsys):
    """The workflow's demo build (tests/workflow's session build: config.yaml + overrides.yaml, 4 pretrain
    sources with gutenberg enabled, dedup.read_margin 0.25) built again by build-all with its tokenizer:
    the raw caches, curation files, curated caches, streams and certificate are the same bytes."""
    cache = tmp_path / "cache"
    build_all_like_workflow(workflow_demo_build, cache)
    err = capsys.readouterr().err
    for stage in ("== pretrain/roam: raw cache", "== curate", "== sft/primer: curated copy", "== certificate"):
        assert stage in err
    ours, differ = differing(cache, workflow_demo_build / "cache", CURATED)
    assert len(ours) > 40 and any(k.startswith("pretrain/gutenberg/train/") for k in ours)
    assert differ == []


def test_build_all_no_curation_writes_the_loaders_caches(tmp_path, isolated_hf_cache, tiny_tokenizer_path, capsys):
    """--no-curation: exact budgets, no curation folder, and a certificate left by a curated build removed."""
    cache = tmp_path / "cache"
    (cache / "tokenizer").mkdir(parents=True)
    shutil.copy(tiny_tokenizer_path, cache / "tokenizer" / "spm.model")
    stale = cache / "report" / "certificate.json"  # an earlier curated build's: it does not describe these caches
    stale.parent.mkdir()
    stale.write_text("{}")
    args = ["build-all", "--cache-dir", str(cache), "--demo", "--no-curation"]
    args += SMALL_DEMO
    assert run_cli(main, args) == 0, capsys.readouterr().err
    assert "(not curated)" in capsys.readouterr().err
    fineweb = json.loads((cache / "pretrain" / "fineweb_edu" / "meta.json").read_text())
    assert fineweb["train_tokens"] == 5000 and fineweb["val_tokens"] == 500 and "curation" not in fineweb
    assert "read_margin" not in fineweb["provenance"]
    assert "curation" not in json.loads((cache / "sft" / "primer" / "meta.json").read_text())
    assert not (cache / "curation").exists() and not stale.exists()


def test_build_all_without_decontamination_writes_a_certificate_that_does_not_hold(
    tmp_path, isolated_hf_cache, tiny_tokenizer_path, capsys
):
    """decontamination.enabled false: duplicates still go, the train splits keep the val text, and the
    certificate says so (holds: false) without failing the build, as the workflow's certificate job does."""
    cache = tmp_path / "cache"
    (cache / "tokenizer").mkdir(parents=True)
    shutil.copy(tiny_tokenizer_path, cache / "tokenizer" / "spm.model")
    args = ["build-all", "--cache-dir", str(cache), "--demo", "--set=decontamination.enabled=false"]
    args += SMALL_DEMO
    assert run_cli(main, args) == 0, capsys.readouterr().err
    assert "the certificate does not hold" in capsys.readouterr().err
    certificate = json.loads((cache / "report" / "certificate.json").read_text())
    assert certificate["holds"] is False and any(p["shared_ngrams"] for p in certificate["pairs"])
    assert certificate["curation"]["settings"]["decontamination"]["enabled"] is False


@pytest.mark.parametrize(
    "name, text, expected",
    [
        ("bench.jsonl", '{"q": "fine"}\nnot json\n', "bench.jsonl, line 2: not JSON"),
        ("bench.csv", "a,b\n", "bench.csv: expected a .jsonl, .txt, .parquet file"),
        ("missing.txt", None, "missing.txt: file not found"),
    ],
)
def test_build_all_stops_on_a_bad_benchmark_before_building(
    tmp_path, tiny_tokenizer_path, capsys, name, text, expected
):
    """One error line naming the file and what was expected, exit 1, and no cache written at all."""
    cache = tmp_path / "cache"
    (cache / "tokenizer").mkdir(parents=True)
    shutil.copy(tiny_tokenizer_path, cache / "tokenizer" / "spm.model")
    bench = tmp_path / name
    if text is not None:
        bench.write_text(text)
    args = [
        "build-all",
        "--cache-dir",
        str(cache),
        "--demo",
        "--spec",
        json.dumps({"decontamination": {"benchmarks": [str(bench)]}}),
    ]
    assert run_cli(main, args) == 1
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and expected in errors[0] and "decontamination.benchmarks" in errors[0], errors
    assert sorted(p.name for p in cache.iterdir()) == ["tokenizer"]
