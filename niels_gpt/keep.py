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
Each run links into its own folder, .previous/{host}-{pid}/ (runs building different targets may overlap);
a run killed before its hooks ran leaves its folder behind, and the next run's `snapshot` restores from it
first once that process is gone (`recover`).
The builders write new files under temporary names and rename them (new inodes), so a link keeps the old
bytes whatever a job does. .previous/ sits inside the cache folder (hard links need one file system) and is
a dot folder, so the cache-tree walker never takes it for an artifact.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import socket
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


def _read_manifest(folder: Path) -> list[Group]:
    try:
        groups = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))["groups"]
    except (OSError, ValueError, KeyError):
        return []  # stopped before the manifest was written: nothing had been deleted yet
    return [Group(**g) for g in groups]


@dataclass(frozen=True)
class Kept:
    """One run's links: its own folder {cache}/.previous/{host}-{pid}/ (runs that build different targets of
    one workflow may overlap: each keeps and restores only its own)."""

    cache: Path
    folder: Path


def _owner_alive(folder: Path) -> bool:
    """Whether the run that made `folder` may still be running: another host's, or a live pid of this one."""
    host, _, pid = folder.name.rpartition("-")
    if host != socket.gethostname() or not pid.isdigit():
        return True
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def recover(cache_dir: str | os.PathLike, records: Records | None = None) -> list[Group]:
    """Restore from the folders of runs that were killed before their hooks ran (their process is gone)."""
    cache = Path(cache_dir)
    root = previous_dir(cache)
    folders = sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
    recovered = []
    for folder in folders:
        if not _owner_alive(folder) or folder.name == _run_name():
            recovered += restore(Kept(cache, folder), records)
    return recovered


def _run_name() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


def snapshot(
    groups: list[Group], cache_dir: str | os.PathLike, records: Records | None = None
) -> tuple[Kept, list[Group]]:
    """Link the existing outputs of `groups` (the jobs about to run) into this run's folder of .previous/.

    First restores what killed runs left behind (`recover`). Returns (this run's Kept, what was recovered)."""
    cache = Path(cache_dir)
    recovered = recover(cache, records)
    kept = Kept(cache, previous_dir(cache) / _run_name())
    saved = []
    for group in groups:
        present = [p for p in group.outputs if _inside(p, cache) is not None and os.path.lexists(p)]
        if not present:
            continue
        for path in present:
            _link_tree(Path(path), kept.folder / _inside(path, cache))
        group.present = present
        group.records = {p: records.read(p) for p in group.outputs} if records else {}
        saved.append(group)
    if saved:
        tmp = kept.folder / (MANIFEST + ".tmp")
        tmp.write_text(json.dumps({"groups": [vars(g) for g in saved]}, indent=1), encoding="utf-8")
        os.replace(tmp, kept.folder / MANIFEST)
    return kept, recovered


def restore(kept: Kept, records: Records | None = None) -> list[Group]:
    """Put back the previous outputs of every job whose outputs are not all there; drop the rest of the
    run's folder. Returns the groups put back."""
    restored = []
    for group in _read_manifest(kept.folder):
        if all(os.path.lexists(p) for p in group.outputs):
            continue  # rebuilt, or never started
        for path in group.outputs:
            _remove(Path(path))  # whatever the stopped job left
        for path in group.present:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            os.replace(kept.folder / _inside(path, kept.cache), path)
        if records:
            for path in group.outputs:
                records.write(path, group.records.get(path))
        restored.append(group)
    discard(kept)
    return restored


def discard(kept: Kept) -> None:
    """Drop the run's folder (the outputs it held were rebuilt), and .previous/ once it is empty."""
    shutil.rmtree(kept.folder, ignore_errors=True)
    try:
        kept.folder.parent.rmdir()
    except OSError:
        pass  # another run's folder is still there
