"""resumable.ShuffledStream: the rows of datasets 5.2's own `IterableDataset.shuffle(seed, buffer_size)`
(demo data, many uneven files and parts, the test hub; compared with datasets itself where 5.2 is
installed, and with the orders it gave, recorded, on every release), a saved position continues with the
same rows, a failed read is re-opened at its row (parquet: at its row group), a read failing past the
policy says how far it got, and a stream of other files is read by datasets itself, saying so."""

from __future__ import annotations

import io
import itertools
import json
import random
from dataclasses import replace

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from niels_gpt.data import resumable, stream_files
from niels_gpt.data.hub import HubRead, iter_rows, open_dataset, shard_parts
from niels_gpt.data.resumable import ShuffledStream, StaleStreamState, StreamPosition, StreamUnavailable
from niels_gpt.data.retry import RetryPolicy

FINEWEB_DEMO = {"train": "data/sample/fineweb_edu/*.parquet"}
GUTENBERG_DEMO = {"train": "data/sample/gutenberg/*.parquet"}
NO_WAIT = RetryPolicy(attempts=3, backoff_s=0)


@pytest.fixture(scope="module")
def uneven_files(tmp_path_factory):
    """13 parquet files of 0-300 rows in row groups of 7, 50 or 1000 rows (more files than the 10 read at once)."""
    folder = tmp_path_factory.mktemp("uneven")
    rng = random.Random(0)
    for f in range(13):
        n = rng.randint(0, 300)
        table = pa.table({"text": [f"document {f}-{i}" for i in range(n)], "id": [f"{f}-{i}" for i in range(n)]})
        pq.write_table(table, folder / f"train-{f:05d}-of-00013.parquet", row_group_size=rng.choice([7, 50, 1000]))
    return {"train": f"{folder}/*.parquet"}


def streamed(data_files, *, buffer: int = 100, shuffle: bool = True, seed: int = 3, **kw) -> HubRead:
    return HubRead(
        "org/name", streaming=True, shuffle=shuffle, shuffle_buffer_size=buffer, seed=seed, data_files=data_files, **kw
    )


def datasets_reproduced() -> bool:
    import datasets

    return datasets.__version__.startswith(stream_files.REPRODUCED_DATASETS)


# the order is datasets 5.2's: compared with datasets' own only where that release is installed
needs_reproduced_release = pytest.mark.skipif(
    not datasets_reproduced(), reason="datasets' own shuffle order is this one on 5.1 and 5.2 only (4.8, 5.0 differ)"
)


def reference(ds, read: HubRead) -> list[dict]:
    """What datasets itself yields for `read` (on datasets 5.2: the order ShuffledStream keeps)."""
    ds = shard_parts(ds, read)
    return list(ds.shuffle(seed=read.seed, buffer_size=read.shuffle_buffer_size) if read.shuffle else ds)


def ours(ds, read: HubRead, start=None) -> list[dict]:
    """What ShuffledStream yields for `read` (it takes the part itself, from the whole dataset's files)."""
    return [row for _, row in ShuffledStream(ds, read, start=start)]


@needs_reproduced_release
@pytest.mark.parametrize("data_files", [FINEWEB_DEMO, GUTENBERG_DEMO], ids=["fineweb", "gutenberg"])
@pytest.mark.parametrize("buffer,shuffle", [(1, True), (7, True), (100, True), (10_000, True), (100, False)])
def test_rows_come_in_datasets_shuffle_order_on_the_demo_data(isolated_hf_cache, data_files, buffer, shuffle):
    read = streamed(data_files, buffer=buffer, shuffle=shuffle)
    ds = open_dataset(read, {})
    assert ours(ds, read) == reference(ds, read)


@needs_reproduced_release
@pytest.mark.parametrize("num_parts", [1, 3])
@pytest.mark.parametrize("buffer", [16, 1000])
def test_rows_come_in_datasets_shuffle_order_over_many_uneven_files(isolated_hf_cache, uneven_files, num_parts, buffer):
    for part in range(num_parts):
        read = streamed(uneven_files, buffer=buffer, seed=11, num_parts=num_parts, part=part)
        ds = open_dataset(read, {})
        expected = reference(ds, read)
        assert ours(ds, read) == expected and len(expected) > 0


@needs_reproduced_release
@pytest.mark.parametrize("buffer", [10, 1000])
def test_rows_come_in_datasets_shuffle_order_from_the_test_hub(isolated_hf_cache, hub, buffer):
    read = HubRead(
        "HuggingFaceFW/fineweb-edu", "default", streaming=True, shuffle=True, shuffle_buffer_size=buffer, seed=5
    )
    ds = open_dataset(read, {})
    assert ds.num_shards == 4
    assert ours(ds, read) == reference(ds, read)
    assert stream_files.supports(ds)  # the hub's parquet files are read here, not by datasets


def round_trip(state):
    """A state as a checkpoint stores it: JSON and an Arrow IPC file."""
    info, table = state
    sink = io.BytesIO()
    if table is not None:
        with pa.ipc.new_file(sink, table.schema) as out:
            out.write_table(table)
        table = pa.ipc.open_file(pa.BufferReader(sink.getvalue())).read_all()
    return json.loads(json.dumps(info)), table


@pytest.mark.parametrize("shuffle", [True, False])
def test_a_saved_position_continues_with_the_same_rows(isolated_hf_cache, uneven_files, shuffle):
    read = streamed(uneven_files, buffer=40, shuffle=shuffle)
    ds = open_dataset(read, {})
    expected = ours(ds, read)
    for cut in (0, 1, 19, 20, 21, 333, len(expected) - 1, len(expected)):
        stream = ShuffledStream(ds, read)
        rows = iter(stream)
        head = [row for _, row in itertools.islice(rows, cut)]
        state = round_trip(stream.state())
        rows.close()
        again = ShuffledStream(ds, read, start=state)
        tail = list(again)
        assert head + [row for _, row in tail] == expected, cut
        assert [i for i, _ in tail] == list(range(cut, len(expected)))


def test_take_counts_from_the_first_row_across_a_resume(isolated_hf_cache, uneven_files):
    read = streamed(uneven_files, buffer=40, take=100)
    ds = open_dataset(read, {})
    stream = ShuffledStream(ds, read)
    head = list(itertools.islice(iter(stream), 30))
    tail = list(ShuffledStream(ds, read, start=stream.state()))
    assert len(head) + len(tail) == 100 and tail[-1][0] == 99


def test_a_position_of_another_stream_is_refused(isolated_hf_cache, uneven_files):
    read = streamed(uneven_files, buffer=40)
    ds = open_dataset(read, {})
    stream = ShuffledStream(ds, read)
    list(itertools.islice(iter(stream), 5))
    with pytest.raises(StaleStreamState, match="another stream"):
        ShuffledStream(ds, replace(read, seed=4), start=stream.state())
    with pytest.raises(StaleStreamState):
        ShuffledStream(ds, read, identity={"revision": "f" * 40}, start=stream.state())


def failing_fetch(monkeypatch, fail_on: set[int]):
    """Make the `fail_on`-th fetches of any group raise a ConnectionError."""
    real, calls = resumable._Group.fetch, [0]

    def fetch(self):
        calls[0] += 1
        if calls[0] in fail_on:
            raise ConnectionError("injected reset")
        return real(self)

    monkeypatch.setattr(resumable._Group, "fetch", fetch)
    return calls


def test_a_failed_read_is_reopened_where_it_stopped(isolated_hf_cache, uneven_files, monkeypatch, capsys):
    read = replace(streamed(uneven_files, buffer=40), retry=NO_WAIT)
    ds = open_dataset(read, {})
    expected = ours(ds, read)
    failing_fetch(monkeypatch, {15, 16, 40})
    assert ours(ds, read) == expected
    err = capsys.readouterr().err
    assert err.count("injected reset") == 3 and "re-opening at row" in err and "try 2 of 3" in err


def test_a_read_failing_past_the_policy_says_how_far_it_got(isolated_hf_cache, uneven_files, monkeypatch):
    read = replace(streamed(uneven_files, buffer=40), retry=RetryPolicy(attempts=2, backoff_s=0))
    ds = open_dataset(read, {})
    failing_fetch(monkeypatch, set(range(30, 100)))
    stream = ShuffledStream(ds, read)
    rows = []
    with pytest.raises(StreamUnavailable, match=r"'org/name': a read of the stream failed 2 times in a row") as info:
        for _, row in stream:
            rows.append(row)
    assert info.value.rows_read == len(rows) > 0 and f"{len(rows):,} rows read so far" in str(info.value)
    assert info.value.retries == 1
    stream.groups[0].reset()  # the position is intact: a new stream continues from it
    monkeypatch.undo()
    assert rows + [row for _, row in ShuffledStream(ds, read, start=stream.state())] == ours(ds, read)


def test_a_file_reopened_mid_way_starts_at_its_row_group(isolated_hf_cache, tmp_path, monkeypatch):
    path = tmp_path / "train-00000-of-00001.parquet"
    pq.write_table(pa.table({"text": [f"row {i}" for i in range(100)]}), path, row_group_size=7)
    read = streamed({"train": str(path)}, shuffle=False)
    ds = open_dataset(read, {})
    stream = ShuffledStream(ds, read)
    list(itertools.islice(iter(stream), 1))
    group = stream.groups[0]
    group.pos, read_groups = resumable._Pos(0, 45), []
    real = pq.ParquetFile.read_row_group
    monkeypatch.setattr(
        pq.ParquetFile, "read_row_group", lambda self, i, **kw: read_groups.append(i) or real(self, i, **kw)
    )
    group.reset()
    table, end = group.fetch()
    assert read_groups == list(range(6, 15))  # row 45 lies in row group 6 (rows 42-48): the ones before are skipped
    assert table.column("text").to_pylist() == [f"row {i}" for i in range(45, 100)]
    assert end == resumable._Pos(1, 0, True)  # the file's end is known at once: a saved position never points at it


def test_iter_rows_registers_the_stream_and_starts_at_the_reads_position(isolated_hf_cache, uneven_files):
    read = streamed(uneven_files, buffer=40)
    ds = open_dataset(read, {})
    position = StreamPosition()
    rows = iter_rows(ds, replace(read, position=position), {})
    head = [row for _, row in itertools.islice(rows, 50)]
    state = position.stream.state()
    tail = [row for _, row in iter_rows(ds, replace(read, position=StreamPosition(state)), {})]
    assert head + tail == ours(ds, read)


def test_a_stream_of_other_files_is_read_by_datasets_itself_and_says_so(isolated_hf_cache, tmp_path):
    path = tmp_path / "train-00000-of-00001.jsonl"
    path.write_text("".join(json.dumps({"text": f"row {i}"}) + "\n" for i in range(30)))
    read = streamed({"train": str(path)}, buffer=8)
    ds = open_dataset(read, {})
    assert not stream_files.supports(ds)
    prov: dict = {}
    position = StreamPosition()
    rows = [row for _, row in iter_rows(ds, replace(read, position=position), prov)]
    assert position.stream is None and rows == reference(ds, read)
    assert prov["resume"].startswith("mid-stream resume is not available") and "datasets" in prov["libraries"]


# sha256 (first 16 hex) of the ids in datasets 5.2's shuffle order of `uneven_files` (seed 11), by (parts,
# part, buffer): ShuffledStream gives these on every supported datasets release
RECORDED_ORDERS = {
    (1, 0, 40): (1967, "9c6a77959e64a95d"),
    (3, 0, 16): (929, "0b1f5f276fe2e8c5"),
    (3, 1, 16): (748, "71a3184c8e3f9fd7"),
    (3, 2, 16): (290, "48e2abab297b6e0c"),
}


@pytest.mark.parametrize("parts,part,buffer", sorted(RECORDED_ORDERS))
def test_the_order_is_datasets_5_2s_on_every_release(isolated_hf_cache, uneven_files, parts, part, buffer):
    import hashlib

    read = streamed(uneven_files, buffer=buffer, seed=11, num_parts=parts, part=part)
    ids = [row["id"] for row in ours(open_dataset(read, {}), read)]
    assert (len(ids), hashlib.sha256("\n".join(ids).encode()).hexdigest()[:16]) == RECORDED_ORDERS[parts, part, buffer]


@pytest.mark.parametrize("shuffle", [True, False])
def test_a_stream_of_some_columns_keeps_the_rows_and_resumes_with_them(isolated_hf_cache, uneven_files, shuffle):
    read = streamed(uneven_files, buffer=40, shuffle=shuffle)
    ds = open_dataset(read, {})
    expected = [{"id": row["id"]} for row in ours(ds, read)]
    for cut in (0, 21, 333, len(expected)):
        stream = ShuffledStream(ds, read, columns=["id"])
        rows = iter(stream)
        head = [row for _, row in itertools.islice(rows, cut)]
        state = round_trip(stream.state())
        rows.close()
        tail = [row for _, row in ShuffledStream(ds, read, start=state, columns=["id"])]
        assert head + tail == expected, cut
    with pytest.raises(StaleStreamState):  # a position of all the columns is not one of some
        list(ShuffledStream(ds, read, start=state))


def test_pyproject_states_the_supported_datasets_range_and_the_installed_release_is_in_it():
    from importlib.metadata import version
    from pathlib import Path

    from packaging.specifiers import SpecifierSet

    from niels_gpt.data.stream_files import SUPPORTED_DATASETS

    pyproject = (Path(__file__).parents[2] / "pyproject.toml").read_text()
    assert f'"datasets{SUPPORTED_DATASETS}",' in pyproject
    assert version("datasets") in SpecifierSet(SUPPORTED_DATASETS)
