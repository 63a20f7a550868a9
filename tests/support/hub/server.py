"""A loopback Hugging Face hub for the tests: every dataset repository under a folder, over HTTP.

`HubServer(root)` serves each folder `root/<namespace>/<name>/` as the dataset repository
`<namespace>/<name>`, files as they are on disk, at one commit (`sha(repo_id)`: 40 hex digits derived
from the repository id and its files' paths, sizes and mtimes, so it changes when a file does), on
http://127.0.0.1:<free port> (`url`, no trailing slash: `datasets` would double it). The calls
`datasets` / `huggingface_hub` make:

  HEAD|GET /datasets/{repo}/resolve/{rev}/{path}   a file: X-Repo-Commit, ETag (content hash), sizes;
                                                   Range -> 206 + Content-Range, 416 past the end
  GET  /api/datasets/{repo}[/revision/{rev}]       repository info (id, sha, siblings)
  GET  /api/datasets/{repo}/tree/{rev}[/{path}]    listing (?recursive=, ?expand=), pages of `page_size`
                                                   linked by an absolute `Link: <...>; rel="next"`
  POST /api/datasets/{repo}/paths-info/{rev}       entries of the form's `paths` (missing ones left out)
  GET  /api/datasets/{repo}/refs                   the one branch, main
  404 + X-Error-Code: EntryNotFound (no such file or folder), RevisionNotFound (a revision other than
  `main` or the commit), RepoNotFound (401, as to an anonymous client).

Data files (`LFS_SUFFIXES`) are served as the hub serves LFS files: ETag and X-Linked-Etag the sha256,
tree entries with `lfs` and the pointer file's git oid; other files have their git blob sha1 as ETag
and oid. No Xet headers (hf-xet would take over the download). Every response has an exact
Content-Length and keeps the connection alive; TCP_NODELAY (small JSON answers otherwise wait 40 ms
for a delayed ACK); one daemon thread per connection; `stop()` (or leaving the `with` block) closes
the listener and every open connection, and ends stalls.

`requests` logs each request (method, path, status, body bytes sent, range, fault) for counting calls
and HTTP bytes; `faults` injects failures (faults.py).
"""

from __future__ import annotations

import email.utils
import hashlib
import json
import os
import re
import socket
import struct
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, quote, unquote, urlsplit

from tests.support.hub.faults import Fault, Faults
from tests.support.hub.locked import LockedList

LFS_SUFFIXES = (".parquet", ".jsonl", ".json.gz", ".jsonl.gz", ".arrow")  # served like LFS files
CHUNK = 1 << 20  # bytes read from disk and written per send of a file body
DEFAULT_PAGE_SIZE = 1000  # tree entries per page, as the hub pages a listing
DATE = "2024-06-01T00:00:00.000Z"  # createdAt / lastModified / lastCommit date of every repository
_API = re.compile(r"^/api/datasets/([^/]+)/([^/]+)(?:/(revision|tree|paths-info|refs)(?:/([^/]+)(?:/(.*))?)?)?$")
_RESOLVE = re.compile(r"^/datasets/([^/]+)/([^/]+)/resolve/([^/]+)/(.+)$")


def git_blob_oid(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass
class RepoFile:
    """One file of a repository; its hashes are computed on first use and kept."""

    path: str
    disk: Path
    size: int
    lfs: bool
    _sha256: str | None = None
    _oid: str | None = None

    def _hash(self) -> None:
        sha256, blob = hashlib.sha256(), hashlib.sha1(b"blob %d\0" % self.size)
        with open(self.disk, "rb") as f:
            while chunk := f.read(CHUNK):
                sha256.update(chunk)
                blob.update(chunk)
        self._sha256 = sha256.hexdigest()
        pointer = f"version https://git-lfs.github.com/spec/v1\noid sha256:{self._sha256}\nsize {self.size}\n"
        self._oid = git_blob_oid(pointer.encode()) if self.lfs else blob.hexdigest()

    @property
    def sha256(self) -> str:
        if self._sha256 is None:
            self._hash()
        return self._sha256

    @property
    def oid(self) -> str:
        """The git oid: of the LFS pointer file for an LFS file, of the bytes otherwise."""
        if self._oid is None:
            self._hash()
        return self._oid

    @property
    def etag(self) -> str:
        return self.sha256 if self.lfs else self.oid


class Repo:
    """A dataset repository read from its folder: files by path, folders, one commit."""

    def __init__(self, repo_id: str, folder: Path):
        self.repo_id = repo_id
        self.files: dict[str, RepoFile] = {}
        listing = []
        for disk in sorted(p for p in folder.rglob("*") if p.is_file()):
            path = disk.relative_to(folder).as_posix()
            st = disk.stat()
            self.files[path] = RepoFile(path, disk, st.st_size, path.endswith(LFS_SUFFIXES))
            listing.append(f"{path}\0{st.st_size}\0{st.st_mtime_ns}")
        self.folders = {"/".join(p.split("/")[:i]) for p in self.files for i in range(1, p.count("/") + 1)}
        self.sha = hashlib.sha1("\n".join([repo_id, *listing]).encode()).hexdigest()
        self._lock = threading.Lock()

    def resolve(self, revision: str) -> str | None:
        """The commit of `revision` (the branch `main` or the commit itself), None for any other."""
        return self.sha if revision in ("main", "refs/heads/main", self.sha) else None

    def file(self, path: str) -> RepoFile | None:
        entry = self.files.get(path)
        if entry is not None:
            with self._lock:  # one thread hashes a file; the others wait for its result
                if entry._sha256 is None:
                    entry._hash()
        return entry

    def entry(self, path: str, expand: bool) -> dict:
        """A tree / paths-info entry: a file with its size and oid (and `lfs`), or a folder."""
        if path in self.files:
            f = self.file(path)
            out = {"type": "file", "oid": f.oid, "size": f.size, "path": path}
            if f.lfs:
                out["lfs"] = {"oid": f.sha256, "size": f.size, "pointerSize": 134}
        else:
            out = {"type": "directory", "oid": hashlib.sha1(f"{self.sha}:{path}".encode()).hexdigest(), "path": path}
        if expand:
            out["lastCommit"] = {"id": self.sha, "title": "Upload dataset", "date": DATE}
        return out

    def listing(self, folder: str, recursive: bool) -> list[str] | None:
        """Paths under `folder` ("" the root), folders first, each group sorted; None: no such folder."""
        if folder and folder not in self.folders:
            return None
        prefix = f"{folder}/" if folder else ""
        under = [p for p in (*self.folders, *self.files) if p.startswith(prefix)]
        if not recursive:
            under = [p for p in under if "/" not in p[len(prefix) :]]
        return sorted(p for p in under if p in self.folders) + sorted(p for p in under if p in self.files)

    def info(self) -> dict:
        return {
            "_id": hashlib.sha1(self.repo_id.encode()).hexdigest()[:24],
            "id": self.repo_id,
            "author": self.repo_id.split("/")[0],
            "sha": self.sha,
            "createdAt": DATE,
            "lastModified": DATE,
            "private": False,
            "gated": False,
            "disabled": False,
            "downloads": 0,
            "likes": 0,
            "tags": [],
            "siblings": [{"rfilename": p} for p in sorted(self.files)],
        }


def scan_repos(root: Path) -> dict[str, Repo]:
    """Every `root/<namespace>/<name>/` folder as a repository."""
    return {
        f"{ns.name}/{name.name}": Repo(f"{ns.name}/{name.name}", name)
        for ns in sorted(p for p in Path(root).iterdir() if p.is_dir())
        for name in sorted(p for p in ns.iterdir() if p.is_dir())
    }


@dataclass
class Request:
    """One request, logged when it arrives; `status` (None until an answer is sent) and `bytes_sent`
    (body bytes written) are filled in as the answer goes out; `fault`: the label of the fault that took it."""

    method: str
    path: str
    status: int | None
    bytes_sent: int
    range: str | None = None
    fault: str | None = None
    time: float = 0.0


class RequestLog(LockedList[Request]):
    """The requests received so far, in the order they arrived (thread-safe)."""

    def matching(self, path: str | None = None, method: str | None = None) -> list[Request]:
        """The requests whose path matches the regex `path` (searched) and whose method is `method`."""
        return [
            r
            for r in self.snapshot()
            if (method is None or r.method == method) and (path is None or re.search(path, r.path))
        ]

    def bytes_sent(self, path: str | None = None) -> int:
        """Body bytes sent, to the requests whose path matches `path` (all when None)."""
        return sum(r.bytes_sent for r in self.matching(path))


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: the hub client reuses connections
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, format, *args):
        pass

    def setup(self):
        super().setup()
        self.server.track(self.connection, True)

    def finish(self):
        try:
            super().finish()
        finally:
            self.server.track(self.connection, False)

    def do_GET(self):
        self._handle("GET")

    def do_HEAD(self):
        self._handle("HEAD")

    def do_POST(self):
        self._handle("POST")

    # ------------------------------------------------------------------ plumbing

    def _handle(self, method: str) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode() if method == "POST" else ""
        split = urlsplit(self.path)
        self._path = unquote(split.path)
        self._fault: Fault | None = self.server.hub.faults.take(method, self._path)
        self._entry = Request(method, self._path, None, 0, self.headers.get("Range"), None, time.time())
        self._entry.fault = self._fault.label if self._fault else None
        self.server.hub.requests.append(self._entry)
        try:
            self._answer(method, split.path, parse_qs(split.query), body)
        except (BrokenPipeError, ConnectionResetError, TimeoutError):
            self.close_connection = True

    def _answer(self, method: str, raw_path: str, query: dict, body: str) -> None:
        fault = self._fault
        if fault is not None and fault.kind == "stall" and fault.after_bytes is None:
            if self.server.stopping.wait(fault.seconds):
                return self._abort("fin")
        if fault is not None and fault.kind == "status":
            extra = {} if fault.retry_after is None else {"Retry-After": f"{fault.retry_after:g}"}
            return self._json(fault.status, {"error": f"injected {fault.status}"}, extra)
        if fault is not None and fault.kind == "reset" and not fault.after_bytes:
            return self._abort(fault.mode)
        api, resolve = _API.match(raw_path), _RESOLVE.match(raw_path)
        if api and method in ("GET", "POST"):
            return self._api(method, *api.groups(), query, body)
        if resolve and method in ("GET", "HEAD"):
            return self._resolve(*resolve.groups())
        self._error(404, None, "Sorry, we can't find the page you are looking for.")

    def _send(self, status: int, headers: dict, length: int) -> None:
        self._entry.status = status
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(length))
        self.end_headers()

    def _json(self, status: int, value, headers: dict | None = None) -> None:
        data = json.dumps(value).encode()
        self._send(status, {"Content-Type": "application/json; charset=utf-8", **(headers or {})}, len(data))
        if self.command != "HEAD":
            self._write([data])

    def _error(self, status: int, code: str | None, message: str, headers: dict | None = None) -> None:
        extra = {"X-Error-Message": message, **({"X-Error-Code": code} if code else {}), **(headers or {})}
        self._json(status, {"error": message}, extra)

    def _abort(self, mode: str) -> None:
        """End the connection now: RST (SO_LINGER 0, the client reads ECONNRESET) or a clean FIN."""
        try:
            self.wfile.flush()
        except OSError:
            pass
        if mode == "rst":
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        else:
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self.connection.close()
        self.close_connection = True

    def _write(self, chunks) -> None:
        """Write the body, counting bytes; a reset or a stall of the fault happens at its byte."""
        fault = self._fault
        cut = fault.after_bytes if fault is not None and fault.kind in ("reset", "stall") else None
        for chunk in chunks:
            if cut is not None and self._entry.bytes_sent + len(chunk) >= cut:
                head = chunk[: cut - self._entry.bytes_sent]
                self.wfile.write(head)
                self.wfile.flush()
                self._entry.bytes_sent += len(head)
                if fault.kind == "reset":
                    return self._abort(fault.mode)
                if self.server.stopping.wait(fault.seconds):
                    return self._abort("fin")
                chunk, cut = chunk[len(head) :], None
            self.wfile.write(chunk)
            self._entry.bytes_sent += len(chunk)

    # ------------------------------------------------------------------ routes

    def _repo(self, ns: str, name: str):
        repo = self.server.hub.repos.get(f"{unquote(ns)}/{unquote(name)}")
        if repo is None:  # the hub answers an anonymous client 401, an authenticated one 404
            status = 404 if self.headers.get("Authorization") else 401
            self._error(status, "RepoNotFound", "Repository not found")
        return repo

    def _api(self, method, ns, name, kind, rev, sub, query, body) -> None:
        repo = self._repo(ns, name)
        if repo is None:
            return
        if kind == "refs":
            branch = {"name": "main", "ref": "refs/heads/main", "targetCommit": repo.sha}
            return self._json(200, {"branches": [branch], "converts": [], "tags": []})
        revision = unquote(rev) if rev else "main"
        if repo.resolve(revision) is None:
            return self._error(404, "RevisionNotFound", f"Invalid rev id: {revision}")
        if kind in (None, "revision") and method == "GET":
            return self._json(200, repo.info())
        if kind == "tree" and method == "GET":
            return self._tree(repo, revision, unquote(sub or "").strip("/"), query)
        if kind == "paths-info" and method == "POST":
            form = parse_qs(body)
            expand = form.get("expand", ["false"])[0].lower() == "true"
            paths = [p.strip("/") for p in form.get("paths", [])]
            found = [p for p in paths if p in repo.files or p in repo.folders]
            return self._json(200, [repo.entry(p, expand) for p in found])
        self._error(404, None, "Sorry, we can't find the page you are looking for.")

    def _tree(self, repo: Repo, revision: str, folder: str, query: dict) -> None:
        recursive = query.get("recursive", ["false"])[0].lower() == "true"
        expand = query.get("expand", ["false"])[0].lower() == "true"
        paths = repo.listing(folder, recursive)
        if paths is None:
            if folder not in repo.files:
                return self._error(404, "EntryNotFound", f'{folder} does not exist on "{revision}"')
            paths = [folder]
        start = int(query.get("cursor", ["0"])[0])
        size = self.server.hub.page_size
        headers = {}
        if start + size < len(paths):
            params = f"recursive={str(recursive).lower()}&expand={str(expand).lower()}&cursor={start + size}"
            sub = "/" + quote(folder, safe="") if folder else ""
            url = f"{self.server.hub.url}/api/datasets/{repo.repo_id}/tree/{quote(revision, safe='')}{sub}?{params}"
            headers["Link"] = f'<{url}>; rel="next"'
        self._json(200, [repo.entry(p, expand) for p in paths[start : start + size]], headers)

    def _resolve(self, ns, name, rev, path) -> None:
        repo = self._repo(ns, name)
        if repo is None:
            return
        revision, path = unquote(rev), unquote(path)
        sha = repo.resolve(revision)
        if sha is None:
            return self._error(404, "RevisionNotFound", f"Invalid rev id: {revision}")
        f = repo.file(path)
        if f is None:  # the hub names the commit here too: the client caches that the file is absent
            return self._error(404, "EntryNotFound", "Entry not found", {"X-Repo-Commit": sha})
        headers = {
            "X-Repo-Commit": sha,
            "ETag": f'"{f.etag}"',
            "Accept-Ranges": "bytes",
            "Content-Type": "application/octet-stream",
            "Last-Modified": email.utils.formatdate(usegmt=True),
        }
        if f.lfs:
            headers.update({"X-Linked-Etag": f'"{f.sha256}"', "X-Linked-Size": str(f.size)})
        start, end, status = 0, f.size - 1, 200
        wanted = self.headers.get("Range")
        if wanted:
            span = _byte_range(wanted, f.size)
            if span is None:
                return self._error(416, None, "Range Not Satisfiable", {"Content-Range": f"bytes */{f.size}"})
            start, end, status = *span, 206
            headers["Content-Range"] = f"bytes {start}-{end}/{f.size}"
        self._send(status, headers, end - start + 1)
        if self.command != "HEAD":
            self._write(_file_chunks(f.disk, start, end + 1))


def _byte_range(header: str, size: int) -> tuple[int, int] | None:
    """(first, last) byte of `Range: bytes=a-b | a- | -n` within a file of `size` bytes, None if none."""
    m = re.fullmatch(r"\s*bytes=(\d*)-(\d*)\s*", header)
    if not m or not (m.group(1) or m.group(2)):
        return None
    if m.group(1):
        start = int(m.group(1))
        end = min(int(m.group(2)) if m.group(2) else size - 1, size - 1)
    else:
        start, end = max(size - int(m.group(2)), 0), size - 1
    return (start, end) if start <= end else None


def _file_chunks(disk: Path, start: int, stop: int):
    with open(disk, "rb") as f:
        f.seek(start)
        left = stop - start
        while left > 0:
            chunk = f.read(min(CHUNK, left))
            if not chunk:
                raise OSError(f"{disk}: shorter than its listed size")
            left -= len(chunk)
            yield chunk


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, hub: HubServer, sock: socket.socket | None):
        super().__init__(("127.0.0.1", 0), _Handler, bind_and_activate=sock is None)
        if sock is not None:  # a port reserved earlier (bound, not listening)
            self.socket.close()
            self.socket = sock
            self.server_address = sock.getsockname()
            self.server_activate()
        self.hub = hub
        self.stopping = threading.Event()
        self._open: set[socket.socket] = set()
        self._open_lock = threading.Lock()

    def track(self, conn: socket.socket, is_open: bool) -> None:
        with self._open_lock:
            (self._open.add if is_open else self._open.discard)(conn)

    def close_connections(self) -> None:
        with self._open_lock:
            conns = list(self._open)
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class HubServer:
    """The loopback hub over `root` (see the module docstring). `sock`: a bound socket to listen on
    (env.reserve_socket), else a free port is taken. Use as a context manager, or start() / stop()."""

    def __init__(self, root: str | os.PathLike, *, page_size: int = DEFAULT_PAGE_SIZE, sock=None):
        self.root = Path(root)
        self.page_size = page_size
        self.repos = scan_repos(self.root)
        self.requests = RequestLog()
        self.faults = Faults()
        self._server = _Server(self, sock)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def sha(self, repo_id: str) -> str:
        """The commit every revision of `repo_id` resolves to."""
        return self.repos[repo_id].sha

    def rescan(self) -> None:
        """Read the repositories again (after files under `root` changed); their commits follow."""
        self.repos = scan_repos(self.root)

    def start(self) -> HubServer:
        if self._thread is None:
            self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop listening, end stalls and close every open connection (a client then sees resets)."""
        self._server.stopping.set()
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(timeout=5)
        self._server.server_close()
        self._server.close_connections()

    def __enter__(self) -> HubServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
