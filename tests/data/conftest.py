"""Fixtures of the source loader tests: every test here reads through `datasets` with an isolated cache;
the demo tree of every source; the local wikitext splits in the hub schema; a fake hub that counts what
is read."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from niels_gpt.config import prepare_config
from tests.support.hub_files import HUB_SHA, WIKI_TEST, WIKI_TRAIN, WIKI_VAL, write_demo_tree, write_parquet


class FakeBuilder:
    """What `datasets.load_dataset_builder` returns, as far as `hub.open_dataset` uses it for a streamed
    read: `config.data_files` ({split: [file, ...]}) and `as_streaming_dataset(split)` (`stream(split)`);
    for a prepared read, `download_and_prepare()` prepares `prepared` (a real builder of local files)."""

    def __init__(self, stream, data_files: dict, prepared=None):
        self.config = SimpleNamespace(data_files=data_files)
        self._stream = stream
        self.prepared = prepared

    def as_streaming_dataset(self, split):
        return self._stream(split)

    def download_and_prepare(self):
        self.prepared.download_and_prepare()


@pytest.fixture(autouse=True)
def _isolated_datasets_cache(isolated_hf_cache):
    """Prepared datasets write Arrow caches: every loader test keeps them out of ~/.cache."""


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """(root, cfg): every source's small files under root and the validated demo config that reads them."""
    root = tmp_path_factory.mktemp("demo")
    return root, prepare_config(write_demo_tree(root))


@pytest.fixture
def wiki_files(tmp_path) -> dict[str, str]:
    """{hub split: parquet file} of the three wikitext splits (rows are lines, as on the hub)."""
    return {
        s: str(write_parquet(tmp_path / f"{s}.parquet", {"text": rows}))
        for s, rows in (("train", WIKI_TRAIN), ("validation", WIKI_VAL), ("test", WIKI_TEST))
    }


@pytest.fixture
def counting_hub(monkeypatch):
    """`datasets.load_dataset_builder` (a streamed read) replaced by a stream of 10,000 rows {"text": "doc i",
    "id": "i"} whose data file URL names HUB_SHA (a jsonl file: datasets reads the stream itself). Returns
    (calls, rows_read, fail_after): `calls` lists each stream opened as ((id, config), {split, streaming,
    revision}); set `fail_after.n` to make the stream raise a connection error at that row."""
    import datasets

    calls, read, fail_after = [], [0], SimpleNamespace(n=None)
    files = [f"hf://datasets/HuggingFaceFW/fineweb-edu@{HUB_SHA}/data/CC-MAIN-2024-10/train-00000.jsonl"]

    def gen(files):
        for i in range(10_000):
            if fail_after.n is not None and i == fail_after.n:
                from huggingface_hub.utils import httpx

                raise httpx.ConnectError("name resolution failed")
            read[0] += 1
            yield {"text": f"doc {i}", "id": str(i)}

    def fake_builder(path, name=None, *, revision=None, **kwargs):
        def stream(split):
            calls.append(((path, name), {"split": split, "streaming": True, "revision": revision}))
            return datasets.IterableDataset.from_generator(gen, gen_kwargs={"files": files})

        return FakeBuilder(stream, {split: files for split in ("train", "web")})

    monkeypatch.setattr(datasets, "load_dataset_builder", fake_builder)
    return calls, read, fail_after
