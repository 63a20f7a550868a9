"""prepared.py: a prepared split read from its Arrow cache files with plain reads gives datasets' own rows
(whole, in parts, a column selection), never maps the files, reads one record batch at a time, and leaves
what it cannot read plainly to the Dataset."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from niels_gpt.data.hub import HubRead, iter_rows, open_dataset
from niels_gpt.data.prepared import PreparedSplit, arrow_rows, open_split
from tests.support.hub_files import write_parquet

ROWS = 12_000  # 12 record batches of datasets' 1,000 rows, ~2.6 MB of text


def texts(n: int = ROWS) -> list[str]:
    return [f"row {i} " + "é" * (i % 7) + "x" * 200 for i in range(n)]


@pytest.fixture
def split_files(tmp_path) -> list[str]:
    """Two parquet files of one split: ROWS rows of text, an id and a flag."""
    rows = texts()
    half = ROWS // 2
    return [
        str(write_parquet(tmp_path / f"part-{k}.parquet", {"text": part, "id": list(range(k * half, k * half + half))}))
        for k, part in enumerate((rows[:half], rows[half:]))
    ]


def builder_of(files: list[str], cache: Path, max_shard_size: str | None = None):
    """The builder of `files`, prepared; with `max_shard_size`, the split in several Arrow files."""
    import datasets

    builder = datasets.load_dataset_builder("parquet", data_files={"train": files}, cache_dir=str(cache))
    builder.download_and_prepare(max_shard_size=max_shard_size)
    return builder


def no_dataset(builder, monkeypatch) -> None:
    """Building the memory-mapped Dataset fails the test."""
    monkeypatch.setattr(builder, "as_dataset", lambda *a, **k: pytest.fail("the Dataset was built"))


@pytest.mark.parametrize("max_shard_size", [None, "1MB"], ids=["one file", "sharded"])
def test_the_rows_are_the_datasets_own_in_order_without_building_it(split_files, tmp_path, monkeypatch, max_shard_size):
    builder = builder_of(split_files, tmp_path / "c", max_shard_size)
    want = list(builder.as_dataset(split="train"))
    no_dataset(builder, monkeypatch)
    split = open_split(builder, "train")
    assert isinstance(split, PreparedSplit) and len(split) == ROWS == split.num_rows
    assert (len(split.files) > 1) is (max_shard_size is not None)
    assert list(split) == want and split.column_names == ["text", "id"]
    assert list(split.select_columns(["id"])) == [{"id": row["id"]} for row in want]
    assert [r["filename"] for r in split.cache_files] == list(split.files) and split.files[0].endswith(".arrow")


@pytest.mark.parametrize("num_shards", [1, 2, 5, 7])
def test_a_contiguous_part_is_the_datasets_shard(split_files, tmp_path, monkeypatch, num_shards):
    builder = builder_of(split_files, tmp_path / "c", "1MB")
    ds = builder.as_dataset(split="train")
    want = [list(ds.shard(num_shards=num_shards, index=k, contiguous=True)) for k in range(num_shards)]
    no_dataset(builder, monkeypatch)
    split = open_split(builder, "train")
    parts = [split.shard(num_shards=num_shards, index=k, contiguous=True) for k in range(num_shards)]
    assert [list(part) for part in parts] == want
    assert sum(map(len, parts)) == ROWS


def test_rows_across_files_and_batches_are_sliced_exactly(split_files, tmp_path):
    builder = builder_of(split_files, tmp_path / "c")
    files = open_split(builder, "train").files
    whole = list(arrow_rows(files))
    for start, stop in [(0, 1), (999, 1001), (1500, 7400), (11_999, None), (5, 5)]:
        assert list(arrow_rows(files + files, start, stop)) == (whole + whole)[start:stop]
    assert list(arrow_rows(files + files, ROWS - 3, ROWS + 2)) == (whole + whole)[ROWS - 3 : ROWS + 2]


def _mapped(path: str) -> bool:
    real = os.path.realpath(path)
    with open("/proc/self/maps", encoding="utf-8") as maps:
        return any(line.rstrip().endswith(real) for line in maps)


def _bytes_read() -> int:
    with open("/proc/self/io", encoding="utf-8") as io:
        return int(next(line for line in io if line.startswith("rchar:")).split()[1])


@pytest.mark.skipif(not os.path.exists("/proc/self/io"), reason="Linux /proc counters")
def test_a_split_is_read_a_batch_at_a_time_and_never_mapped(split_files, tmp_path):
    """Memory that cannot grow with the split: hub.open_dataset + iter_rows of a prepared split map none of
    its Arrow files, and the first row has cost one record batch of reads, not the file."""
    read = HubRead("org/set", data_files=split_files)
    ds = open_dataset(read)
    (arrow,) = ds.files
    size = os.path.getsize(arrow)
    rows = iter_rows(ds, read)
    before = _bytes_read()
    first = next(rows)
    first_cost = _bytes_read() - before
    assert first == (0, {"text": texts(1)[0], "id": 0})
    assert size > 2_500_000 and first_cost < size / 6  # one batch is 1/12 of the file
    assert not _mapped(arrow)
    assert sum(1 for _ in rows) == ROWS - 1
    assert not _mapped(arrow)
    assert _bytes_read() - before >= size * 0.9  # the rest was read, by plain reads


def test_what_is_not_read_plainly_is_the_datasets(tmp_path, monkeypatch):
    """A split expression gives the Dataset (as load_dataset), and a nested column's rows are the Dataset's;
    random access builds the Dataset once."""
    from datasets import Dataset

    path = write_parquet(
        tmp_path / "x.parquet", {"m": [{"role": "user", "n": i} for i in range(30)], "k": list(range(30))}
    )
    builder = builder_of([str(path)], tmp_path / "c")
    ds = builder.as_dataset(split="train")
    assert isinstance(open_split(builder, "train[:10]"), Dataset)
    assert list(open_split(builder, "train[:10]")) == list(ds)[:10]
    split = open_split(builder, "train")
    assert isinstance(split, PreparedSplit) and not split.plain and split.select_columns("k").plain
    assert list(split) == list(ds) and list(split.select_columns("k")) == [{"k": i} for i in range(30)]
    assert split[3] == ds[3] and list(split.shard(num_shards=3, index=1)) == list(ds.shard(num_shards=3, index=1))
    strided = split.shard(num_shards=3, index=1, contiguous=False)  # not contiguous: the Dataset's own
    assert list(strided) == list(ds.shard(num_shards=3, index=1, contiguous=False))
    with pytest.raises(ValueError, match=r"\['nope'\].*columns: \['m', 'k'\]"):
        split.select_columns(["nope"])
    with pytest.raises(ValueError, match="Unknown split"):
        open_split(builder, "validation")


def test_a_shuffled_prepared_read_is_the_same_as_before(tmp_path):
    """A shuffled read takes rows at random (the Dataset's `ds[indices]`): the same order as a Dataset's."""
    from niels_gpt.data.hub import row_order

    path = write_parquet(tmp_path / "x.parquet", {"text": [f"row {i}" for i in range(50)]})
    read = HubRead("org/set", data_files=str(path), shuffle=True, seed=3, take=20)
    got = [row["text"] for _, row in iter_rows(open_dataset(read), read)]
    assert got == [f"row {i}" for i in row_order(50, shuffle=True, seed=3)[:20]]
