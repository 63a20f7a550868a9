"""What a cache tree must hold under the config, and the command that (re)builds one of its artifacts.

`verify` of a whole tree fails an artifact the config expects but the tree lacks (never built, or its build
failed before its first success): checking only what is on disk would call a half-built tree fine. Each
artifact is named by its meta.json, which its Snakemake job writes last; `snakemake <meta.json>` builds it
and what it needs, `snakemake -f <meta.json>` rebuilds it (a shard deleted by hand sits inside a folder
output, which a plain `snakemake cache/all` does not look into).
"""

from __future__ import annotations

import os
from pathlib import Path

from niels_gpt import layout


def expected_meta_paths(cfg: dict, root: str | os.PathLike) -> list[Path]:
    """The meta.json of every artifact the config builds under `root`: the tokenizer, every pretrain and SFT
    source (a disabled one writes a "not built" record), and both splits of every enabled stream."""
    from niels_gpt.data.registry import PRETRAIN_SOURCES, SFT_SOURCES

    metas = [Path(layout.tokenizer_dir(root)) / layout.META]
    metas += [Path(layout.pretrain_dir(root, s)) / layout.META for s in PRETRAIN_SOURCES]
    metas += [Path(layout.sft_dir(root, s)) / layout.META for s in SFT_SOURCES]
    streams = layout.streams_dir(root)
    metas += [
        Path(layout.stream_meta(streams, s, sp)) for s in cfg["streams"]["enabled_sources"] for sp in layout.SPLITS
    ]
    return metas


def builds_here(cfg: dict, root: str | os.PathLike) -> bool:
    """Whether `root` is a tree this config builds from the current folder: its cache_dir, or the default
    folder of the real or the demo build (a tree elsewhere is checked only against its own meta.json files)."""
    roots = {cfg["cache_dir"], layout.CACHE_DIR, layout.DEMO_CACHE_DIR}
    return os.path.abspath(root) in {os.path.abspath(r) for r in roots}


def build_command(meta_path: str | os.PathLike, root: str | os.PathLike, cfg: dict, *, force: bool) -> str:
    """`snakemake [-f] <meta.json>` for the artifact of `meta_path`, with the --config its tree needs: none for
    the config's own cache_dir, demo=true for the demo's folder, cache_dir=<root> for any other."""
    cmd = f"snakemake {'-f ' if force else ''}{meta_path}"
    where = os.path.abspath(root)
    if where == os.path.abspath(cfg["cache_dir"]):
        return cmd
    if where == os.path.abspath(layout.DEMO_CACHE_DIR):
        return cmd + " --config demo=true"
    if where == os.path.abspath(layout.CACHE_DIR):
        return cmd + " --config demo=false"
    return cmd + f" --config cache_dir={root}"
