"""Realistic English text for the benchmarks, gathered at run time from prose already on this machine.

Nothing here is committed or downloaded: the text is read when a benchmark starts from three kinds of
English prose that a Linux machine with Python carries anyway:

  docstrings   the Python standard library's module, class and function docstrings (`ast`, no import)
  doc          documentation the operating system's packages install under /usr/share/doc
               (README, NEWS, *.txt, *.md, *.rst, copyright, changelogs; gzip-compressed ones included)
  info         GNU info manuals under /usr/share/info (coreutils, find, bash, ...)

Each file is cut into paragraphs (blank-line separated); a paragraph is kept only if it reads as prose
(PROSE_* below: enough words, mostly plain words, a sentence end), and only its first occurrence
(license texts repeat across packages). A document is consecutive kept paragraphs of one file joined
by a blank line, up to DOC_CHARS. The three kinds are interleaved document by document (round-robin)
until `max_chars`, so every slice of the corpus mixes them. Deterministic for a given machine: files
are read in sorted order.

`chats(docs)` turns the same prose into chat examples shaped like instruction data (optional system
line, 1-3 user/assistant turns, replies of 1-3 paragraphs) for the SFT benchmark.
"""

from __future__ import annotations

import ast
import gzip
import itertools
import random
import re
import sysconfig
import time
from collections.abc import Iterator
from pathlib import Path

DOC_CHARS = 4_000  # about a fineweb-edu document (median ~3 KB)
PROSE_MIN_WORDS = 12
PROSE_WORD_SHARE = 0.75  # share of whitespace-separated words that are plain words (code and tables fail)
_PLAIN_WORD = re.compile(r"^[(\"']?[A-Za-z][a-z'-]*[,.;:!?)\"']{0,2}$")
_SENTENCE_END = re.compile(r"[a-z][.!?](\s|$)")
DOC_ROOT = Path("/usr/share/doc")
INFO_ROOT = Path("/usr/share/info")
DOC_SUFFIXES = {"", ".txt", ".md", ".rst", ".gz", ".Debian"}


def is_prose(paragraph: str) -> bool:
    words = paragraph.split()
    if len(words) < PROSE_MIN_WORDS or not _SENTENCE_END.search(paragraph):
        return False
    return sum(1 for w in words if _PLAIN_WORD.match(w)) >= PROSE_WORD_SHARE * len(words)


def paragraphs(text: str) -> list[str]:
    return [p.strip("\n") for p in re.split(r"\n[ \t]*\n", text) if p.strip()]


def _docstrings(path: Path) -> Iterator[str]:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (SyntaxError, UnicodeDecodeError, ValueError):
        return
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node)
            if doc:
                yield doc


def _read_text(path: Path) -> str:
    try:
        data = path.read_bytes()
        if path.suffix == ".gz":
            data = gzip.decompress(data)
        return "" if b"\0" in data[:4096] else data.decode("utf-8")
    except (OSError, UnicodeDecodeError, EOFError, gzip.BadGzipFile):
        return ""


def _texts(kind: str) -> Iterator[str]:
    """Raw texts of one kind, file by file in sorted order."""
    if kind == "docstrings":
        stdlib = Path(sysconfig.get_paths()["stdlib"])
        for path in sorted(stdlib.rglob("*.py")):
            if not {"test", "tests", "site-packages", "dist-packages"} & set(path.parts):
                yield "\n\n".join(_docstrings(path))
    elif kind == "doc":
        for path in sorted(p for p in DOC_ROOT.rglob("*") if p.is_file() and p.suffix in DOC_SUFFIXES):
            yield _read_text(path)
    else:
        for path in sorted(INFO_ROOT.glob("*.info*.gz")):
            yield _read_text(path)


def _documents(kind: str, seen: set[str]) -> Iterator[str]:
    """Documents of one kind: runs of new prose paragraphs of one file, up to DOC_CHARS each."""
    for text in _texts(kind):
        doc: list[str] = []
        for p in paragraphs(text):
            if p in seen or not is_prose(p):
                continue
            seen.add(p)
            doc.append(p)
            if sum(map(len, doc)) >= DOC_CHARS:
                yield "\n\n".join(doc)
                doc = []
        if doc:
            yield "\n\n".join(doc)


KINDS = ("docstrings", "doc", "info")


def english_documents(max_chars: int) -> tuple[list[str], dict[str, int]]:
    """(documents, chars per kind): the three kinds interleaved until `max_chars` characters."""
    seen: set[str] = set()
    streams = [(kind, _documents(kind, seen)) for kind in KINDS]
    docs, chars = [], dict.fromkeys(KINDS, 0)
    total = 0
    while streams and total < max_chars:
        for kind, stream in list(streams):
            doc = next(stream, None)
            if doc is None:
                streams.remove((kind, stream))
                continue
            docs.append(doc)
            chars[kind] += len(doc)
            total += len(doc)
    if total == 0:
        raise RuntimeError(f"no English prose found under {DOC_ROOT}, {INFO_ROOT} or the Python standard library")
    return docs, chars


def gathered(max_chars: int) -> list[str]:
    """english_documents(max_chars), printing what was gathered and how long it took."""
    start = time.perf_counter()
    docs, chars = english_documents(max_chars)
    kinds = ", ".join(f"{kind} {n / 1e6:.1f} M" for kind, n in chars.items())
    print(f"English text gathered in {time.perf_counter() - start:.0f} s: {len(docs):,} documents, {kinds} chars")
    return docs


def chats(docs: list[str], seed: int = 0) -> list[list[dict]]:
    """Chat examples from the documents' paragraphs: [system], then 1-3 (user, assistant 1-3 paragraphs)."""
    rng = random.Random(seed)
    paras = iter(itertools.chain.from_iterable(paragraphs(d) for d in docs))
    out = []
    while True:
        messages = []
        if rng.random() < 0.3:
            messages.append({"role": "system", "content": "You are a helpful assistant. Answer plainly."})
        try:
            for _ in range(rng.randint(1, 3)):
                messages.append({"role": "user", "content": next(paras)})
                reply = [next(paras) for _ in range(rng.randint(1, 3))]
                messages.append({"role": "assistant", "content": "\n\n".join(reply)})
        except StopIteration:
            return out
        out.append(messages)
