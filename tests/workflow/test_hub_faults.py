"""A streamed pretrain build against the test hub that meets faults: a reset in a parquet body, a 429 with
Retry-After, 503s on the revision info, the tree listing, the README and a data read, stalls past the
client's timeout. Each build ends byte-identical to the fault-free one. A hub that stays down stops the
build with one message and nothing complete-looking; the rerun continues from the checkpoint without
fetching the files it had read, and ends byte-identical too.

Builds run in this process (tests/conftest.py points `datasets` at the test hub) from fresh caches
(a warm cache would answer instead of the hub), with huggingface_hub's sleeps between its own retries
shortened to 10 ms and short client timeouts: the number of tries each layer makes is the real one.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from niels_gpt.config import prepare_config
from niels_gpt.data.source import SourceUnavailableError
from niels_gpt.layout import RESUME_DIR
from niels_gpt.pretrain.job import build_pretrain_source
from niels_gpt.pretrain.resume import CHECKPOINT
from scripts.sample_data.sources import FINEWEB_SCHEMA
from tests.support.cache_files import file_hashes
from tests.support.hub import faults
from tests.support.hub.repos import write_card
from tests.support.hub.rows import fineweb_rows

REPO = "niels-gpt-tests/fineweb-faults"  # 12 files: more than the 10 a shuffled stream reads at once
FILES, ROWS, ROW_GROUP = 12, 40, 10
LIBRARY_SLEEP_S = 0.01  # huggingface_hub's waits between its own retries, shortened
CLIENT_TIMEOUT_S = 1.0  # HF_HUB_ETAG_TIMEOUT / HF_HUB_DOWNLOAD_TIMEOUT of these builds
HUB = {
    "attempts": 3,
    "backoff_s": 0.01,
    "max_backoff_s": 0.05,
    "max_wait_s": 5,
    "retry_after_cap_s": 0.05,
    "request_timeout_s": CLIENT_TIMEOUT_S,
    "stream_read_retries": 1,
    "stream_retry_interval_s": 0.01,
    "checkpoint_tokens": 1_500,
}
OURS = re.compile(r"try \d+ of \d+ in")  # the line our retries log


@pytest.fixture(scope="module")
def repo(hub, hub_root) -> str:
    """REPO written into the test hub: files of ROWS fineweb-edu rows in row groups of ROW_GROUP rows."""
    folder = Path(hub_root[0]) / REPO
    rows = list(fineweb_rows(7, "CC-MAIN-2024-10", FILES * ROWS))
    for k in range(FILES):
        path = folder / "data" / f"train-{k:05d}-of-{FILES:05d}.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        table = pa.Table.from_pylist(rows[k * ROWS : (k + 1) * ROWS], schema=FINEWEB_SCHEMA)
        pq.write_table(table, path, row_group_size=ROW_GROUP)
    configs = [{"config_name": "default", "data_files": [{"split": "train", "path": "data/*.parquet"}]}]
    write_card(folder, {"license": "odc-by", "configs": configs}, "fineweb-edu, for the fault tests")
    hub.rescan()
    return REPO


@pytest.fixture
def fresh(fresh_caches, monkeypatch):
    """Fresh caches (`fresh_caches`) and huggingface_hub's sleeps between its own retries shortened."""
    import time as real_time

    from huggingface_hub import file_download
    from huggingface_hub.utils import _http

    fast = SimpleNamespace(**{n: getattr(real_time, n) for n in ("time", "monotonic", "perf_counter")})
    fast.sleep = lambda s: real_time.sleep(min(s, LIBRARY_SLEEP_S))
    monkeypatch.setattr(_http, "time", fast)
    monkeypatch.setattr(file_download, "time", fast)
    return fresh_caches


@pytest.fixture
def fresh_caches(tmp_path, monkeypatch, isolated_hf_cache):
    """Fresh datasets and hub caches, no cached HfFileSystem, short client timeouts."""
    import datasets
    import huggingface_hub
    from huggingface_hub import HfFileSystem, constants

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "datasets")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(constants, "HF_HUB_ETAG_TIMEOUT", CLIENT_TIMEOUT_S)
    monkeypatch.setattr(constants, "HF_HUB_DOWNLOAD_TIMEOUT", CLIENT_TIMEOUT_S)
    HfFileSystem.clear_instance_cache()
    assert huggingface_hub.constants.HF_HUB_CACHE == str(tmp_path / "hub")
    return tmp_path


def config(repo: str, hub: dict = HUB) -> dict:
    fineweb = {
        "dataset_id": repo,
        "config": None,
        "shuffle_buffer": 40,
        "max_train_tokens": None,
        "max_val_tokens": None,
        "val_doc_prob": 0.1,
    }
    return prepare_config({"pretrain": {"shard_bytes": 4_000}, "sources": {"fineweb_edu": fineweb}, "hub": hub})


def build(repo: str, out: Path, tokenizer_path: str, hub: dict = HUB) -> dict:
    return build_pretrain_source(
        config(repo, hub), "fineweb_edu", tokenizer_path=tokenizer_path, out_dir=out, num_threads=1, log=lambda s: None
    )


def files_of(out: Path) -> dict[str, str]:
    return file_hashes(out, skip=RESUME_DIR)


def data_gets(requests) -> list:
    return [r for r in requests if r.method == "GET" and re.search(faults.PARQUET, r.path)]


@pytest.fixture(scope="module")
def reference(repo, hub, tiny_tokenizer_path, tmp_path_factory):
    """The fault-free build: its files and the data bytes it fetched."""
    out = tmp_path_factory.mktemp("reference")
    with pytest.MonkeyPatch.context() as mp:
        home = tmp_path_factory.mktemp("reference_caches")
        import datasets
        from huggingface_hub import HfFileSystem, constants

        mp.setattr(datasets.config, "HF_DATASETS_CACHE", home / "datasets")
        mp.setattr(constants, "HF_HUB_CACHE", str(home / "hub"))
        mp.setattr(datasets.config, "SLEEP_TIME_ON_THREADS_SHUTDOWN", 0)
        HfFileSystem.clear_instance_cache()
        start = len(hub.requests)
        meta = build(repo, out, tiny_tokenizer_path)
    fetched = sum(r.bytes_sent for r in data_gets(hub.requests.snapshot()[start:]))
    assert meta["dataset_revision"] == hub.sha(repo) and meta["documents_seen"] == FILES * ROWS
    return SimpleNamespace(files=files_of(out), data_bytes=fetched)


# (fault, whose retry recovers): "ours" = retry.py's (logged), "library" = huggingface_hub's own, "stops" = the
# build stops with the one-line message (more failures in a row than the tries of the layers that retry);
# where huggingface_hub releases differ, {major release: ...}: 1.x does not retry the tree listing
CASES = {
    "reset mid parquet body": (lambda: faults.reset(faults.PARQUET, after_bytes=300), "library"),
    "429 Retry-After on revision info": (lambda: faults.rate_limit(faults.REVISION_INFO, retry_after=30), "ours"),
    "503 x2 on revision info": (lambda: faults.status(faults.REVISION_INFO, 503, count=2), "ours"),
    "503 x2 on the tree listing": (lambda: faults.status(faults.TREE, 503, count=2), {1: "ours", 2: "library"}),
    "503 x8 on the tree listing": (lambda: faults.status(faults.TREE, 503, count=8), {1: "stops", 2: "ours"}),
    "503 x2 on the README HEAD": (lambda: faults.status(faults.README, 503, count=2, method="HEAD"), "library"),
    "503 x1 on the README GET": (lambda: faults.status(faults.README, 503, count=1, method="GET"), "ours"),
    "503 x8 on a data read": (lambda: faults.status(faults.PARQUET, 503, count=8, method="GET"), "ours"),
    "data read stalls past the timeout": (lambda: faults.stall(faults.PARQUET, 3 * CLIENT_TIMEOUT_S), "library"),
    "revision info stalls past the timeout": (lambda: faults.stall(faults.REVISION_INFO, 3 * CLIENT_TIMEOUT_S), "ours"),
    "tree listing stalls for ever": (lambda: faults.stall(faults.TREE, 120), {1: "ours", 2: "library"}),
}


def recovered_by(who) -> str:
    import huggingface_hub

    return who[int(huggingface_hub.__version__.split(".")[0])] if isinstance(who, dict) else who


@pytest.mark.parametrize("case", list(CASES))
def test_a_transient_fault_is_retried_and_the_build_is_byte_identical(
    case, repo, hub, reference, fresh, tiny_tokenizer_path, capsys
):
    make, who = CASES[case][0], recovered_by(CASES[case][1])
    hub.faults.clear()
    fault = hub.faults.add(make())
    try:
        if who == "stops":
            with pytest.raises(SourceUnavailableError) as info:
                build(repo, fresh / "out", tiny_tokenizer_path)
            assert "\n" not in str(info.value) and "run the same command again" in str(info.value)
            assert not (fresh / "out" / "meta.json").exists()
            return
        build(repo, fresh / "out", tiny_tokenizer_path)
    finally:
        hub.faults.clear()
    assert fault.hits == fault.count, f"the fault never fired: {case}"
    assert files_of(fresh / "out") == reference.files
    ours = OURS.findall(capsys.readouterr().err)
    assert bool(ours) == (who == "ours"), f"{case}: our retries {ours}, expected {who}'s"


def test_a_retry_after_is_honoured_up_to_its_cap(repo, hub, fresh, tiny_tokenizer_path, capsys):
    hub.faults.clear()
    hub.faults.add(faults.rate_limit(faults.REVISION_INFO, retry_after=30))
    try:
        build(repo, fresh / "out", tiny_tokenizer_path)
    finally:
        hub.faults.clear()
    assert f"try 2 of 3 in {HUB['retry_after_cap_s']:g} s" in capsys.readouterr().err  # 30 s, capped


def test_a_hub_down_past_the_retries_stops_the_build_and_the_rerun_continues(
    repo, hub, reference, fresh, tiny_tokenizer_path
):
    from niels_gpt.data.hub import HubRead, open_dataset
    from niels_gpt.data.resumable import ShuffledStream

    # the second file of the first group: read once that group's first file is done
    read = HubRead(repo, streaming=True, shuffle=True, shuffle_buffer_size=40, seed=42)
    target = ShuffledStream(open_dataset(read, {}), read).groups[0].names()[1].rsplit("/", 1)[-1]
    out = fresh / "out"
    hub.faults.clear()
    hub.faults.add(faults.status(re.escape(target) + "$", 503, count=10**6, method="GET"))
    first = len(hub.requests)
    try:
        with pytest.raises(SourceUnavailableError) as info:
            build(repo, out, tiny_tokenizer_path)
    finally:
        hub.faults.clear()
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"hub dataset {repo!r}: a read of the stream failed 3 times")
    assert "503" in message and "retries in all" in message and "rows read so far" in message
    assert "tokens written" in message and "run the same build again" in message
    assert not (out / "meta.json").exists() and [p for s in ("train", "val") for p in (out / s).iterdir()] == []

    state = json.loads((out / RESUME_DIR / CHECKPOINT).read_text())["stream"]
    names = state["identity"]["files"]
    done = {
        n.rsplit("/", 1)[-1] for g, (file, _, end) in zip(names, state["groups"]) for n in g[: len(g) if end else file]
    }
    assert len(done) >= 5  # files read to their end before the failure
    rerun = len(hub.requests)
    build(repo, out, tiny_tokenizer_path)
    assert files_of(out) == reference.files and not (out / RESUME_DIR).exists()
    schema_read, *again = data_gets(hub.requests.snapshot()[rerun:])
    # load_dataset reads the first file's footer on every open (datasets infers the features): not the stream
    first_read = data_gets(hub.requests.snapshot()[first:rerun])[0]
    assert (schema_read.path, schema_read.range) == (first_read.path, first_read.range)
    assert again and not {r.path.rsplit("/", 1)[-1] for r in again} & done  # the stream never fetches them again
    refetched = sum(r.bytes_sent for r in again)
    assert refetched < 0.5 * reference.data_bytes, (refetched, reference.data_bytes)


def test_a_hub_answering_429_to_every_call_stops_the_build_with_one_line(repo, hub, fresh, tiny_tokenizer_path):
    import time

    hub.faults.clear()
    hub.faults.add(faults.rate_limit(".", retry_after=1, count=10**6))
    start = time.monotonic()
    try:
        with pytest.raises(SourceUnavailableError) as info:
            build(repo, fresh / "out", tiny_tokenizer_path)
    finally:
        hub.faults.clear()
    message = str(info.value)
    assert "\n" not in message and repr(repo) in message and "429" in message, message
    assert "run the same command again" in message and not (fresh / "out" / "meta.json").exists()
    assert time.monotonic() - start < HUB["max_wait_s"] + CLIENT_TIMEOUT_S


def test_a_hub_down_for_good_mid_stream_is_given_up_within_max_wait_whatever_layer_retries(
    repo, hub, fresh_caches, tiny_tokenizer_path
):
    """huggingface_hub's own tries at their real pace (1, 2, 4 s apart) inside ours: from the first refused
    request the build stops within hub.max_wait_s plus one request timeout, by the clock."""
    import time

    from niels_gpt.data.hub import HubRead, open_dataset
    from niels_gpt.data.resumable import ShuffledStream

    policy = {**HUB, "attempts": 20, "backoff_s": 0.5, "max_backoff_s": 2, "max_wait_s": 4}
    read = HubRead(repo, streaming=True, shuffle=True, shuffle_buffer_size=40, seed=42)
    target = ShuffledStream(open_dataset(read, {}), read).groups[0].names()[1].rsplit("/", 1)[-1]
    hub.faults.clear()
    hub.faults.add(faults.status(re.escape(target) + "$", 503, count=10**6, method="GET"))
    first = len(hub.requests)
    try:
        with pytest.raises(SourceUnavailableError) as info:
            build(repo, fresh_caches / "out", tiny_tokenizer_path, policy)
        stopped = time.time()
    finally:
        hub.faults.clear()
    refused = [r for r in hub.requests.snapshot()[first:] if r.fault]
    waited = stopped - refused[0].time
    print(f"gave up {waited:.1f} s after the first refused request ({len(refused)} refused)")
    # without the deadline: 20 tries of ours, each after the library's 6 tries over 1 + 2 + 4 + 8 + 8 s
    assert waited <= policy["max_wait_s"] + policy["request_timeout_s"], (waited, len(refused))
    assert "run the same build again" in str(info.value) and "\n" not in str(info.value)
