"""Shared fixtures: a throwaway tiny SentencePiece model trained once per session, an isolated
`datasets` cache for tests that read local files through `datasets.load_dataset`, and the test hub.

The test hub (tests/support/hub): `datasets` and `huggingface_hub` read HF_ENDPOINT when imported, so
this file points the whole session at a loopback port reserved here, with every HF cache in a
temporary HF_HOME, before any test imports them: a hub call made before the `hub` fixture listens is
refused at once, and none ever leaves 127.0.0.1.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

import pytest

from niels_gpt.tokenizer import SentencePieceTokenizer, train_sentencepiece
from tests.support.corpus import tiny_corpus
from tests.support.hub import HubServer, hub_settings, reserve_socket, socket_url, write_hub_repos

_HUB_SOCKET = reserve_socket()
_HF_HOME = tempfile.mkdtemp(prefix="niels_gpt_hf_home_")
atexit.register(shutil.rmtree, _HF_HOME, True)
for _name in ("HF_TOKEN", "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
    os.environ.pop(_name, None)
os.environ.update(hub_settings(socket_url(_HUB_SOCKET), _HF_HOME))


@pytest.fixture(scope="session")
def tiny_tokenizer_path(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("tok") / "spm.model"
    train_sentencepiece(tiny_corpus(), path, vocab_size=400, num_threads=1)
    return str(path)


@pytest.fixture(scope="session")
def tiny_tokenizer(tiny_tokenizer_path) -> SentencePieceTokenizer:
    return SentencePieceTokenizer(tiny_tokenizer_path)


@pytest.fixture(scope="session")
def isolated_hf_cache(tmp_path_factory):
    """Prepared (non-streaming) datasets write Arrow caches: keep them out of ~/.cache.

    Also drops datasets' 5 s sleep after every buffer-shuffled stream (a guard against an Arrow
    crash at interpreter exit, apache/arrow#45214): it would make each shuffled test take 5 s.
    """
    import datasets

    # SLEEP_TIME_ON_THREADS_SHUTDOWN (datasets 5.x only): the 5 s a closing stream waits for its threads
    sleep = getattr(datasets.config, "SLEEP_TIME_ON_THREADS_SHUTDOWN", None)
    old = datasets.config.HF_DATASETS_CACHE
    datasets.config.HF_DATASETS_CACHE = tmp_path_factory.mktemp("hf_datasets_cache")
    if sleep is not None:
        datasets.config.SLEEP_TIME_ON_THREADS_SHUTDOWN = 0
    yield datasets.config.HF_DATASETS_CACHE
    datasets.config.HF_DATASETS_CACHE = old
    if sleep is not None:
        datasets.config.SLEEP_TIME_ON_THREADS_SHUTDOWN = sleep


@pytest.fixture(scope="session")
def demo_cache(tmp_path_factory, tiny_tokenizer_path, isolated_hf_cache):
    """The demo caches, built once (tests/support/demo_cache.py): train_tiny and the README's snippets read
    them and never change them."""
    from tests.support.demo_cache import build_demo_cache

    return build_demo_cache(tmp_path_factory.mktemp("demo") / "cache", tiny_tokenizer_path)


@pytest.fixture(scope="session")
def workflow_demo_build(tmp_path_factory):
    """The workflow's demo build (tests/workflow/test_workflow.py: make_workdir, `snakemake cache/all`), run
    once per session: the workflow tests (`built`) and build-all's byte-identity test read it, never change it."""
    from tests.workflow.test_workflow import make_workdir, snakemake

    workdir = make_workdir(tmp_path_factory.mktemp("wf"))
    snakemake(workdir, "-j2", "cache/all")
    return workdir


@pytest.fixture(scope="session")
def hub_root(tmp_path_factory):
    """(root, layouts): every hub repository the config can name, small (HubSizes()), under root."""
    root = tmp_path_factory.mktemp("hub")
    return root, write_hub_repos(root)


@pytest.fixture(scope="session")
def hub(hub_root):
    """The test hub serving hub_root at this session's HF_ENDPOINT: in-process `load_dataset` reads it.
    A test that adds faults clears them (`hub.faults.clear()`). Subprocesses: `hub_env(hub, home)`."""
    import datasets

    export = datasets.config.USE_PARQUET_EXPORT
    datasets.config.USE_PARQUET_EXPORT = False  # else each load asks datasets-server.127.0.0.1 (DNS)
    with HubServer(hub_root[0], sock=_HUB_SOCKET) as server:
        yield server
    datasets.config.USE_PARQUET_EXPORT = export
