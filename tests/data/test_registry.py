"""registry: demo routing through the same loaders, provenance, group keys, input file lists."""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from niels_gpt.config import ConfigError, deep_merge, prepare_config
from niels_gpt.data import prepared, registry
from niels_gpt.data.hub import HubRead
from tests.data.conftest import FakeBuilder
from tests.support.hub_files import DOLLY_ROWS


def test_source_name_lists():
    assert registry.PRETRAIN_SOURCES == ("fineweb_edu", "wikitext", "gutenberg", "roam")
    assert registry.SFT_SOURCES == ("dolly15k", "oasst1", "primer")
    with pytest.raises(ValueError, match="unknown pretrain source 'wiki'"):
        registry.pretrain_input(prepare_config({}), "wiki")


def test_hub_read_is_built_once_from_the_config_section():
    cfg = prepare_config({"seed": 9, "sources": {"fineweb_edu": {"revision": "r1", "shuffle_buffer": 64}}})
    web = cfg["sources"]["fineweb_edu"]
    assert registry.hub_read(cfg, "fineweb_edu") == HubRead(
        web["dataset_id"], web["config"], split=web["split"], revision="r1", seed=9,
        streaming=True, shuffle=True, shuffle_buffer_size=64,
    )  # fmt: skip
    wiki = cfg["sources"]["wikitext"]
    assert registry.hub_read(cfg, "wikitext") == HubRead(wiki["dataset_id"], wiki["config"], split="train", seed=9)
    dolly = cfg["sources"]["dolly15k"]
    assert registry.hub_read(cfg, "dolly15k") == HubRead(dolly["dataset_id"], None, split=dolly["split"], seed=9)
    unshuffled = registry.hub_read(deep_merge(cfg, {"sources": {"gutenberg": {"shuffle_buffer": 0}}}), "gutenberg")
    assert (unshuffled.streaming, unshuffled.shuffle) == (True, False)


def test_hub_read_routes_the_demo_to_the_demo_files_and_no_revision():
    cfg = prepare_config({"demo": True, "sources": {"oasst1": {"revision": "r1"}}})
    read = registry.hub_read(cfg, "oasst1")
    assert read.data_files == cfg["sources"]["oasst1"]["demo_data_files"] and read.revision is None
    assert read.local and read.dataset_id == "OpenAssistant/oasst1"
    with pytest.raises(ValueError, match="unknown hub source 'roam'"):
        registry.hub_read(cfg, "roam")


@pytest.mark.parametrize("form", ["glob", "list", "split to list"])
def test_demo_data_files_may_be_a_glob_or_a_list_as_datasets_takes_them(demo, form):
    root, cfg = demo
    files = sorted(str(p) for p in (root / "fineweb_edu").glob("*.parquet"))
    value = {"glob": str(root / "fineweb_edu" / "*.parquet"), "list": files, "split to list": {"train": files}}[form]
    routed = deep_merge(cfg, {"sources": {"fineweb_edu": {"demo_data_files": value}}})
    assert prepare_config(routed) == routed  # the schema takes every form
    assert registry.source_input_files(routed, "fineweb_edu") == files
    inp = registry.pretrain_input(routed, "fineweb_edu")
    assert sorted(s.text for s in inp.stream) == sorted(
        s.text for s in registry.pretrain_input(cfg, "fineweb_edu").stream
    )
    assert inp.provenance["data_files_globs"] == value


@pytest.mark.parametrize("value", [[], {"train": []}, {"train": 3}, 7])
def test_demo_data_files_that_name_no_file_are_refused_by_the_schema(demo, value):
    with pytest.raises(ConfigError, match=r"sources\.fineweb_edu\.demo_data_files"):
        prepare_config(deep_merge(demo[1], {"sources": {"fineweb_edu": {"demo_data_files": value}}}))


def test_stream_sources_read_demo_files_and_record_them(demo):
    root, cfg = demo
    inp = registry.pretrain_input(cfg, "fineweb_edu")
    assert inp.kind == "stream" and inp.train is None and inp.val is None
    texts = [s.text for s in inp.stream]
    assert len(texts) == 40 and texts == [s.text for s in inp.stream]  # re-iterable, same seeded order
    read = inp.provenance["stream"]
    assert read["local"] is True and [os.path.basename(f["path"]) for f in read["data_files"]] == [
        "part-0.parquet",
        "part-1.parquet",
    ]
    assert all(len(f["sha256"]) == 64 for f in read["data_files"])
    assert inp.provenance["dataset_id"] == "HuggingFaceFW/fineweb-edu" and inp.provenance["shuffle_buffer"] == 5
    json.dumps(inp.provenance)
    other_seed = registry.pretrain_input(deep_merge(cfg, {"seed": 1}), "fineweb_edu")
    assert [s.text for s in other_seed.stream] != texts


def test_no_shuffle_when_buffer_is_zero(demo):
    _, cfg = demo
    inp = registry.pretrain_input(deep_merge(cfg, {"sources": {"fineweb_edu": {"shuffle_buffer": 0}}}), "fineweb_edu")
    texts = [s.text for s in inp.stream]
    assert texts[:2] == ["Fineweb document 0.\nIt has two lines.", "Fineweb document 1.\nIt has two lines."]


def test_wikitext_is_presplit_into_articles(demo):
    _, cfg = demo
    inp = registry.pretrain_input(cfg, "wikitext")
    assert inp.kind == "presplit" and inp.stream is None
    assert [s.meta["title"] for s in inp.train] == ["Alpha River", "Beta Stone"]
    assert [s.text for s in inp.val] == [" = Gamma Light = \n Gamma shines . "]
    assert inp.provenance["val"]["split"] == "validation" and inp.provenance["train"]["local"] is True


def test_roam_is_presplit_by_file_with_recorded_lists(demo):
    root, cfg = demo
    inp = registry.pretrain_input(cfg, "roam")
    train = [s.meta["path"] for s in inp.train]
    val = [s.meta["path"] for s in inp.val]
    assert len(train) + len(val) == 12 and not set(train) & set(val) and len(val) == 1
    assert inp.provenance["files"] == {"train": train, "val": val}
    assert inp.provenance["root"] == str(root / "roam") and "randperm" in inp.provenance["split_rule"]
    assert registry.roam_root(cfg) == str(root / "roam")
    assert registry.roam_root(deep_merge(cfg, {"demo": False})) == ".roam-data"
    other = root / "other_notes"  # demo_root names the notes folder the demo reads
    for name in ("a.md", "b.md"):
        (other / name).parent.mkdir(exist_ok=True)
        (other / name).write_text(f"note {name}", encoding="utf-8")
    moved = registry.pretrain_input(deep_merge(cfg, {"sources": {"roam": {"demo_root": str(other)}}}), "roam")
    assert sorted(s.text for split in (moved.train, moved.val) for s in split) == ["note a.md", "note b.md"]


def test_tokenizer_texts_are_the_train_side(demo):
    _, cfg = demo
    assert list(registry.tokenizer_texts(cfg, "wikitext")) == [
        s.text for s in registry.pretrain_input(cfg, "wikitext").train
    ]
    assert list(registry.tokenizer_texts(cfg, "roam")) == [s.text for s in registry.pretrain_input(cfg, "roam").train]
    stream = list(registry.tokenizer_texts(cfg, "gutenberg"))
    assert len(stream) == 8 and stream == list(registry.tokenizer_texts(cfg, "gutenberg"))


def test_tokenizer_texts_record_what_a_hub_source_read(demo, hub):
    _, cfg = demo
    prov: dict = {}
    next(registry.tokenizer_texts(deep_merge(cfg, {"demo": False}), "fineweb_edu", provenance=prov))
    assert (prov["read"]["dataset_id"], prov["read"]["revision"]) == (
        "HuggingFaceFW/fineweb-edu", hub.sha("HuggingFaceFW/fineweb-edu")
    )  # fmt: skip
    roam: dict = {}
    list(registry.tokenizer_texts(cfg, "roam", provenance=roam))
    assert roam == {}  # no hub read: its files are listed by the pretrain cache, not here


@pytest.mark.parametrize(
    "source,group_key", [("dolly15k", "index"), ("oasst1", "message_tree_id"), ("primer", "index")]
)
def test_sft_input_sets_group_and_provenance(demo, source, group_key):
    _, cfg = demo
    samples, prov = registry.sft_input(cfg, source)
    samples = list(samples)
    assert samples and all(s.meta["group"] == s.meta[group_key] for s in samples)
    assert all(s.source == source for s in samples)
    if source == "primer":
        assert prov["num_examples"] == 10 and len(prov["sha256"]) == 64
    else:
        assert prov["local"] is True and prov["data_files"][0]["sha256"]
    json.dumps(prov)


def test_sft_provenance_names_the_source_and_the_demo_route(demo):
    _, cfg = demo
    for source in registry.SFT_SOURCES:
        _, prov = registry.sft_input(cfg, source)
        assert (prov["source"], prov["demo"]) == (source, True)
    _, live = registry.sft_input(deep_merge(cfg, {"demo": False}), "primer")
    assert live["demo"] is False


def test_dolly_samples_keep_the_file_order(demo):
    _, cfg = demo
    samples, _ = registry.sft_input(cfg, "dolly15k")
    assert [s.meta["index"] for s in samples] == list(range(len(DOLLY_ROWS)))


@pytest.mark.parametrize(
    "call, message",
    [
        (
            lambda cfg: registry.sft_input(cfg, "wiki"),
            "unknown SFT source 'wiki'; expected one of " + "dolly15k, oasst1, primer",
        ),
        (
            lambda cfg: registry.stream_input_files(cfg, "books"),
            "unknown stream source 'books'; expected one of " + "wiki, roam, primer",
        ),
        (
            lambda cfg: registry.source_input_files(cfg, "books"),
            "unknown source 'books'; expected one of fineweb_edu, wikitext, gutenberg, roam, dolly15k, oasst1, primer",
        ),
    ],
)
def test_an_unknown_source_is_refused_with_the_choices(demo, call, message):
    with pytest.raises(ValueError) as err:
        call(demo[1])
    assert str(err.value) == message


def test_demo_data_file_patterns_may_reach_into_subfolders(demo, tmp_path):
    root, cfg = demo
    deep = tmp_path / "mirror" / "2024" / "fineweb"
    deep.mkdir(parents=True)
    shutil.copy(root / "fineweb_edu" / "part-0.parquet", deep / "part-0.parquet")
    nested = deep_merge(
        cfg, {"sources": {"fineweb_edu": {"demo_data_files": {"train": str(tmp_path / "**" / "*.parquet")}}}}
    )
    assert registry.source_input_files(nested, "fineweb_edu") == [str(deep / "part-0.parquet")]


def test_pretrain_provenance_records_what_was_asked_for(demo):
    """The static provenance that every pretrain meta.json carries, before anything is read."""
    root, cfg = demo
    web = registry.pretrain_input(cfg, "fineweb_edu").provenance
    s = cfg["sources"]["fineweb_edu"]
    assert {k: web[k] for k in ("source", "demo", "dataset_id", "config", "split", "streaming", "shuffle_buffer")} == {
        "source": "fineweb_edu", "demo": True, "dataset_id": s["dataset_id"], "config": s["config"],
        "split": s["split"], "streaming": True, "shuffle_buffer": s["shuffle_buffer"],
    }  # fmt: skip
    assert (web["seed"], web["revision_requested"], web["data_files_globs"]) == (
        cfg["seed"], s["revision"], s["demo_data_files"],
    )  # fmt: skip
    wiki = registry.pretrain_input(cfg, "wikitext")
    w = cfg["sources"]["wikitext"]
    assert wiki.kind == "presplit" and (wiki.provenance["splits"], wiki.provenance["streaming"]) == (
        {"train": w["train_split"], "val": w["val_split"]}, False,
    )  # fmt: skip
    assert wiki.provenance["document"].startswith("article: lines from a ' = Title = ' heading")
    roam = registry.pretrain_input(cfg, "roam")
    assert roam.kind == "presplit" and {k: roam.provenance[k] for k in ("source", "demo", "dataset_id", "seed")} == {
        "source": "roam", "demo": True, "dataset_id": "roam", "seed": cfg["seed"],
    }  # fmt: skip
    live = registry.pretrain_input(deep_merge(cfg, {"demo": False}), "wikitext").provenance
    assert live["demo"] is False and "data_files_globs" not in live


def test_oasst1_sft_keeps_trees_in_first_appearance_order(demo):
    _, cfg = demo
    samples, _ = registry.sft_input(cfg, "oasst1")
    assert list(dict.fromkeys(s.meta["group"] for s in samples)) == ["t0", "t1", "t2", "t3"]


def test_wikitext_lines(demo):
    _, cfg = demo
    lines = registry.wikitext_lines(cfg)
    assert {k: len(v) for k, v in lines.items()} == {"train": 6, "val": 2, "test": 2}


def test_source_input_files(demo):
    root, cfg = demo
    assert registry.source_input_files(cfg, "fineweb_edu") == sorted(
        str(root / "fineweb_edu" / f"part-{i}.parquet") for i in (0, 1)
    )
    assert registry.source_input_files(cfg, "wikitext") == sorted(
        str(root / "wikitext" / f"{s}.parquet") for s in ("test", "train", "validation")
    )
    notes = registry.source_input_files(cfg, "roam")
    assert len(notes) == 12 and notes == sorted(notes) and not any(".obsidian" in n for n in notes)
    assert registry.source_input_files(cfg, "primer") == [str(root / "primer.jsonl")]
    assert registry.stream_input_files(cfg, "primer") == [str(root / "primer.txt")]
    assert registry.stream_input_files(cfg, "roam") == notes
    live = deep_merge(cfg, {"demo": False, "sources": {"roam": {"root": str(root / "missing")}}})
    assert registry.source_input_files(live, "oasst1") == [] and registry.source_input_files(live, "roam") == []


def test_missing_demo_files_fail_loudly(tmp_path):
    cfg = prepare_config(
        {"demo": True, "sources": {"dolly15k": {"demo_data_files": {"train": str(tmp_path / "none.jsonl")}}}}
    )
    samples, _ = registry.sft_input(cfg, "dolly15k")
    with pytest.raises(FileNotFoundError, match="none.jsonl"):
        next(samples)


def test_registry_import_and_input_files_stay_light(demo):
    """The Snakefile imports these at parse time: no torch, no datasets, no numpy."""
    _, cfg = demo
    code = textwrap.dedent(f"""
        import json, sys
        from niels_gpt.data import prepared, registry
        cfg = json.loads({json.dumps(json.dumps(cfg))})
        for s in registry.PRETRAIN_SOURCES + registry.SFT_SOURCES:
            registry.source_input_files(cfg, s)
        for s in registry.STREAM_SOURCES:
            registry.stream_input_files(cfg, s)
        from niels_gpt import config, layout
        heavy = [m for m in ("torch", "datasets", "numpy", "pyarrow") if m in sys.modules]
        print(json.dumps(heavy))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert json.loads(out.stdout) == []


# ---- the hub settings of every hub source reach datasets.load_dataset (demo off; a fake hub, offline) ----

# Settings unlike the defaults, so a value the code ignored or hard-coded would reach the fake hub differently.
HUB_SETTINGS = {
    "fineweb_edu": {"dataset_id": "mirror/fineweb-edu", "config": "CC-TEST", "split": "web", "revision": "r-fw"},
    "gutenberg": {"dataset_id": "mirror/gutenberg", "config": "books-en", "split": "books", "revision": "r-gb"},
    "wikitext": {
        "dataset_id": "mirror/wikitext",
        "config": "wt-test",
        "train_split": "wtrain",
        "val_split": "wval",
        "revision": "r-wt",
    },
    "dolly15k": {"dataset_id": "mirror/dolly", "split": "dtrain", "revision": "r-dolly"},
    "oasst1": {"dataset_id": "mirror/oasst1", "split": "otrain", "revision": "r-oasst"},
}


def fake_hub(monkeypatch, root) -> list[dict]:
    """datasets.load_dataset and load_dataset_builder for the HUB_SETTINGS ids: records each read (a streamed
    one when the stream is opened, a prepared one when `prepared.open_split` opens its split), serves the demo
    tree's files for the split asked for (an unknown split fails as on the hub); local-file calls pass through."""
    import datasets

    real = datasets.load_dataset
    served = {
        "mirror/fineweb-edu": {"web": root / "fineweb_edu" / "part-0.parquet"},
        "mirror/gutenberg": {"books": root / "gutenberg" / "books.parquet"},
        "mirror/wikitext": {
            "wtrain": root / "wikitext" / "train.parquet",
            "wval": root / "wikitext" / "test.parquet",
            "test": root / "wikitext" / "test.parquet",
        },
        "mirror/dolly": {"dtrain": root / "dolly15k" / "databricks-dolly-15k.jsonl"},
        "mirror/oasst1": {"otrain": root / "oasst1" / "train.parquet"},
    }
    calls = []

    def load_dataset(path, name=None, *, split, streaming=False, revision=None, **kwargs):
        if path in ("parquet", "json"):
            return real(path, name, split=split, streaming=streaming, **kwargs)
        calls.append({"path": path, "name": name, "split": split, "revision": revision, "streaming": streaming})
        if split not in served[path]:
            raise ValueError(f'Unknown split "{split}". Should be one of {list(served[path])}.')
        file = str(served[path][split])
        return real(
            "json" if file.endswith(".jsonl") else "parquet", data_files={split: file}, split=split, streaming=streaming
        )

    real_builder = datasets.load_dataset_builder
    real_open_split = prepared.open_split

    def load_dataset_builder(path, name=None, *, revision=None, **kwargs):
        if path in ("parquet", "json"):
            return real_builder(path, name, **kwargs)

        def stream(split):
            return load_dataset(path, name, split=split, streaming=True, revision=revision)

        files = {split: str(file) for split, file in served[path].items()}
        kind = "json" if next(iter(files.values())).endswith(".jsonl") else "parquet"
        builder = FakeBuilder(
            stream, {split: [file] for split, file in files.items()}, real_builder(kind, data_files=files)
        )
        builder.call = {"path": path, "name": name, "revision": revision}
        return builder

    def open_split(builder, split):  # a prepared read of the fake hub: recorded, then the served files' split
        if isinstance(builder, FakeBuilder):
            call = builder.call
            calls.append({"path": call["path"], "name": call["name"], "split": split, "revision": call["revision"]})
            calls[-1]["streaming"] = False
            builder = builder.prepared
        return real_open_split(builder, split)

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    monkeypatch.setattr(datasets, "load_dataset_builder", load_dataset_builder)
    monkeypatch.setattr(prepared, "open_split", open_split)
    return calls


def hub_config(source: str, **extra) -> dict:
    return prepare_config(deep_merge({"seed": 3, "sources": {source: HUB_SETTINGS[source]}}, extra))


@pytest.mark.parametrize("source", ["fineweb_edu", "gutenberg"])
def test_stream_hub_settings_reach_load_dataset(demo, monkeypatch, source):
    root, _ = demo
    calls = fake_hub(monkeypatch, root)
    inp = registry.pretrain_input(hub_config(source), source)
    texts = sorted(s.text for s in inp.stream)
    s = HUB_SETTINGS[source]
    assert calls == [
        {
            "path": s["dataset_id"],
            "name": s["config"],
            "split": s["split"],
            "revision": s["revision"],
            "streaming": True,
        }
    ]
    want = pq_texts(root / ("fineweb_edu/part-0.parquet" if source == "fineweb_edu" else "gutenberg/books.parquet"))
    assert texts == sorted(want)
    assert (
        inp.provenance["revision_requested"] == s["revision"]
        and inp.provenance["stream"]["revision_requested"] == s["revision"]
    )


def pq_texts(path) -> list[str]:
    import pyarrow.parquet as pq

    return pq.read_table(path).column("text").to_pylist()


def test_wikitext_hub_settings_reach_load_dataset(demo, monkeypatch):
    root, _ = demo
    calls = fake_hub(monkeypatch, root)
    inp = registry.pretrain_input(hub_config("wikitext"), "wikitext")
    train, val = [s.meta["title"] for s in inp.train], [s.meta["title"] for s in inp.val]
    assert (train, val) == (["Alpha River", "Beta Stone"], ["Delta"])  # wval is served from the test file
    s = HUB_SETTINGS["wikitext"]
    assert [(c["path"], c["name"], c["split"], c["revision"]) for c in calls] == [
        (s["dataset_id"], s["config"], split, s["revision"]) for split in ("wtrain", "wval")
    ]
    lines = registry.wikitext_lines(hub_config("wikitext"))  # the wiki byte stream reads the same splits
    assert lines["val"] == [" = Delta = ", " Delta waits . "]
    assert [(c["name"], c["split"]) for c in calls[2:4]] == [(s["config"], "wtrain"), (s["config"], "wval")]


@pytest.mark.parametrize("source", ["dolly15k", "oasst1"])
def test_sft_hub_settings_reach_load_dataset_and_the_cache(demo, monkeypatch, tiny_tokenizer_path, tmp_path, source):
    from niels_gpt.sft.job import build_sft_source

    root, _ = demo
    calls = fake_hub(monkeypatch, root)
    meta = build_sft_source(hub_config(source), source, tokenizer_path=tiny_tokenizer_path, out_dir=str(tmp_path))
    s = HUB_SETTINGS[source]
    assert calls == [
        {"path": s["dataset_id"], "name": None, "split": s["split"], "revision": s["revision"], "streaming": False}
    ]
    assert meta["dataset_name"] == s["dataset_id"] and meta["provenance"]["revision_requested"] == s["revision"]
    want = len(DOLLY_ROWS) if source == "dolly15k" else 8  # 4 trees of 2 threads each
    assert meta["train_examples"] + meta["val_examples"] == want


@pytest.mark.parametrize("source", registry.HUB_SOURCES)
def test_demo_reads_the_demo_data_files_and_never_the_hub(demo, monkeypatch, source):
    root, cfg = demo
    calls = fake_hub(monkeypatch, root)
    if source in registry.SFT_SOURCES:
        samples, prov = registry.sft_input(cfg, source)
        assert list(samples)
        reads = [prov]
    else:
        inp = registry.pretrain_input(cfg, source)
        for split in (inp.stream, inp.train, inp.val):
            assert split is None or list(split)
        reads = [inp.provenance[k] for k in ("stream", "train", "val") if k in inp.provenance]
    files = {f["path"] for read in reads for f in read["data_files"]}
    globs = cfg["sources"][source]["demo_data_files"].values()
    want = {f for pattern in globs for f in glob.glob(pattern)}
    assert calls == [] and files and files <= want
    assert all(read["local"] is True and read["revision"] is None for read in reads)


@pytest.mark.parametrize("source", registry.STREAMED_SOURCES)
def test_shuffle_buffer_size_decides_the_stream_order(demo, source):
    _, cfg = demo

    def order(buffer: int) -> list[str]:
        return [
            s.text
            for s in registry.pretrain_input(
                deep_merge(cfg, {"sources": {source: {"shuffle_buffer": buffer}}}), source
            ).stream
        ]

    unshuffled, small, large = order(0), order(2), order(64)
    assert sorted(small) == sorted(large) == sorted(unshuffled)
    assert len({tuple(unshuffled), tuple(small), tuple(large)}) == 3
