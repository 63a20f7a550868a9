"""`build-streams`: one source's byte streams -> {out-dir}/{source}_{train,val}.bin + .meta.json.

The entry point of the Snakemake `streams` rule (and of `build-all`, through
`niels_gpt.streams.build_stream_from_config`). It always rebuilds: under Snakemake the .bin files
are the targets, so deciding whether to rebuild is Snakemake's job. The bytes are deterministic
(same inputs => byte-identical .bin); the meta.json records the inputs (roam and primer: file
path, mtime_ns, size), so it too is identical for identical files.
"""

from __future__ import annotations

import os

from niels_gpt.cache.cli_common import add_config_file_flag, add_config_flag, resolve_config
from niels_gpt.streams import STREAM_SOURCES

# the config section of each stream's flags that are per source (--val-frac)
CONFIG_SOURCE = {"roam": "roam", "primer": "primer"}


def register(sub) -> None:
    p = sub.add_parser(
        "build-streams",
        help="build one source's byte streams (wiki, roam or primer) for byte-level training",
        description=__doc__,
    )
    p.add_argument("--source", required=True, choices=STREAM_SOURCES, help="which stream to build")
    p.add_argument("--out-dir", default=None, help="output folder (default: {cache_dir}/streams)")
    add_config_file_flag(p)
    add_config_flag(p, "--demo", "demo", help="read the bundled offline sample data")
    add_config_flag(p, "--seed", "seed", type=int, help="decides the roam / primer train-val split")
    add_config_flag(p, "--T", "streams.T", type=int, help="byte context length; every stream needs T+1 bytes")
    add_config_flag(p, "--doc-separator", "streams.doc_separator", type=str, help="joins wiki and roam documents (newlines in bash: $'\\n\\n')")
    add_config_flag(p, "--val-frac", "sources.{source}.val_frac", type=float, help="held-out share of roam files / primer dialogues (default 0.1 each)")
    add_config_flag(p, "--root", "sources.roam.root", type=str, help="roam notes folder")
    add_config_flag(p, "--primer-text", "sources.primer.text", type=str, help="primer dialogues file")
    add_config_flag(p, "--delimiter", "sources.primer.delimiter", type=str, help="separator between primer dialogues")
    p.set_defaults(func=run, _parser=p)


def run(args, parser) -> int:
    from niels_gpt.streams import build_stream_from_config

    if args.val_frac is not None and args.source not in CONFIG_SOURCE:
        raise ValueError(f"--val-frac applies to --source roam or primer; the {args.source} stream uses its own splits")
    cfg = resolve_config(args, parser)
    out_dir = args.out_dir or os.path.join(cfg["cache_dir"], "streams")
    build_stream_from_config(cfg, args.source, out_dir)  # logs one line per stream written
    return 0
