"""`build-pretrain` and `merge-pretrain` (pretrain/cli.py): config keys from --spec/--set, defaults derived
from cache_dir, milestones on stderr, refusals in one message."""

from __future__ import annotations

import json
import shutil

import pytest

from niels_gpt.cache.cli import main
from niels_gpt.data import registry
from niels_gpt.data.registry import PretrainInput
from niels_gpt.data.types import PretrainSample
from niels_gpt.meta import read_meta
from niels_gpt.splits import val_mask
from tests.support.corpus import tiny_corpus


def test_cli_builds_roam_from_a_notes_folder(tmp_path, tiny_tokenizer_path, capsys):
    notes = tmp_path / "notes"
    notes.mkdir()
    for i, text in enumerate(tiny_corpus(20, seed=2)):
        (notes / f"note{i:02d}.md").write_text(text, encoding="utf-8")
    out = tmp_path / "cache"
    rc = main(
        [
            "build-pretrain",
            "--source",
            "roam",
            "--set",
            f"sources.roam.root={notes}",
            "--set",
            "sources.roam.val_frac=0.2",
            "--tokenizer",
            tiny_tokenizer_path,
            "--out-dir",
            str(out),
            "--set",
            "sources.roam.max_val_tokens=1_00",
            "--set",
            "seed=5",
            "--num-threads",
            "1",
            "--spec",
            "{}",
        ]
    )
    assert rc == 0
    meta = read_meta(str(out / "meta.json"))
    assert meta["built"] and meta["train_tokens"] > 0 and meta["val_tokens"] == 100 and meta["seed"] == 5
    assert "pre-split" in meta["split_rule"] and meta["provenance"]["val_frac"] == 0.2
    files = meta["provenance"]["files"]
    assert (len(files["train"]), len(files["val"])) == (16, 4)  # a fifth of the 20 notes
    assert set(files["val"]) == {f"note{i:02d}.md" for i, v in enumerate(val_mask(20, 0.2, 5)) if v}
    out, err = capsys.readouterr()
    assert f"train: {meta['train_tokens']:,} tokens in 1 shard" in err and out == ""  # milestones: stderr


def test_cli_refuses_a_key_the_source_does_not_have(tmp_path):
    with pytest.raises(ValueError, match=r"unknown key 'sources.fineweb_edu.train_split'"):
        main(
            [
                "build-pretrain",
                "--source",
                "fineweb_edu",
                "--set",
                "sources.fineweb_edu.train_split=train",
                "--out-dir",
                str(tmp_path),
                "--spec",
                "{}",
            ]
        )


def test_cli_disabled_source(tmp_path, capsys):
    assert (
        main(
            [
                "build-pretrain",
                "--source",
                "gutenberg",
                "--set",
                "sources.gutenberg.enabled=false",
                "--spec",
                "{}",
                "--out-dir",
                str(tmp_path),
            ]
        )
        == 0
    )
    assert read_meta(str(tmp_path / "meta.json"))["built"] is False
    assert "not built" in capsys.readouterr().err


def test_cli_stops_on_a_split_that_would_be_empty(tmp_path, tiny_tokenizer_path):
    notes = tmp_path / "notes"
    notes.mkdir()
    for i, text in enumerate(tiny_corpus(3, seed=2) + ["   \n", ""]):
        (notes / f"note{i}.md").write_text(text, encoding="utf-8")
    args = ["build-pretrain", "--source", "roam", "--set", f"sources.roam.root={notes}", "--spec", "{}"]
    args += ["--tokenizer", tiny_tokenizer_path, "--out-dir", str(tmp_path / "out"), "--set", "seed=0"]
    with pytest.raises(ValueError) as e:  # with seed 0 the one val file (of 5, val_frac 0.1) is a blank note
        main(args)
    assert str(e.value) == (
        "roam: the val split would hold 0 tokens (documents read: 1, blank: 1; split by "
        "sources.roam.val_frac=0.1). To fix: raise sources.roam.val_frac so val gets documents, or set "
        "sources.roam.max_val_tokens: 0 to build without val on purpose"
    )
    assert not (tmp_path / "out" / "meta.json").exists()
    assert main([*args, "--set", "sources.roam.max_val_tokens=0"]) == 0
    assert read_meta(str(tmp_path / "out" / "meta.json"))["empty_splits"] == {
        "val": "max_val_tokens is 0: built without val on purpose"
    }


def test_cli_part_out_of_range_is_refused(tmp_path, tiny_tokenizer_path):
    with pytest.raises(ValueError, match=r"--part must be in 0..1 for num_parts=2, got 2"):
        main(
            [
                "build-pretrain",
                "--source",
                "fineweb_edu",
                "--part",
                "2",
                "--set",
                "pretrain.num_parts=2",
                "--tokenizer",
                tiny_tokenizer_path,
                "--out-dir",
                str(tmp_path),
                "--spec",
                "{}",
            ]
        )


def stream_input(texts):
    """A stream input like the registry's for fineweb_edu, without the hub."""
    return PretrainInput("stream", (PretrainSample(t, "fineweb_edu", {}) for t in texts), None, None, {})


def test_default_paths_derive_from_cache_dir(tiny_tokenizer, tiny_tokenizer_path, tmp_path, monkeypatch, capsys):
    cache = tmp_path / "elsewhere"
    (cache / "tokenizer").mkdir(parents=True)
    shutil.copy(tiny_tokenizer_path, cache / "tokenizer" / "spm.model")
    monkeypatch.setattr(registry, "pretrain_input", lambda cfg, source, **kw: stream_input(tiny_corpus(40, seed=1)))
    flags = ["--source", "fineweb_edu", "--set", f"cache_dir={cache}", "--set", "sources.fineweb_edu.val_doc_prob=0.3"]
    assert main(["build-pretrain", *flags, "--num-threads", "1", "--spec", "{}"]) == 0
    meta = read_meta(cache / "pretrain" / "fineweb_edu" / "meta.json")
    assert meta["tokenizer_sha256"] == tiny_tokenizer.sha256 and meta["train_tokens"] > 0
    assert "wrote " + str(cache / "pretrain" / "fineweb_edu" / "meta.json") in capsys.readouterr().err


def test_merge_pretrain_merges_the_parts_under_out_dir(tiny_tokenizer_path, tmp_path, monkeypatch, capsys):
    texts = tiny_corpus(80, seed=4)
    monkeypatch.setattr(
        registry, "pretrain_input", lambda cfg, source, num_parts, part, **kw: stream_input(texts[part::num_parts])
    )
    out = tmp_path / "fineweb_edu"
    spec = json.dumps({"pretrain": {"num_parts": 2}, "sources": {"fineweb_edu": {"val_doc_prob": 0.3}}})
    for k in range(2):
        part = ["--part", str(k), "--out-dir", str(out / "parts" / f"part_00{k}"), "--tokenizer", tiny_tokenizer_path]
        assert main(["build-pretrain", "--source", "fineweb_edu", *part, "--num-threads", "1", "--spec", spec]) == 0
    capsys.readouterr()
    assert main(["merge-pretrain", "--source", "fineweb_edu", "--out-dir", str(out), "--spec", spec]) == 0
    merged = read_meta(out / "meta.json")
    parts = [read_meta(out / "parts" / f"part_00{k}" / "meta.json") for k in range(2)]
    assert merged["num_parts"] == 2 and merged["train_tokens"] == sum(p["train_tokens"] for p in parts)
    out_text, err = capsys.readouterr()
    assert out_text == "" and f"merging 2 parts from {out / 'parts'}" in err and f"wrote {out}/meta.json" in err


def test_build_pretrain_hands_the_jobs_spec_to_the_build(monkeypatch, tmp_path):
    """The checkpoint of a stream build is keyed by the spec the Snakemake rule passes (pretrain/job.py)."""
    from niels_gpt.pretrain import job

    seen = {}
    monkeypatch.setattr(job, "build_pretrain_source", lambda cfg, source, **kw: seen.update(kw))
    spec = '{"seed": 5, "sources": {"fineweb_edu": {"val_doc_prob": 0.5}}}'
    args = ["build-pretrain", "--source", "fineweb_edu", "--tokenizer", "t.model", "--out-dir", str(tmp_path)]
    assert main([*args, "--spec", spec]) == 0
    assert seen["spec"] == {"seed": 5, "sources": {"fineweb_edu": {"val_doc_prob": 0.5}}}
