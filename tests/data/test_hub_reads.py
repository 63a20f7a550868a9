"""hub.open_dataset against the test hub, in this process: every repository the config can name read
through the real `datasets.load_dataset(id, config, ...)` path, streamed and prepared, the commit it
read recorded, a pinned commit, and one error naming what the repository lacks."""

from __future__ import annotations

from dataclasses import replace

import pyarrow.parquet as pq
import pytest

from niels_gpt.config import prepare_config
from niels_gpt.data.hub import HubDatasetError, HubRead, iter_rows, open_dataset
from niels_gpt.data.registry import HUB_SOURCES, hub_read

# The gutenberg alternative as README says to select it: the raw books, whose splits are languages.
RAW_GUTENBERG = {"dataset_id": "manu/project_gutenberg", "split": "en"}
READS = {source: {} for source in HUB_SOURCES} | {"gutenberg_raw": RAW_GUTENBERG}


def config_read(source: str) -> HubRead:
    """The read config.yaml's defaults make of `source` (demo off)."""
    section = "gutenberg" if source == "gutenberg_raw" else source
    cfg = prepare_config({"sources": {section: READS[source]}})
    return hub_read(cfg, section)


def rows_on_the_hub(hub_root, read: HubRead) -> int:
    root, layouts = hub_root
    files = layouts[read.dataset_id][read.config or "default"][read.split]
    if files[0].endswith(".jsonl"):
        return sum(1 for _ in open(root / read.dataset_id / files[0], encoding="utf-8"))
    return sum(pq.read_metadata(root / read.dataset_id / f).num_rows for f in files)


@pytest.mark.parametrize("flip", [False, True], ids=["as configured", "streaming flipped"])
@pytest.mark.parametrize("source", sorted(READS))
def test_every_source_reads_every_row_of_its_repository_and_records_the_commit(hub, hub_root, source, flip):
    read = config_read(source)
    if flip:
        read = replace(read, streaming=not read.streaming, shuffle=False)
    prov: dict = {}
    rows = list(iter_rows(open_dataset(read, prov), read, prov))
    assert len(rows) == rows_on_the_hub(hub_root, read)
    assert (prov["dataset_id"], prov["revision"], prov["local"]) == (read.dataset_id, hub.sha(read.dataset_id), False)
    assert prov["streaming"] is read.streaming


def test_a_revision_pinned_to_the_commit_reads_it(hub, hub_root):
    read = replace(config_read("fineweb_edu"), revision=hub.sha("HuggingFaceFW/fineweb-edu"), shuffle=False)
    prov: dict = {}
    rows = list(iter_rows(open_dataset(read, prov), read))
    assert len(rows) == rows_on_the_hub(hub_root, read) and prov["revision"] == read.revision


@pytest.mark.parametrize(
    "source, change, message",
    [
        (
            "fineweb_edu",
            {"config": "CC-MAIN-1999-01"},
            "hub dataset 'HuggingFaceFW/fineweb-edu' config 'CC-MAIN-1999-01' does not exist; "
            "its configs: default, CC-MAIN-2024-10, CC-MAIN-2024-18.",
        ),
        (
            "gutenberg_raw",
            {"split": "train"},
            "hub dataset 'manu/project_gutenberg' has no split 'train'; its splits: en, de, fr.",
        ),
        (
            "oasst1",
            {"split": "dev"},
            "hub dataset 'OpenAssistant/oasst1' has no split 'dev'; its splits: train, validation.",
        ),
        (
            "wikitext",
            {"split": "valid"},
            "hub dataset 'Salesforce/wikitext' config 'wikitext-103-raw-v1' has no split 'valid'; "
            "its splits: test, train, validation.",
        ),
        (
            "dolly15k",
            {"dataset_id": "databricks/databricks-dolly-15k-typo"},
            "hub dataset 'databricks/databricks-dolly-15k-typo' does not exist on http://127.0.0.1:",
        ),
        (
            "fineweb_edu",
            {"revision": "v9.9-nope"},
            "hub dataset 'HuggingFaceFW/fineweb-edu' has no revision 'v9.9-nope' (a branch, tag or commit sha); "
            "its default branch is at commit {sha}: pin it with `revision: {sha}`",
        ),
    ],
)
def test_a_read_of_what_the_repository_lacks_is_one_error_naming_it_and_what_it_has(hub, source, change, message):
    read = replace(config_read(source), **change)
    with pytest.raises(HubDatasetError) as err:
        open_dataset(read)
    assert str(err.value).startswith(message.format(sha=hub.sha("HuggingFaceFW/fineweb-edu")))
    assert "\n" not in str(err.value)


def test_a_long_list_of_configs_is_cut_in_the_error_line(hub, monkeypatch):
    import datasets

    names = [f"CC-MAIN-{2013 + i // 4}-{i % 4:02d}" for i in range(95)]
    monkeypatch.setattr(datasets, "get_dataset_config_names", lambda *a, **k: names)
    with pytest.raises(HubDatasetError, match=r"its configs: CC-MAIN-2013-00, .*, CC-MAIN-2022-03 and 55 more\. Set"):
        open_dataset(replace(config_read("fineweb_edu"), config="CC-MAIN-1999-01"))
