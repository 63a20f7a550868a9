"""Byte streams for byte-level training: what each source's train and val streams hold, and their files.

On disk, per (source, split), in the streams folder (names from layout.py):
  {source}_{split}.bin        the UTF-8 bytes of the stream, nothing else
  {source}_{split}.meta.json  niels_gpt.meta's header (kind "streams", tokenizer fields None) + the
                              inputs the stream was built from + n_bytes, sha256, encoding, skipped_blank
A stream is written as it is read, one document at a time, into a staged file (`{name}.bin.tmp`), its
length and sha256 counted on the way, so memory stays flat whatever the corpus. Publishing takes the old
stream's meta.json down, renames the staged .bin onto its name, then writes the meta.json, so a
meta.json means its .bin is complete. An enabled source that is not required and has no input gets an
empty .bin and a "not built" meta.json (`meta.not_built`), so the workflow's targets exist; readers
skip it. Streams:
  wiki    wikitext lines of the loader's train / val split, joined with `doc_separator`
  roam    markdown notes split by file (seeded, `niels_gpt.splits`), texts joined with `doc_separator`
  primer  the primer text split into dialogues on `delimiter` (held-out dialogues), kept as-is
Blank documents (empty or whitespace-only notes, lines or dialogues: `data.normalize.is_blank`) are
left out, so a separator never stands next to nothing, and counted in the meta's `skipped_blank`
(primer: blank dialogues are left out before the split and counted in the train stream's meta).

`source_streams(cfg, source)` plans one source: for each split, the meta fields it records (header +
the inputs known before reading) and a function that writes its bytes to a file and says what it read.
The same inputs give byte-identical .bin files.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, BinaryIO, Union

from niels_gpt import layout, meta
from niels_gpt.atomic import StagedFile
from niels_gpt.data.normalize import is_blank
from niels_gpt.data.registry import STREAM_SOURCES
from niels_gpt.layout import SPLITS, STREAM_FORMAT_VERSION

if TYPE_CHECKING:
    import numpy
    import torch

# A byte stream as the batcher reads it, in place: bytes, bytearray, memoryview, a 1-D uint8 numpy
# array (a memory-mapped .bin) or a 1-D uint8 CPU torch tensor. numpy and torch are named, not
# imported, so the builder (run by the workflow) stays free of them.
ByteStream = Union[bytes, bytearray, memoryview, "numpy.ndarray", "torch.Tensor"]
BytesSources = dict[str, ByteStream]  # keys: "wiki" | "roam" | "primer"
ENCODING = "utf-8"  # streams hold UTF-8 bytes: values 0..255
LENGTH_FIX = "add text, lower T (streams.T), or drop the source from streams.enabled_sources / required_sources"
# Documents are gathered up to this many characters, then joined, encoded, written and hashed at once:
# a call per wikitext line (~1.8 M at full size) made the write 3x slower than one join; 1 M characters
# (at most 4 MiB encoded) is noise next to the process (~150 MB of imports).
WRITE_CHUNK_CHARS = 1 << 20


@dataclass(frozen=True)
class StreamBuildConfig:
    """Everything the streams depend on. `cache_dir` is the streams folder; `force_rebuild` makes
    `build_sources` ignore current streams; `enabled_sources` are built, `required_sources` (a subset)
    must have input and be non-empty in both splits."""

    roam_root: str = ".roam-data/"
    primer_path: str = "data/primer.txt"
    cache_dir: str = "data/cache/streams"
    doc_separator: str = "\n\n"
    roam_val_frac: float = 0.10
    primer_val_frac: float = 0.10
    seed: int = 42
    delimiter: str = "\n\n<dialogue>\n\n"
    force_rebuild: bool = False
    T: int = 256  # byte context length (config streams.T); every stream needs T+1 bytes
    enabled_sources: tuple[str, ...] = field(default=STREAM_SOURCES)
    required_sources: tuple[str, ...] = field(default=STREAM_SOURCES)


@dataclass(frozen=True)
class Written:
    """What writing one stream gave: its length and sha256, the blank documents left out, and the
    inputs only known once read (wiki: its line and character counts, the commit read)."""

    n_bytes: int
    sha256: str
    skipped_blank: int = 0
    inputs: dict = field(default_factory=dict)


def write_documents(out: BinaryIO, docs: Iterable[str], sep: str) -> Written:
    """Write the non-blank docs joined with sep, utf-8 encoded, to `out` as they are read (at most
    WRITE_CHUNK_CHARS characters held). `inputs`: n_docs and total_chars of every doc read, the blank
    ones included."""
    sha, n_bytes = hashlib.sha256(), 0
    n_docs = total_chars = blank = 0
    chunk: list[str] = []
    chunk_chars = 0

    def flush() -> None:
        nonlocal n_bytes, chunk, chunk_chars
        data = (sep if n_bytes else "") + sep.join(chunk)  # a separator between chunks, as inside one
        encoded = data.encode(ENCODING)
        out.write(encoded)
        sha.update(encoded)
        n_bytes += len(encoded)
        chunk, chunk_chars = [], 0

    for doc in docs:
        n_docs += 1
        total_chars += len(doc)
        if is_blank(doc):
            blank += 1
            continue
        chunk.append(doc)
        chunk_chars += len(doc)
        if chunk_chars >= WRITE_CHUNK_CHARS:
            flush()
    if chunk:
        flush()
    return Written(n_bytes, sha.hexdigest(), blank, {"n_docs": n_docs, "total_chars": total_chars})


def write_bytes(out: BinaryIO, data: bytes) -> Written:
    """Write `data` to `out` as it is."""
    out.write(data)
    return Written(len(data), hashlib.sha256(data).hexdigest())


def _documents_bytes(docs: Iterable[str], sep: str) -> bytes:
    out = io.BytesIO()
    write_documents(out, docs, sep)
    return out.getvalue()


def build_wiki_stream(docs: Sequence[str], *, sep: str) -> bytes:
    """utf-8 encode docs and join with sep (blank docs left out): `write_documents` in memory."""
    return _documents_bytes(docs, sep)


def build_roam_stream(docs: Sequence[str], *, sep: str) -> bytes:
    """utf-8 encode docs and join with sep (blank docs left out): `write_documents` in memory."""
    return _documents_bytes(docs, sep)


def build_primer_stream(text: str) -> bytes:
    """utf-8 encode text exactly as-is."""
    return text.encode(ENCODING)


def stream_paths(cache_dir: str | os.PathLike, source: str, split: str) -> tuple[str, str]:
    """(.bin path, .meta.json path) of one stream."""
    return layout.stream_bin(cache_dir, source, split), layout.stream_meta(cache_dir, source, split)


def wikitext_dataset() -> tuple[str, str | None]:
    """(dataset id, config) of the wikitext that `load_wikitext()` reads by default."""
    from niels_gpt.data.wikitext import CONFIG, DATASET_ID

    return DATASET_ID, CONFIG


def stream_header(cfg: StreamBuildConfig, source: str, wiki_dataset: tuple[str, str | None] | None = None) -> dict:
    """The meta.json header of `source`'s streams: wiki -> the wikitext dataset (`wiki_dataset`, or
    `wikitext_dataset()`), no seed (its splits are the dataset's own); roam -> "roam"; primer -> its
    text file; roam and primer record the seed that splits them."""
    if source == "wiki":
        name, config = wiki_dataset or wikitext_dataset()
        fields = {"seed": None, "dataset_name": name, "dataset_config": config}
    elif source == "roam":
        fields = {"seed": cfg.seed, "dataset_name": "roam", "dataset_config": None}
    elif source == "primer":
        fields = {"seed": cfg.seed, "dataset_name": cfg.primer_path, "dataset_config": None}
    else:
        raise ValueError(f"unknown stream source {source!r}; streams are {list(STREAM_SOURCES)}")
    return meta.header("streams", format_version=STREAM_FORMAT_VERSION, **fields)


@dataclass
class SplitStream:
    """One (source, split) stream: the meta fields it records before it is built (header + inputs),
    and how to build it: `write(file)` writes its bytes -> Written. `inputs_complete`: `inputs` holds
    every input (roam, primer: their files' stats), so a current stream is known before reading; wiki
    learns its counts and the commit read while it writes (Written.inputs)."""

    source: str
    split: str
    header: dict
    inputs: dict
    write: Callable[[BinaryIO], Written]
    inputs_complete: bool = True


def _file_stat(path: str | os.PathLike) -> dict:
    st = os.stat(path)
    return {"path": os.fspath(path), "mtime_ns": st.st_mtime_ns, "size": st.st_size}


def _write_wiki(docs: Iterable[str], sep: str, wiki_read: Mapping | None, split: str, out: BinaryIO) -> Written:
    written = write_documents(out, docs, sep)
    if wiki_read is None:
        return written
    read = dict(wiki_read.get(split) or {})  # filled by the loader as it read: dataset, split, the commit read
    inputs = {**written.inputs, "dataset_revision": read.get("revision"), "provenance": read}
    return Written(written.n_bytes, written.sha256, written.skipped_blank, inputs)


def _wiki_streams(
    cfg: StreamBuildConfig, docs_by_split: Mapping[str, Iterable[str]], header: dict, wiki_read: Mapping | None
) -> list[SplitStream]:
    streams = []
    for split in SPLITS:
        if split not in docs_by_split:
            raise ValueError(f"wiki docs have no {split!r} split (got {sorted(docs_by_split)}); expected train and val")
        inputs = {"source": "wiki", "split": split, "sep": cfg.doc_separator}
        write = partial(_write_wiki, docs_by_split[split], cfg.doc_separator, wiki_read, split)
        streams.append(SplitStream("wiki", split, header, inputs, write, inputs_complete=False))
    return streams


def _write_notes(paths: list[str], sep: str, out: BinaryIO) -> Written:
    from niels_gpt.data.roam import iter_roam

    written = write_documents(out, (note.text for note in iter_roam(paths)), sep)  # one note read at a time
    return Written(written.n_bytes, written.sha256, written.skipped_blank)  # the files' stats are its inputs


def _roam_streams(cfg: StreamBuildConfig, header: dict) -> list[SplitStream]:
    from niels_gpt.data.roam import list_roam_paths, split_roam_paths

    paths = list_roam_paths(cfg.roam_root)
    train_paths, val_paths = split_roam_paths(paths, val_frac=cfg.roam_val_frac, seed=cfg.seed)
    streams = []
    for split, split_paths in (("train", train_paths), ("val", val_paths)):
        inputs = {
            "source": "roam",
            "split": split,
            "files": [_file_stat(p) for p in split_paths],
            "sep": cfg.doc_separator,
            "seed": cfg.seed,
            "val_frac": cfg.roam_val_frac,
        }
        write = partial(_write_notes, list(split_paths), cfg.doc_separator)
        streams.append(SplitStream("roam", split, header, inputs, write))
    return streams


def _primer_streams(cfg: StreamBuildConfig, header: dict) -> list[SplitStream]:
    from niels_gpt.data.primer import dialogue_blocks, load_primer_text, split_primer_dialogues

    if not os.path.isfile(cfg.primer_path):
        raise FileNotFoundError(
            f"{cfg.primer_path}: primer text file not found; create it or point sources.primer.text at it"
        )
    stat = _file_stat(cfg.primer_path)
    texts: dict[str, str] = {}
    blank: list[int] = []

    def write(split: str, out: BinaryIO) -> Written:
        if not texts:  # split once, for both splits; split_primer_dialogues leaves blank dialogues out
            text = load_primer_text(cfg.primer_path)
            texts["train"], texts["val"] = split_primer_dialogues(
                text, val_frac=cfg.primer_val_frac, seed=cfg.seed, delimiter=cfg.delimiter
            )
            blank.append(sum(map(is_blank, dialogue_blocks(text, cfg.delimiter))))
        written = write_bytes(out, build_primer_stream(texts.pop(split)))
        return Written(written.n_bytes, written.sha256, blank[0] if split == "train" else 0)

    streams = []
    for split in SPLITS:
        inputs = {
            "source": "primer",
            "split": split,
            **stat,
            "delimiter": cfg.delimiter,
            "seed": cfg.seed,
            "val_frac": cfg.primer_val_frac,
        }
        streams.append(SplitStream("primer", split, header, inputs, partial(write, split)))
    return streams


WikiDocs = Mapping[str, Iterable[str]] | Callable[[], Mapping[str, Iterable[str]]]


def source_streams(
    cfg: StreamBuildConfig,
    source: str,
    wiki_docs: WikiDocs | None = None,
    wiki_dataset: tuple[str, str | None] | None = None,
    wiki_read: Mapping | None = None,
) -> list[SplitStream]:
    """The train and val streams of `source`; wiki reads `wiki_docs` ({"train": lines, "val": lines},
    lists or one-pass iterables of `wiki_dataset`'s lines, or a function returning them), or wikitext's
    default splits when None. `wiki_read` ({"train": record, "val": record}, filled by the loader while
    the lines are read: dataset, split, the commit read) goes into each wiki stream's meta as
    `provenance`, its commit as `dataset_revision`. FileNotFoundError when the source has no input."""
    header = stream_header(cfg, source, wiki_dataset)
    if source == "wiki":
        if wiki_docs is None:
            from niels_gpt.data.wikitext import load_wikitext

            wiki_docs = load_wikitext
        return _wiki_streams(cfg, wiki_docs() if callable(wiki_docs) else wiki_docs, header, wiki_read)
    if source == "roam":
        return _roam_streams(cfg, header)
    return _primer_streams(cfg, header)


def check_gating(cfg: StreamBuildConfig) -> None:
    """Known source names, required_sources a subset of enabled_sources, T >= 1."""
    unknown = sorted((set(cfg.enabled_sources) | set(cfg.required_sources)) - set(STREAM_SOURCES))
    if unknown:
        raise ValueError(f"unknown stream sources {unknown}; streams are {list(STREAM_SOURCES)}")
    extra = [s for s in cfg.required_sources if s not in cfg.enabled_sources]
    if extra:
        raise ValueError(
            f"required_sources {extra} are not in enabled_sources {list(cfg.enabled_sources)}; "
            "enable them or drop them from required_sources"
        )
    if cfg.T < 1:
        raise ValueError(f"T must be >= 1, got {cfg.T}")


def check_stream_lengths(lengths: Mapping[str, int], T: int, *, required: Collection[str] = ()) -> None:
    """The one T+1 check of the builder and the batcher: every stream (name -> its length in bytes)
    holds at least T+1 bytes, or one ValueError lists every shorter one, in the order given. An empty
    stream named in `required` is marked as such (it could not be left out)."""
    if T < 1:
        raise ValueError(f"T must be >= 1, got {T}")
    short = [(name, n) for name, n in lengths.items() if n < T + 1]
    if short:
        lines = [
            f"{name}: {n:,} bytes" + (" (empty, and the source is required)" if n == 0 and name in required else "")
            for name, n in short
        ]
        raise ValueError(
            f"byte streams shorter than T+1 = {T + 1:,} bytes:\n  - " + "\n  - ".join(lines) + f"\n{LENGTH_FIX}"
        )


def stage_stream(cache_dir: str | os.PathLike, source: str, split: str, write: Callable[[BinaryIO], Written]):
    """(StagedFile, Written): `write` run into the stream's staged .bin (`{name}.bin.tmp`, not yet on its
    name: `publish_stream` renames it); on error the staged file is removed and the error re-raised."""
    staged = StagedFile(stream_paths(cache_dir, source, split)[0])
    try:
        written = write(staged.file)
        staged.close()
    except BaseException:
        staged.discard()
        raise
    return staged, written


def stream_record(
    cache_dir: str | os.PathLike, source: str, split: str, written: Written, inputs: Mapping, header: Mapping
) -> dict:
    """The meta.json of a built stream: header + inputs (those known before reading, then Written's)
    + what was written."""
    return {
        **header,
        **inputs,
        **written.inputs,
        "source": source,
        "split": split,
        "bin": os.path.basename(stream_paths(cache_dir, source, split)[0]),
        "n_bytes": written.n_bytes,
        "sha256": written.sha256,
        "encoding": ENCODING,
        "skipped_blank": written.skipped_blank,
    }


def publish_stream(cache_dir: str | os.PathLike, source: str, split: str, staged: StagedFile, record: dict) -> dict:
    """Take the old stream's meta.json down, rename the staged .bin onto its name, then publish `record`
    as its meta.json (so a meta.json always means its .bin is complete); returns `record`."""
    meta_path = stream_paths(cache_dir, source, split)[1]
    meta.unpublish(meta_path)
    try:
        staged.commit()
    except BaseException:
        staged.discard()
        raise
    meta.write_meta(meta_path, record)
    return record


def write_stream(
    cache_dir: str | os.PathLike,
    source: str,
    split: str,
    data: bytes,
    inputs: Mapping,
    skipped_blank: int = 0,
    *,
    header: Mapping | None = None,
) -> dict:
    """Write one stream held in memory (see the module docstring); returns its meta. `header` defaults
    to the streams header with no seed and no dataset."""
    if header is None:
        header = meta.header("streams", format_version=STREAM_FORMAT_VERSION, seed=None)
    staged, written = stage_stream(cache_dir, source, split, partial(write_bytes, data=data))
    written = Written(written.n_bytes, written.sha256, skipped_blank)
    return publish_stream(
        cache_dir, source, split, staged, stream_record(cache_dir, source, split, written, inputs, header)
    )


def write_not_built(cache_dir: str | os.PathLike, source: str, split: str, *, reason: str, header: Mapping) -> dict:
    """An empty .bin and the "not built" meta.json (`meta.not_built`: built false, `reason`); returns the meta."""
    fields = {k: header[k] for k in ("format_version", "seed", "dataset_name", "dataset_config")}
    record = {**meta.not_built("streams", reason=reason, **fields), "source": source, "split": split}
    staged, _ = stage_stream(cache_dir, source, split, partial(write_bytes, data=b""))
    return publish_stream(cache_dir, source, split, staged, record)


def read_current(cache_dir: str | os.PathLike, stream: SplitStream, learned: Mapping | None = None) -> dict | None:
    """The meta of the stream on disk if it is current, else None: the one staleness decision.

    Current: its meta.json records the same header and inputs `stream` would record (so the same
    format_version, seed, dataset and input files; `learned`: the inputs known once read, Written.inputs)
    and its .bin holds n_bytes bytes. The .bin is not read."""
    bin_path, meta_path = stream_paths(cache_dir, stream.source, stream.split)
    expected = json.loads(json.dumps({**stream.header, **stream.inputs, **(learned or {})}))  # tuples -> lists
    try:
        with open(meta_path, encoding="utf-8") as f:
            on_disk = json.load(f)
        if not isinstance(on_disk, dict) or any(k not in on_disk or on_disk[k] != v for k, v in expected.items()):
            return None
        size = os.path.getsize(bin_path)
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    return on_disk if size == on_disk.get("n_bytes") else None
