"""hub: HubRead (its checks, the loaders' keywords, splits), the hub call, take without reading on, the
revision actually read, the seeded shuffle, an unreachable hub."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import textwrap
from dataclasses import replace

import pytest

from niels_gpt.data.dolly import iter_dolly_sft
from niels_gpt.data.fineweb_edu import iter_fineweb_edu
from niels_gpt.data.gutenberg import iter_gutenberg
from niels_gpt.data.hub import HubRead, SourceUnavailableError, iter_rows, open_dataset, resolved_revision
from niels_gpt.data.oasst1 import iter_oasst1_sft
from niels_gpt.data.wikitext import iter_wikitext, load_wikitext
from tests.support.hub_files import HUB_SHA as SHA
from tests.support.hub_files import write_parquet


def test_a_read_is_one_frozen_value_with_the_hub_defaults():
    read = HubRead("org/set")
    assert (read.config, read.split, read.revision, read.data_files) == (None, "train", None, None)
    assert (read.streaming, read.shuffle, read.seed, read.shuffle_buffer_size) == (False, False, 42, 10_000)
    assert (read.take, read.num_parts, read.part, read.local) == (None, 1, 0, False)
    with pytest.raises(AttributeError):
        read.split = "validation"


@pytest.mark.parametrize(
    "options, message",
    [
        ({"take": -1}, "take must be >= 0 or None, got -1"),
        ({"num_parts": 2, "part": 2}, "part must be in 0..num_parts-1 with num_parts >= 1, got part=2, num_parts=2"),
        ({"num_parts": 0}, "part must be in 0..num_parts-1 with num_parts >= 1, got part=0, num_parts=0"),
        ({"data_files": {"train": 3}}, "data_files for split 'train' must be a glob, a path or a non-empty list"),
        ({"data_files": []}, "data_files for split 'train' must be a glob, a path or a non-empty list"),
    ],
)
def test_a_read_that_cannot_be_read_is_refused_when_made(options, message):
    with pytest.raises((ValueError, TypeError)) as err:
        HubRead("org/set", **options)
    assert str(err.value).startswith(message)


class _Opened(Exception):
    """Raised by a stand-in `open_dataset` once it has seen the read."""


# Each loader called with every read keyword the design gives it, each set away from its default, and the
# read that must reach open_dataset (a keyword a loader dropped or misplaced would leave a default in the
# read); then with a read given whole, which replaces those keywords.
STREAMED = {"split": "s", "streaming": False, "shuffle": False, "shuffle_buffer_size": 5, "seed": 1, "take": 2}
GIVEN = HubRead("d", "c", split="s", revision="r", data_files="f", num_parts=2, part=1)
KEYWORD_READS = {
    "fineweb_edu": (
        "text_fields",
        lambda **kw: iter_fineweb_edu(name="n", **STREAMED, **kw),
        HubRead("HuggingFaceFW/fineweb-edu", "n", **STREAMED),
    ),
    "gutenberg": (
        "text_fields",
        lambda **kw: iter_gutenberg(dataset_id="d", **STREAMED, **kw),
        HubRead("d", **STREAMED),
    ),
    "wikitext": (
        "wikitext",
        lambda **kw: iter_wikitext(config="c", split="s", take=3, **kw),
        HubRead("Salesforce/wikitext", "c", split="s", take=3),
    ),
    "load_wikitext": (
        "wikitext",
        lambda **kw: iter([load_wikitext(config="c", splits={"k": "train"}, **kw)]),
        HubRead("Salesforce/wikitext", "c", split="train"),
    ),
    "dolly15k": (
        "dolly",
        lambda **kw: iter_dolly_sft(split="s", seed=1, shuffle=False, take=2, **kw),
        HubRead("databricks/databricks-dolly-15k", split="s", seed=1, take=2),
    ),
    "oasst1": (
        "oasst1",
        lambda **kw: iter_oasst1_sft(split="s", seed=1, **kw),
        HubRead("OpenAssistant/oasst1", split="s", seed=1),
    ),
}


@pytest.mark.parametrize("loader", sorted(KEYWORD_READS))
def test_each_loaders_keywords_make_its_read(monkeypatch, loader):
    module, call, expected = KEYWORD_READS[loader]
    seen = []

    def fake_open(read, provenance=None):
        seen.append(read)
        raise _Opened

    monkeypatch.setattr(importlib.import_module(f"niels_gpt.data.{module}"), "open_dataset", fake_open)
    with pytest.raises(_Opened):
        next(call())
    with pytest.raises(_Opened):
        next(call(read=GIVEN))
    given = replace(GIVEN, split="train") if loader == "load_wikitext" else GIVEN  # it reads each split in turn
    assert seen == [expected, given]


def test_has_split_asks_the_local_files_only():
    assert HubRead("org/set").has_split("anything")
    assert HubRead("org/set", data_files="x.parquet").has_split("train")
    assert not HubRead("org/set", data_files="x.parquet").has_split("validation")
    assert HubRead("org/set", data_files={"validation": ["a", "b"]}).has_split("validation")


def test_open_dataset_calls_load_dataset_with_the_reads_hub_options(counting_hub):
    calls, _, _ = counting_hub
    read = HubRead("org/set", "cfg", split="web", revision="v2", streaming=True)
    prov: dict = {}
    open_dataset(read, prov)
    assert calls == [(("org/set", "cfg"), {"split": "web", "streaming": True, "revision": "v2"})]
    assert {k: prov[k] for k in ("dataset_id", "config", "split", "streaming", "local", "revision_requested")} == {
        "dataset_id": "org/set", "config": "cfg", "split": "web", "streaming": True, "local": False,
        "revision_requested": "v2",
    }  # fmt: skip


def test_take_stops_reading_the_stream(counting_hub):
    _, read, _ = counting_hub
    samples = list(iter_fineweb_edu(take=3, shuffle=False))
    assert [s.text for s in samples] == ["doc 0", "doc 1", "doc 2"]
    assert read[0] <= 4  # not the 10,000 rows behind it


def test_revision_is_read_from_the_data_file_urls(counting_hub):
    prov = {}
    list(iter_fineweb_edu(take=1, shuffle=False, provenance=prov))
    assert prov["revision"] == SHA and prov["revision_from"] == "data file urls"
    assert prov["dataset_id"] == "HuggingFaceFW/fineweb-edu" and prov["local"] is False


def test_revision_from_a_prepared_datasets_arrow_cache_path():
    class Prepared:
        cache_files = [{"filename": f"/c/datasets/databricks___dolly/default/0.0.0/{SHA}/dolly-train.arrow"}]

    assert resolved_revision(Prepared(), "databricks/dolly")["revision"] == SHA
    assert resolved_revision(object(), "x")["revision"] is None


def test_connection_error_while_streaming_becomes_source_unavailable(counting_hub, capsys, monkeypatch):
    """A stream datasets reads itself (not one resumable.py reads) names the dataset and the rows read."""
    from niels_gpt.data import hub

    monkeypatch.setattr(hub, "_announced", set())  # said once per process: this test's process is the suite's
    counting_hub[2].n = 2
    with pytest.raises(SourceUnavailableError, match=r"fineweb-edu.*the stream failed after 2 rows read"):
        list(iter_fineweb_edu(shuffle=False))
    assert "mid-stream resume is not available" in capsys.readouterr().err


def test_shuffle_is_seeded_and_take_applies_after_it(tmp_path):
    path = str(write_parquet(tmp_path / "x.parquet", {"text": [f"row {i}" for i in range(200)]}))

    def texts(**kw):
        options = {"streaming": True, "shuffle": True, "shuffle_buffer_size": 50, **kw}
        return [s.text for s in iter_fineweb_edu(read=HubRead("org/set", data_files={"train": path}, **options))]

    a, b, c = texts(seed=1), texts(seed=1), texts(seed=2)
    assert a == b != c
    assert sorted(a) == sorted(f"row {i}" for i in range(200))
    assert texts(seed=1, take=7) == a[:7]
    assert texts(shuffle=False, take=3) == ["row 0", "row 1", "row 2"]


@pytest.mark.parametrize("streaming", [True, False])
def test_iter_rows_walks_a_read_the_same_way_streamed_or_prepared(tmp_path, streaming):
    path = str(write_parquet(tmp_path / "x.parquet", {"text": [f"row {i}" for i in range(50)]}))
    read = HubRead("org/set", data_files=path, streaming=streaming, take=5)
    rows = list(iter_rows(open_dataset(read), read))
    assert rows == [(i, {"text": f"row {i}"}) for i in range(5)]
    shuffled = HubRead("org/set", data_files=path, streaming=streaming, shuffle=True, seed=1, shuffle_buffer_size=8)
    texts = [row["text"] for _, row in iter_rows(open_dataset(shuffled), shuffled)]
    assert sorted(texts) == sorted(f"row {i}" for i in range(50)) and texts != [f"row {i}" for i in range(50)]


def test_a_prepared_split_is_read_from_its_files_with_plain_reads_as_the_dataset_gives_it(tmp_path, monkeypatch):
    """Not through the memory map (its pages stay in the job's RSS): the same rows, in order, from several
    record batches and files; the Dataset itself is never iterated."""
    from datasets import Dataset, Value, concatenate_datasets, load_dataset

    from niels_gpt.data.hub import file_rows

    texts = [f"row {i} {'é' * (i % 3)}" for i in range(300)]
    paths = [str(write_parquet(tmp_path / f"x{k}.parquet", {"text": texts[k * 150 : (k + 1) * 150]})) for k in (0, 1)]
    ds = load_dataset("parquet", data_files=paths, split="train", cache_dir=str(tmp_path / "c"))
    want = list(ds)
    two_files = concatenate_datasets([ds, ds])
    assert len(two_files.cache_files) == 2 and list(file_rows(two_files)) == want + want
    cast = ds.cast_column("text", Value("large_string"))  # written anew: its file is its rows
    assert list(file_rows(cast)) == list(cast)
    assert file_rows(ds.rename_column("text", "body")) is None  # the same file, another schema: the Dataset reads it
    assert file_rows(ds.select([2, 1])) is None  # an order of its own
    assert file_rows(Dataset.from_dict({"m": [{"role": "user"}]})) is None  # kept in memory, and a struct
    monkeypatch.setattr(Dataset, "__iter__", lambda self: pytest.fail("the memory map was walked"))
    read = HubRead("org/set", data_files=paths)
    assert [row for _, row in iter_rows(open_dataset(read), read)] == want


def test_unreachable_hub_raises_source_unavailable_offline(tmp_path):
    """The real datasets code path with HF_HUB_OFFLINE=1 and a dataset id that exists nowhere."""
    code = textwrap.dedent("""
        from niels_gpt.data.hub import HubRead, SourceUnavailableError
        from niels_gpt.data.dolly import iter_dolly_sft
        try:
            next(iter_dolly_sft(read=HubRead("no-such-org/no-such-dataset-1f3a")))
        except SourceUnavailableError as e:
            assert isinstance(e, ConnectionError)
            print("OK", e)
    """)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("OK")
    assert "no-such-org/no-such-dataset-1f3a" in res.stdout and "demo=true" in res.stdout and "--demo" in res.stdout


def test_a_hub_whose_name_does_not_resolve_fails_within_seconds_naming_the_dataset_and_demo(tmp_path):
    """No network (a DNS failure on every host: socket.getaddrinfo refuses): no retry by either layer,
    one line naming the dataset and the demo switch."""
    code = textwrap.dedent("""
        import socket, time
        def no_dns(*args, **kwargs):
            raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")
        socket.getaddrinfo = no_dns
        from niels_gpt.data.hub import HubRead, SourceUnavailableError, open_dataset
        start = time.monotonic()
        try:
            open_dataset(HubRead("HuggingFaceFW/fineweb-edu", "CC-MAIN-2024-10", streaming=True))
        except SourceUnavailableError as e:
            print(f"{time.monotonic() - start:.1f}", e)
    """)
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env.update({"HF_HOME": str(tmp_path / "hf"), "HF_ENDPOINT": "https://huggingface.co", "HF_HUB_DISABLE_XET": "1"})
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    seconds, message = res.stdout.strip().split(" ", 1)
    assert float(seconds) < 10 and "\n" not in message, res.stdout  # huggingface_hub alone retries 23 s
    assert "HuggingFaceFW/fineweb-edu" in message and "demo=true" in message and "resolve" in message
