"""keep.py: the outputs of the jobs about to run are linked aside, and put back for a job that did not finish.

Snakemake's part (deleting a job's outputs before it runs and after it fails) is played by hand here; the
workflow tests run the real thing (tests/workflow/test_workflow.py).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

from niels_gpt.keep import Group, Kept, discard, previous_dir, recover, restore, snapshot


def write(path: Path, data: bytes) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return str(path)


class FakeRecords:
    """Snakemake's metadata records: path -> record dict."""

    def __init__(self, records: dict):
        self.records = dict(records)

    def read(self, path):
        return self.records.get(path)

    def write(self, path, data):
        if data is None:
            self.records.pop(path, None)
        else:
            self.records[path] = data


def sft_group(cache: Path) -> Group:
    folder = cache / "sft" / "primer"
    return Group("sft (source=primer)", [str(folder / n) for n in ("train_tokens.bin", "meta.json")], logs=[])


def pretrain_group(cache: Path) -> Group:
    folder = cache / "pretrain" / "roam"
    return Group("pretrain (source=roam)", [str(folder / "train"), str(folder / "meta.json")], logs=[])


def build_old(cache: Path) -> None:
    write(cache / "sft" / "primer" / "train_tokens.bin", b"old tokens")
    write(cache / "sft" / "primer" / "meta.json", b'{"old": 1}')
    write(cache / "pretrain" / "roam" / "train" / "shard_00000.bin", b"old shard 0")
    write(cache / "pretrain" / "roam" / "train" / "shard_00001.bin", b"old shard 1")
    write(cache / "pretrain" / "roam" / "meta.json", b'{"old": 2}')


def old_cache(tmp_path: Path) -> tuple[Path, dict[str, bytes]]:
    """A cache of earlier builds and its files' contents (`tree`)."""
    cache = tmp_path / "cache"
    build_old(cache)
    return cache, tree(cache)


def delete_outputs(group: Group) -> None:
    """What Snakemake does to a job's outputs before running it (and after it failed)."""
    for p in map(Path, group.outputs):
        shutil.rmtree(p) if p.is_dir() else p.unlink(missing_ok=True)


def tree(root: Path) -> dict[str, bytes]:
    """Every file of the cache, .previous/ left out."""
    files = (p for p in sorted(root.rglob("*")) if p.is_file() and ".previous" not in p.parts)
    return {str(p.relative_to(root)): p.read_bytes() for p in files}


def test_a_failed_job_gets_its_previous_outputs_and_records_back(tmp_path):
    cache, before = old_cache(tmp_path)
    groups = [sft_group(cache), pretrain_group(cache)]
    records = FakeRecords({p: {"params": ["old"]} for g in groups for p in g.outputs})
    kept, _ = snapshot(groups, cache, records)
    for g in groups:  # both start: Snakemake deletes their outputs
        delete_outputs(g)
    # the pretrain job finishes with one shard fewer; the SFT job fails after Snakemake wrote its record
    write(cache / "pretrain" / "roam" / "train" / "shard_00000.bin", b"new shard")
    write(cache / "pretrain" / "roam" / "meta.json", b'{"new": 2}')
    for p in groups[0].outputs:
        records.write(p, {"params": ["new"]})
    restored = restore(kept, records)
    assert [g.job for g in restored] == ["sft (source=primer)"]
    after = tree(cache)
    assert after["sft/primer/train_tokens.bin"] == b"old tokens" and after["sft/primer/meta.json"] == b'{"old": 1}'
    # the job that finished keeps its new outputs; its old second shard does not come back beside them
    assert sorted(p for p in after if p.startswith("pretrain")) == [
        "pretrain/roam/meta.json",
        "pretrain/roam/train/shard_00000.bin",
    ]
    assert after["pretrain/roam/meta.json"] == b'{"new": 2}'
    assert all(records.read(p) == {"params": ["old"]} for p in groups[0].outputs)
    assert not previous_dir(cache).exists()
    assert before["sft/primer/train_tokens.bin"] == after["sft/primer/train_tokens.bin"]


def test_a_stopped_job_loses_its_half_written_outputs_to_the_previous_ones(tmp_path):
    cache, before = old_cache(tmp_path)
    group = pretrain_group(cache)
    kept, _ = snapshot([group], cache)
    delete_outputs(group)
    write(cache / "pretrain" / "roam" / "train" / "shard_00000.bin", b"half")  # killed before its meta.json
    assert [g.job for g in restore(kept)] == ["pretrain (source=roam)"]
    assert tree(cache) == before


def test_the_links_share_the_bytes_and_a_rename_over_the_output_leaves_the_kept_copy_alone(tmp_path):
    cache, _ = old_cache(tmp_path)
    group = sft_group(cache)
    run, _ = snapshot([group], cache)
    out = Path(group.outputs[0])
    kept = run.folder / "sft" / "primer" / "train_tokens.bin"
    assert os.path.samefile(out, kept)  # a hard link: no bytes copied
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_bytes(b"new tokens")
    os.replace(tmp, out)  # how every writer publishes
    assert kept.read_bytes() == b"old tokens"


def test_a_run_killed_before_its_hooks_is_put_right_by_the_next_run_and_a_live_run_is_left_alone(tmp_path):
    cache, before = old_cache(tmp_path)
    group = sft_group(cache)
    kept, _ = snapshot([group], cache)
    delete_outputs(group)  # ... and Snakemake was killed: no onerror
    dead = kept.folder.with_name(f"{socket.gethostname()}-{dead_pid()}")
    kept.folder.rename(dead)  # as if another process, now gone, had made it
    live = Kept(cache, previous_dir(cache) / f"{socket.gethostname()}-1")  # pid 1 never ends: a run in progress
    shutil.copytree(dead, live.folder, copy_function=os.link)
    assert [g.job for g in recover(cache)] == ["sft (source=primer)"]
    assert tree(cache) == before and not dead.exists() and live.folder.exists()
    new, recovered = snapshot([sft_group(cache)], cache)
    assert recovered == [] and (new.folder / "sft" / "primer" / "meta.json").exists()
    discard(new)
    assert live.folder.exists()  # the other run's links are its own
    discard(live)
    assert not previous_dir(cache).exists()


def dead_pid() -> int:
    """A pid no process has now."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_first_build_has_nothing_to_keep_and_jobs_that_never_started_keep_what_they_have(tmp_path):
    cache, before = old_cache(tmp_path)
    new = Group("streams (source=wiki)", [str(cache / "streams" / "wiki_train.bin")], logs=[])
    kept, _ = snapshot([new, sft_group(cache)], cache)
    assert restore(kept) == []  # wiki never existed; sft never started, so Snakemake deleted nothing
    assert tree(cache) == before
