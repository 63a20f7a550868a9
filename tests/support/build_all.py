"""`build-all` run on a workflow test's workdir (its config.yaml, overrides.yaml and relative inputs), and the
sha256 of the files both write: what tests/cache/test_build_all.py and the workflow's num_parts test compare."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

from niels_gpt.cache.cli import main
from niels_gpt.command_line import run_cli


def build_all_like_workflow(workdir: Path, cache: Path, extra: dict | None = None) -> None:
    """`build-all --cache-dir cache` with the workflow's config (config.yaml, then overrides.yaml, then
    `extra`) and tokenizer (copied from workdir/cache), run in `workdir`; it must succeed."""
    from niels_gpt.config import deep_merge

    shutil.copytree(workdir / "cache" / "tokenizer", cache / "tokenizer")
    spec = deep_merge(json.loads((workdir / "overrides.yaml").read_text()), extra or {})
    old = os.getcwd()
    os.chdir(workdir)  # the demo's relative inputs (notes/, gutenberg_raw/)
    try:
        args = ["build-all", "--cache-dir", str(cache), "--config-file", "config.yaml", "--spec", json.dumps(spec)]
        assert run_cli(main, args) == 0
    finally:
        os.chdir(old)


def sha256_tree(root: Path, *parts: str) -> dict[str, str]:
    """{path under root: sha256} of every file under root/parts... (not Snakemake's .snakemake_timestamp
    marker in a directory() output)."""
    base = root.joinpath(*parts)
    files = [base] if base.is_file() else sorted(p for p in base.rglob("*") if p.is_file())
    files = [p for p in files if p.name != ".snakemake_timestamp"]
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


def differing(ours: Path, theirs: Path, trees) -> tuple[dict[str, str], list[str]]:
    """(our hashes, the paths whose bytes differ or that only one side has) over `trees` (tuples of parts)."""
    a, b = {}, {}
    for parts in trees:
        a.update(sha256_tree(ours, *parts))
        b.update(sha256_tree(theirs, *parts))
    return a, sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
