"""Fixtures of the byte-stream tests: roam notes + primer file (`inputs`), a demo config (`demo`),
in-memory byte sources (`sources`)."""

from __future__ import annotations

import pytest

from niels_gpt.config import deep_merge, prepare_config
from tests.support.hub_files import write_demo_tree
from tests.support.streams import byte_sources, write_stream_inputs


@pytest.fixture
def inputs(tmp_path):
    """Ten roam notes and a primer with ten dialogues, in a temp dir; returns the StreamBuildConfig."""
    return write_stream_inputs(tmp_path)


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """A validated config over every source's sample files, streams.T = 8."""
    root = tmp_path_factory.mktemp("demo")
    return prepare_config(deep_merge(write_demo_tree(root), {"streams": {"T": 8}, "cache_dir": str(root / "cache")}))


@pytest.fixture
def sources():
    return byte_sources()
