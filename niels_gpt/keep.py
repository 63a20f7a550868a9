"""Keep the previous good version of every artifact until its rebuild has succeeded.

Snakemake deletes a job's declared outputs before it runs the job, and again when the job fails, so a
failed rebuild (a value the job refuses, a bad input line, the hub down, a kill) would cost the good cache
it was replacing. The workflow's hooks call this module instead:
  onstart    `snapshot`: every existing output of every job about to run is hard-linked (no bytes copied; a
             copy where the file system has no hard links) into {cache}/.previous/, with Snakemake's record
             of it (params, code, input: what decides a rerun); `manifest.json` is written last.
  onsuccess  `discard`: the links go.
  onerror    `restore`: a job whose outputs are not all there (it failed, or was stopped) gets its previous
             outputs moved back, with their records, so the next run rebuilds it exactly when it would have
             before the failed run. A job that finished, or never started, keeps what it has.
A run killed before its hooks ran leaves .previous/ behind; the next run's `snapshot` restores from it first.
The builders write new files under temporary names and rename them (new inodes), so a link keeps the old
bytes whatever a job does. .previous/ sits inside the cache folder (hard links need one file system) and is
a dot folder, so the cache-tree walker never takes it for an artifact.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

PREVIOUS_DIR = ".previous"
MANIFEST = "manifest.json"


@dataclass
class Group:
    """The declared outputs of one job, the ones that existed at the start, and their Snakemake records."""

    job: str  # "sft (source=primer)": how messages name the job
    outputs: list[str]
    present: list[str] = field(default_factory=list)
    records: dict[str, dict | None] = field(default_factory=dict)
    logs: list[str] = field(default_factory=list)


class Records:
    """Snakemake's metadata record of an output (what decides whether it is rerun), read and put back.
    Snakemake rewrites it for a failed job's outputs and then deletes them: a restored file needs its
    own record back, or the next run would take an old cache for one built from the new values."""

    def __init__(self, persistence):
        self.persistence = persistence

    @staticmethod
    def of(workflow) -> Records | None:
        """The records of `workflow`'s persistence, or None where this Snakemake keeps them otherwise."""
        persistence = getattr(workflow, "persistence", None)
        needed = ("_read_record", "_write_record", "_delete_record", "_unmark_incomplete")
        return Records(persistence) if all(hasattr(persistence, n) for n in needed) else None

    def read(self, path: str) -> dict | None:
        record = self.persistence._read_record(path)
        return None if record is None else record.model_dump(mode="json")

    def write(self, path: str, data: dict | None) -> None:
        from snakemake.persistence import MetadataRecord

        if data is None:
            self.persistence._delete_record(path)
        else:
            self.persistence._write_record(path, MetadataRecord.model_validate(data))
        self.persistence._unmark_incomplete(path)
        if hasattr(self.persistence, "_clear_cache"):
            self.persistence._clear_cache()


def jobs_to_run(workflow) -> list[Group]:
    """One Group per job `workflow` is about to run (its DAG, as the onstart hook sees it)."""
    groups = []
    for job in workflow.dag.needrun_jobs():
        wildcards = ", ".join(f"{k}={v}" for k, v in job.wildcards_dict.items())
        name = f"{job.rule.name} ({wildcards})" if wildcards else job.rule.name
        groups.append(Group(name, [str(f) for f in job.output], logs=[str(f) for f in job.log]))
    return groups


def previous_dir(cache_dir: str | os.PathLike) -> Path:
    return Path(cache_dir) / PREVIOUS_DIR


def _inside(path: str, cache_dir: Path) -> Path | None:
    """`path` relative to `cache_dir`, or None if it lies outside (no hard link across file systems)."""
    try:
        return Path(os.path.abspath(path)).relative_to(os.path.abspath(cache_dir))
    except ValueError:
        return None


def _link_or_copy(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError as e:
        if e.errno not in (errno.EPERM, errno.EXDEV, errno.ENOTSUP, errno.EMLINK, errno.EACCES):
            raise
        shutil.copy2(src, dst)


def _link_tree(src: Path, dst: Path) -> None:
    """dst becomes a hard-linked copy of src (a file, or a folder and everything in it)."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    if src.is_dir():
        shutil.copytree(src, dst, copy_function=lambda s, d: _link_or_copy(Path(s), Path(d)))
    else:
        _link_or_copy(src, dst)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def _read_manifest(keep: Path) -> list[Group]:
    try:
        groups = json.loads((keep / MANIFEST).read_text(encoding="utf-8"))["groups"]
    except (OSError, ValueError, KeyError):
        return []  # killed before the manifest was written: nothing had been deleted yet
    return [Group(**g) for g in groups]


def snapshot(groups: list[Group], cache_dir: str | os.PathLike, records: Records | None = None) -> list[Group]:
    """Link the existing outputs of `groups` (the jobs about to run) into {cache}/.previous/.

    Restores first from a .previous/ that a killed run left behind. Returns what the killed run's
    restore put back (usually nothing)."""
    cache = Path(cache_dir)
    keep = previous_dir(cache)
    recovered = restore(cache, records) if keep.exists() else []
    saved = []
    for group in groups:
        present = [p for p in group.outputs if _inside(p, cache) is not None and os.path.lexists(p)]
        if not present:
            continue
        for path in present:
            _link_tree(Path(path), keep / _inside(path, cache))
        group.present = present
        group.records = {p: records.read(p) for p in group.outputs} if records else {}
        saved.append(group)
    if saved:
        tmp = keep / (MANIFEST + ".tmp")
        tmp.write_text(json.dumps({"groups": [vars(g) for g in saved]}, indent=1), encoding="utf-8")
        os.replace(tmp, keep / MANIFEST)
    return recovered


def restore(cache_dir: str | os.PathLike, records: Records | None = None) -> list[Group]:
    """Put back the previous outputs of every job whose outputs are not all there; drop the rest of
    .previous/. Returns the groups put back."""
    cache = Path(cache_dir)
    keep = previous_dir(cache)
    restored = []
    for group in _read_manifest(keep):
        if all(os.path.lexists(p) for p in group.outputs):
            continue  # rebuilt, or never started
        for path in group.outputs:
            _remove(Path(path))  # whatever the stopped job left
        for path in group.present:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            os.replace(keep / _inside(path, cache), path)
        if records:
            for path in group.outputs:
                records.write(path, group.records.get(path))
        restored.append(group)
    discard(cache)
    return restored


def discard(cache_dir: str | os.PathLike) -> None:
    """Drop .previous/ (the outputs it held were rebuilt)."""
    shutil.rmtree(previous_dir(cache_dir), ignore_errors=True)
