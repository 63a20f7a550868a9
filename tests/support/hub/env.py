"""The environment that points `datasets` / `huggingface_hub` at the test hub, and nowhere else.

Both libraries read HF_ENDPOINT (and the other HF_* settings) when they are imported: a subprocess
gets `hub_env(server, home)`; the test process itself sets `in_process_settings` before anything
imports them (tests/conftest.py), listening later on a socket reserved then (`reserve_socket`: bound,
not listening, so a call made before the server starts is refused at once instead of hanging).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from pathlib import Path

TIMEOUT_S = 5  # HF_HUB_ETAG_TIMEOUT / HF_HUB_DOWNLOAD_TIMEOUT: loopback answers take milliseconds
DEAD_PROXY = "http://127.0.0.1:9"  # the discard port: refused, so a request to any other host fails at once
PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")
SETTINGS = {
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "HF_HUB_DISABLE_XET": "1",  # hf-xet is installed and would take over downloads
    "HF_UPDATE_DOWNLOAD_COUNTS": "0",  # else datasets sends a HEAD to s3.amazonaws.com
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "HF_DATASETS_DISABLE_PROGRESS_BARS": "1",
    "HF_HUB_DISABLE_IMPLICIT_TOKEN": "1",
}


def hub_settings(url: str, home: str | os.PathLike, *, timeout: float = TIMEOUT_S) -> dict[str, str]:
    """The HF_* variables for the hub at `url`, with every cache under `home`."""
    if url.endswith("/"):
        raise ValueError(f"HF_ENDPOINT {url!r} must not end with '/': datasets would request '//api/...'")
    home = Path(home)
    return {
        **SETTINGS,
        "HF_ENDPOINT": url,
        "HF_HOME": str(home),
        "HF_HUB_CACHE": str(home / "hub"),
        "HF_DATASETS_CACHE": str(home / "datasets"),
        "HF_HUB_ETAG_TIMEOUT": f"{timeout:g}",
        "HF_HUB_DOWNLOAD_TIMEOUT": f"{timeout:g}",
    }


def hub_env(
    server, home: str | os.PathLike, *, base: Mapping[str, str] | None = None, timeout: float = TIMEOUT_S
) -> dict[str, str]:
    """A subprocess environment: `base` (os.environ) without any HF_* variable (no token, no offline
    switch) or proxy, plus `hub_settings` for `server` (a HubServer or its url), and a dead proxy for
    every host but 127.0.0.1 (datasets also asks datasets-server.<endpoint host>: refused at once)."""
    url = server if isinstance(server, str) else server.url
    kept = {k: v for k, v in (os.environ if base is None else base).items() if not _hub_or_proxy(k)}
    proxies = dict.fromkeys(PROXY_VARS, DEAD_PROXY)
    return {**kept, **proxies, "NO_PROXY": "127.0.0.1,localhost", **hub_settings(url, home, timeout=timeout)}


def _hub_or_proxy(name: str) -> bool:
    return name.startswith("HF_") or name.upper() in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")


def reserve_socket() -> socket.socket:
    """A socket bound to a free 127.0.0.1 port and not listening: HubServer(sock=...) listens on it."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    return sock


def socket_url(sock: socket.socket) -> str:
    return f"http://127.0.0.1:{sock.getsockname()[1]}"
