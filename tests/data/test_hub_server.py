"""The test hub (tests/support/hub): the protocol `huggingface_hub` reads, its faults, its environment,
and the repositories it serves in their real layouts and cards."""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from tests.support.hub import HubServer, faults, hub_env, hub_settings
from tests.support.hub.repos import REPOS
from tests.support.hub.server import git_blob_oid

FINEWEB = "HuggingFaceFW/fineweb-edu"
PARQUET = "data/CC-MAIN-2024-10/train-00000-of-00003.parquet"


def call(server, method: str, path: str, headers: dict | None = None, body: str | None = None, timeout=10):
    """(status, headers, body) of one request on a fresh connection."""
    conn = http.client.HTTPConnection("127.0.0.1", int(server.url.rsplit(":", 1)[1]), timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def resolve(repo: str, rev: str, path: str) -> str:
    return f"/datasets/{repo}/resolve/{rev}/{path}"


@pytest.fixture
def clean_hub(hub):
    """The session hub with no faults before and after the test, and its request log emptied."""
    hub.faults.clear()
    hub.requests.clear()
    yield hub
    hub.faults.clear()


def test_head_names_the_commit_the_content_hash_and_the_size(clean_hub, hub_root):
    sha = clean_hub.sha(FINEWEB)
    data = (hub_root[0] / FINEWEB / PARQUET).read_bytes()
    status, headers, body = call(clean_hub, "HEAD", resolve(FINEWEB, "main", PARQUET))
    assert status == 200 and body == b""
    assert headers["x-repo-commit"] == sha and len(sha) == 40
    assert headers["etag"] == headers["x-linked-etag"] == f'"{hashlib.sha256(data).hexdigest()}"'
    assert int(headers["content-length"]) == int(headers["x-linked-size"]) == len(data)
    assert not any(k.startswith("x-xet") for k in headers)
    readme = (hub_root[0] / FINEWEB / "README.md").read_bytes()
    _, headers, _ = call(clean_hub, "HEAD", resolve(FINEWEB, sha, "README.md"))  # a git file: its blob oid
    assert headers["etag"].strip('"') == git_blob_oid(readme)


@pytest.mark.parametrize(
    "byte_range, span", [("bytes=10-19", (10, 19)), ("bytes=100-", (100, None)), ("bytes=-8", (-8, None))]
)
def test_a_range_is_answered_206_with_exactly_those_bytes(clean_hub, hub_root, byte_range, span):
    data = (hub_root[0] / FINEWEB / PARQUET).read_bytes()
    status, headers, body = call(clean_hub, "GET", resolve(FINEWEB, "main", PARQUET), {"Range": byte_range})
    start = span[0] % len(data)
    end = len(data) - 1 if span[1] is None else span[1]
    assert status == 206 and body == data[start : end + 1]
    assert headers["content-range"] == f"bytes {start}-{end}/{len(data)}"
    status, headers, _ = call(clean_hub, "GET", resolve(FINEWEB, "main", PARQUET), {"Range": f"bytes={len(data)}-"})
    assert status == 416 and headers["content-range"] == f"bytes */{len(data)}"


@pytest.mark.parametrize(
    "path, status, code",
    [
        (resolve(FINEWEB, "main", "no/such.parquet"), 404, "EntryNotFound"),
        (resolve(FINEWEB, "v9.9-nope", "README.md"), 404, "RevisionNotFound"),
        (resolve(FINEWEB, "deadbeef" * 5, "README.md"), 404, "RevisionNotFound"),
        (resolve("HuggingFaceFW/fineweb-edu-typo", "main", "README.md"), 401, "RepoNotFound"),
        (f"/api/datasets/{FINEWEB}/revision/nope", 404, "RevisionNotFound"),
        (f"/api/datasets/{FINEWEB}/tree/main/no-such-folder", 404, "EntryNotFound"),
        ("/api/datasets/nobody/nothing", 401, "RepoNotFound"),
    ],
)
def test_what_is_not_there_is_a_404_or_401_with_its_error_code(clean_hub, path, status, code):
    got, headers, body = call(clean_hub, "HEAD" if "/resolve/" in path else "GET", path)
    assert (got, headers["x-error-code"]) == (status, code)
    assert int(headers["content-length"]) == len(body) or "/resolve/" in path
    if code == "EntryNotFound" and "/resolve/" in path:
        assert headers["x-repo-commit"] == clean_hub.sha(FINEWEB)  # the client caches the absence at the commit


def test_revision_info_and_refs_name_the_one_commit(clean_hub):
    sha = clean_hub.sha(FINEWEB)
    for path in (
        f"/api/datasets/{FINEWEB}",
        f"/api/datasets/{FINEWEB}/revision/main",
        f"/api/datasets/{FINEWEB}/revision/{sha}",
    ):
        status, _, body = call(clean_hub, "GET", path)
        info = json.loads(body)
        assert status == 200 and (info["id"], info["sha"]) == (FINEWEB, sha)
        assert {"rfilename": PARQUET} in info["siblings"]
    _, _, body = call(clean_hub, "GET", f"/api/datasets/{FINEWEB}/refs")
    assert json.loads(body)["branches"] == [{"name": "main", "ref": "refs/heads/main", "targetCommit": sha}]


def test_huggingface_hub_lists_trees_across_pages_and_reads_paths_info(hub_root):
    from huggingface_hub import HfApi

    root, layouts = hub_root
    with HubServer(root, page_size=2) as small_pages:
        api = HfApi(endpoint=small_pages.url)
        entries = list(api.list_repo_tree(FINEWEB, repo_type="dataset", recursive=True))
        files = sorted(e.path for e in entries if e.__class__.__name__ == "RepoFile")
        assert files == sorted(p.relative_to(root / FINEWEB).as_posix() for p in (root / FINEWEB).rglob("*.*"))
        assert len(entries) == 8 and len(small_pages.requests.matching(faults.TREE)) == 4  # 4 pages of 2
        info = api.get_paths_info(FINEWEB, [PARQUET, "data", "missing.txt"], repo_type="dataset")
    by_path = {e.path: e for e in info}
    assert set(by_path) == {PARQUET, "data"}
    assert by_path[PARQUET].lfs.sha256 == hashlib.sha256((root / FINEWEB / PARQUET).read_bytes()).hexdigest()


def test_the_commit_follows_the_files(tmp_path):
    repo = tmp_path / "org" / "set"
    repo.mkdir(parents=True)
    (repo / "a.jsonl").write_text('{"text": "x"}\n')
    with HubServer(tmp_path) as hub:
        first = hub.sha("org/set")
        os.utime(repo / "a.jsonl", ns=(1, 1))
        hub.rescan()
        assert hub.sha("org/set") != first
        assert call(hub, "HEAD", resolve("org/set", first, "a.jsonl"))[0] == 404  # the old commit is gone


def test_the_request_log_counts_requests_and_body_bytes(clean_hub):
    call(clean_hub, "GET", resolve(FINEWEB, "main", PARQUET), {"Range": "bytes=0-99"})
    call(clean_hub, "HEAD", resolve(FINEWEB, "main", PARQUET))
    log = clean_hub.requests.matching(r"\.parquet$")
    assert [(r.method, r.status, r.bytes_sent, r.range) for r in log] == [
        ("GET", 206, 100, "bytes=0-99"),
        ("HEAD", 200, 0, None),
    ]
    assert clean_hub.requests.bytes_sent(r"\.parquet$") == 100


def test_status_faults_hit_the_first_matching_requests_only(clean_hub):
    fault = clean_hub.faults.add(faults.status(faults.REVISION_INFO, 503, count=2))
    limit = clean_hub.faults.add(faults.rate_limit(faults.TREE, retry_after=0.5))
    path = f"/api/datasets/{FINEWEB}/revision/main"
    assert [call(clean_hub, "GET", path)[0] for _ in range(3)] == [503, 503, 200]
    status, headers, _ = call(clean_hub, "GET", f"/api/datasets/{FINEWEB}/tree/main")
    assert (status, headers["retry-after"]) == (429, "0.5")
    assert (fault.hits, limit.hits) == (2, 1)
    assert [r.fault for r in clean_hub.requests.matching(faults.REVISION_INFO)] == ["status:503"] * 2 + [None]


def test_a_reset_fault_cuts_the_body_after_its_bytes(clean_hub):
    clean_hub.faults.add(faults.reset(faults.PARQUET, after_bytes=1000))
    with pytest.raises((ConnectionError, http.client.IncompleteRead)):
        call(clean_hub, "GET", resolve(FINEWEB, "main", PARQUET))
    entry = clean_hub.requests.matching(faults.PARQUET)[0]
    assert (entry.status, entry.bytes_sent, entry.fault) == (200, 1000, "reset:rst@1000")
    assert call(clean_hub, "GET", resolve(FINEWEB, "main", PARQUET))[0] == 200  # count 1: the next one is whole


def test_a_stall_outlasts_a_short_client_timeout_then_the_server_goes_on(clean_hub):
    clean_hub.faults.add(faults.stall(faults.README, 1.0))
    with pytest.raises(TimeoutError):
        call(clean_hub, "GET", resolve(FINEWEB, "main", "README.md"), timeout=0.2)
    assert call(clean_hub, "GET", resolve(FINEWEB, "main", "README.md"))[0] == 200


def test_stop_ends_stalls_and_open_connections(hub_root):
    hub = HubServer(hub_root[0]).start()
    hub.faults.add(faults.stall(faults.README, 30))
    conn = http.client.HTTPConnection("127.0.0.1", int(hub.url.rsplit(":", 1)[1]), timeout=10)
    conn.request("GET", resolve(FINEWEB, "main", "README.md"))
    started = time.monotonic()
    hub.stop()
    with pytest.raises((ConnectionError, http.client.HTTPException)):
        conn.getresponse().read()
    assert time.monotonic() - started < 5
    with pytest.raises(ConnectionRefusedError):
        call(hub, "GET", f"/api/datasets/{FINEWEB}")


def test_hub_env_points_a_subprocess_at_the_hub_only(hub, tmp_path):
    base = {"PATH": "/bin", "HF_TOKEN": "secret", "HF_HUB_OFFLINE": "1", "HTTPS_PROXY": "http://proxy:3128"}
    env = hub_env(hub, tmp_path, base=base)
    assert env["HF_ENDPOINT"] == hub.url and not env["HF_ENDPOINT"].endswith("/")
    assert "HF_TOKEN" not in env and "HF_HUB_OFFLINE" not in env and env["PATH"] == "/bin"
    assert env["HTTPS_PROXY"] == "http://127.0.0.1:9" and env["NO_PROXY"] == "127.0.0.1,localhost"
    assert env["HF_HUB_DISABLE_XET"] == "1" and env["HF_UPDATE_DOWNLOAD_COUNTS"] == "0"
    assert env["HF_DATASETS_CACHE"] == str(tmp_path / "datasets")
    with pytest.raises(ValueError, match="must not end with '/'"):
        hub_settings(hub.url + "/", tmp_path)


def _front_matter(readme: Path) -> dict:
    return yaml.safe_load(readme.read_text().split("---\n")[1])


def test_every_repository_has_its_card_and_the_files_its_configs_name(hub_root):
    root, layouts = hub_root
    assert sorted(layouts) == sorted(REPOS)
    for repo, configs in layouts.items():
        card = _front_matter(root / repo / "README.md")
        for config, splits in configs.items():
            for split, files in splits.items():
                assert files and all((root / repo / f).is_file() for f in files), (repo, config, split)
        infos = card.get("dataset_info", [])
        for info in infos if isinstance(infos, list) else [infos]:
            config = info.get("config_name", "default")
            for split in info["splits"]:
                rows = sum(pq.read_metadata(root / repo / f).num_rows for f in layouts[repo][config][split["name"]])
                assert rows == split["num_examples"], (repo, config, split["name"])
    fineweb = _front_matter(root / FINEWEB / "README.md")["configs"]
    assert [c["config_name"] for c in fineweb] == ["default", "CC-MAIN-2024-10", "CC-MAIN-2024-18"]
    assert fineweb[0]["data_files"] == [{"split": "train", "path": "data/*/*"}]
    assert "configs" not in _front_matter(root / "databricks/databricks-dolly-15k" / "README.md")
    assert list(layouts["manu/project_gutenberg"]["default"]) == ["en", "de", "fr"]
