"""streams/job.py: one source's streams from the validated config (the Snakemake rule, build-all),
through the same build path as `build_sources`."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from niels_gpt.config import deep_merge
from niels_gpt.meta import is_built
from niels_gpt.streams import build_sources_from_docs, build_stream_from_config, stream_build_config, stream_paths
from tests.support.streams import DELIM


@pytest.mark.usefixtures("isolated_hf_cache")
@pytest.mark.parametrize("source", ["wiki", "roam", "primer"])
def test_build_stream_from_config_is_deterministic(demo, source, tmp_path):
    metas = [build_stream_from_config(demo, source, tmp_path / run) for run in ("a", "b")]
    assert metas[0] == metas[1]
    for split in ("train", "val"):
        files = [Path(stream_paths(tmp_path / run, source, split)[0]).read_bytes() for run in ("a", "b")]
        assert files[0] == files[1] and len(files[0]) == metas[0][split]["n_bytes"] >= 9


@pytest.mark.usefixtures("isolated_hf_cache")
def test_the_job_writes_what_build_sources_writes(demo, tmp_path):
    """One build path: the job's files are byte for byte those of `build_sources` with the same settings."""
    from niels_gpt.data.registry import wikitext_lines

    for source in ("wiki", "roam", "primer"):
        build_stream_from_config(demo, source, tmp_path / "job")
    wikitext, wiki_read = demo["sources"]["wikitext"], {}
    build_sources_from_docs(
        stream_build_config(demo, cache_dir=tmp_path / "direct"),
        wiki_docs=wikitext_lines(demo, provenance=wiki_read),
        wiki_dataset=(wikitext["dataset_id"], wikitext["config"]),
        wiki_read=wiki_read,
    )
    files = {run: {p.name: p.read_bytes() for p in (tmp_path / run).iterdir()} for run in ("job", "direct")}
    assert len(files["job"]) == 12 and files["job"] == files["direct"]


@pytest.mark.usefixtures("isolated_hf_cache")
def test_wiki_streams_record_the_dataset_and_the_commit_they_read(demo, hub, tmp_path):
    hub_cfg = deep_merge(demo, {"demo": False})
    metas = build_stream_from_config(hub_cfg, "wiki", tmp_path / "hub")
    sha = hub.sha("Salesforce/wikitext")
    for split, hub_split in (("train", "train"), ("val", "validation")):
        meta = metas[split]
        assert (meta["dataset_name"], meta["dataset_config"]) == ("Salesforce/wikitext", "wikitext-103-raw-v1")
        assert meta["dataset_revision"] == sha == meta["provenance"]["revision"]
        assert (meta["provenance"]["split"], meta["provenance"]["local"]) == (hub_split, False)
    demo_meta = build_stream_from_config(demo, "wiki", tmp_path / "demo")["train"]  # local files: each one's sha256
    assert demo_meta["dataset_revision"] is None and demo_meta["provenance"]["data_files"][0]["sha256"]


def test_the_job_always_rebuilds(demo, tmp_path, monkeypatch, capsys):
    """Under Snakemake deciding whether to rebuild is Snakemake's job: the job never asks if a stream is current."""
    from niels_gpt.streams import sources

    build_stream_from_config(demo, "primer", tmp_path)
    monkeypatch.setattr(sources, "read_current", lambda *a: pytest.fail("the job must not reuse a stream"))
    build_stream_from_config(demo, "primer", tmp_path)
    assert capsys.readouterr().err.count("primer train: 373 bytes (0 blank documents left out) ->") == 2


def test_roam_stream_reads_only_roam_files(demo, tmp_path, monkeypatch):
    from niels_gpt.data import registry
    from niels_gpt.streams import job

    for module in (registry, job):
        monkeypatch.setattr(module, "wikitext_lines", lambda cfg: pytest.fail("roam must not load wikitext"))
    cfg = deep_merge(demo, {"sources": {"primer": {"text": str(tmp_path / "missing.txt")}}})
    metas = build_stream_from_config(cfg, "roam", tmp_path)
    assert sorted(os.listdir(tmp_path)) == [
        "roam_train.bin",
        "roam_train.meta.json",
        "roam_val.bin",
        "roam_val.meta.json",
    ]
    assert all(f["path"].startswith(demo["sources"]["roam"]["demo_root"]) for f in metas["train"]["files"])


def test_optional_source_without_input_gets_empty_streams(demo, tmp_path):
    from niels_gpt.batching import load_stream_cache

    cfg = deep_merge(demo, {"sources": {"primer": {"text": str(tmp_path / "missing.txt")}}})
    cfg["streams"]["required_sources"] = ["wiki", "roam"]
    metas = build_stream_from_config(cfg, "primer", tmp_path)
    assert not is_built(metas["train"]) and not is_built(metas["val"]) and "missing.txt" in metas["val"]["reason"]
    assert all(Path(stream_paths(tmp_path, "primer", split)[0]).read_bytes() == b"" for split in ("train", "val"))
    assert load_stream_cache(tmp_path, "train") == {}
    cfg["streams"]["required_sources"] = ["wiki", "roam", "primer"]
    with pytest.raises(FileNotFoundError, match="missing.txt"):
        build_stream_from_config(cfg, "primer", tmp_path)


@pytest.mark.usefixtures("isolated_hf_cache")
@pytest.mark.parametrize("source", ["wiki", "roam"])
def test_doc_separator_joins_the_documents_of_wiki_and_roam(demo, source, tmp_path):
    from niels_gpt.data.registry import wikitext_lines
    from niels_gpt.data.roam import load_texts

    sep = "\n<doc>\n"
    cfg = deep_merge(demo, {"streams": {"doc_separator": sep}})
    metas = build_stream_from_config(cfg, source, tmp_path)
    for split in ("train", "val"):
        if source == "wiki":
            docs = wikitext_lines(cfg)[split]
        else:
            docs = load_texts([f["path"] for f in metas[split]["files"]])
        assert len(docs) >= (2 if split == "train" else 1) and metas[split]["sep"] == sep
        assert Path(stream_paths(tmp_path, source, split)[0]).read_bytes() == sep.join(docs).encode()


def test_primer_delimiter_splits_the_text_into_the_dialogues_held_out_whole(demo, tmp_path):
    from niels_gpt.splits import val_mask

    delimiter = "\n===\n"
    dialogues = [f"user: question {i}?\nassistant: answer {i}." for i in range(10)]
    (tmp_path / "primer.txt").write_text(delimiter.join(dialogues), encoding="utf-8")
    primer = {"text": str(tmp_path / "primer.txt"), "delimiter": delimiter, "val_frac": 0.2}
    cfg = deep_merge(demo, {"seed": 3, "sources": {"primer": primer}})
    metas = build_stream_from_config(cfg, "primer", tmp_path / "out")
    held_out = [d for d, v in zip(dialogues, val_mask(10, 0.2, 3)) if v]
    assert Path(stream_paths(tmp_path / "out", "primer", "val")[0]).read_bytes() == delimiter.join(held_out).encode()
    assert metas["val"]["delimiter"] == delimiter and len(held_out) == 2
    default = deep_merge(cfg, {"sources": {"primer": {"delimiter": DELIM}}})  # the whole file is one dialogue
    with pytest.raises(ValueError, match=r"primer val: 0 bytes \(empty, and the source is required\)"):
        build_stream_from_config(default, "primer", tmp_path / "default")


def test_a_stream_not_in_enabled_sources_is_refused_naming_the_setting(demo, tmp_path):
    cfg = deep_merge(demo, {"streams": {"enabled_sources": ["wiki", "primer"], "required_sources": ["wiki"]}})
    with pytest.raises(
        ValueError, match=r"stream source 'roam' is not in streams.enabled_sources \['wiki', 'primer'\]"
    ):
        build_stream_from_config(cfg, "roam", tmp_path)
    assert not tmp_path.joinpath("roam_train.bin").exists()


def test_the_wiki_job_reads_one_pass_iterators_of_lines(demo, tmp_path, monkeypatch):
    """The job asks the loader for lazy splits and writes them as they are read (never a list of lines)."""
    from niels_gpt.streams import job

    asked = {}

    def lines(cfg, provenance=None, *, lazy=False):
        asked["lazy"] = lazy
        train = (f"line {i} of the train split" for i in range(1000))
        return {"train": train, "val": iter(["a val line long enough for T"]), "test": iter([])}

    monkeypatch.setattr(job, "wikitext_lines", lines)
    metas = build_stream_from_config(demo, "wiki", tmp_path)
    assert asked == {"lazy": True} and metas["train"]["n_docs"] == 1000
    want = "\n\n".join(f"line {i} of the train split" for i in range(1000)).encode()
    assert Path(stream_paths(tmp_path, "wiki", "train")[0]).read_bytes() == want
