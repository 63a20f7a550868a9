"""The user's markdown notes (roam export) as pretrain documents, one per file, split by file.

- `list_roam_paths(root)`: every `*.md` under `root`, recursively, skipping hidden files and folders
  (`.obsidian/`, `.trash/`, ...), sorted by path relative to root (the same order on every machine).
- `split_roam_paths(paths, val_frac, seed)`: held-out files by `niels_gpt.splits.split_items` over
  the sorted paths, so the split depends on the set of files and the seed only.
- `load_texts(paths)`: each file read as UTF-8 and normalized.

Import-light (no torch at import): the Snakefile lists the notes at parse time.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from niels_gpt.data.normalize import normalize_text
from niels_gpt.data.types import PretrainSample

SOURCE = "roam"
NOTE_SUFFIX = ".md"


def list_roam_paths(root: str | os.PathLike) -> list[str]:
    """Sorted paths of the notes under `root`; FileNotFoundError if it is missing or holds none."""
    base = Path(root)
    if not base.is_dir():
        raise FileNotFoundError(
            f"{root}: roam notes folder not found; put your markdown notes there, set sources.roam.root, "
            f"disable the source (sources.roam.enabled=false) or use the demo data (demo=true)"
        )
    paths = find_notes(base)
    if not paths:
        raise FileNotFoundError(f"{root}: no *{NOTE_SUFFIX} notes found (hidden folders are skipped)")
    return paths


def find_notes(base: Path) -> list[str]:
    """The notes under `base` (no existence check, no torch): what the Snakefile declares as inputs."""
    found = []
    for path in base.rglob(f"*{NOTE_SUFFIX}"):
        rel = path.relative_to(base)
        if path.is_file() and not any(part.startswith(".") for part in rel.parts):
            found.append((rel.as_posix(), str(path)))
    return [p for _, p in sorted(found)]


def split_roam_paths(paths: Sequence[str], val_frac: float, seed: int) -> tuple[list[str], list[str]]:
    """(train_paths, val_paths): disjoint, each sorted, deterministic for a set of paths and a seed."""
    from niels_gpt.splits import split_items

    unique = sorted(set(map(str, paths)))
    return split_items(unique, val_frac, seed)


def load_texts(paths: Iterable[str]) -> list[str]:
    """The notes' texts, UTF-8, normalized, in the order given."""
    return [_read_note(p) for p in paths]


def _read_note(path: str) -> str:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: roam note vanished while reading (re-run the build)") from None
    try:
        return normalize_text(data.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not UTF-8 at byte {e.start} ({e.reason}); re-save the note as UTF-8") from None


def iter_roam(paths: Iterable[str], *, root: str | os.PathLike | None = None) -> Iterator[PretrainSample]:
    """One PretrainSample per note, lazily; meta["path"] is relative to `root` when given."""
    for path in paths:
        rel = Path(path).relative_to(root).as_posix() if root is not None else str(path)
        yield PretrainSample(text=_read_note(path), source=SOURCE, meta={"path": rel})
