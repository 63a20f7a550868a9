"""`build-streams`: one source's byte streams -> {out-dir}/{source}_{train,val}.bin + .meta.json.

The entry point of the Snakemake `streams` rule (and of `build-all`, through
`niels_gpt.streams.job.build_stream_from_config`). It always rebuilds: under Snakemake the .bin files
are the targets, so deciding whether to rebuild is Snakemake's job. The bytes are deterministic
(same inputs => byte-identical .bin); the meta.json records the inputs (roam and primer: file path,
mtime_ns, size), so it too is identical for identical files. Settings are config keys (streams.*,
sources.roam.*, sources.primer.*, seed).
"""

from __future__ import annotations

from niels_gpt import layout
from niels_gpt.command_line import add_config_args, resolve_config
from niels_gpt.data.registry import STREAM_SOURCES


def register(sub) -> None:
    p = sub.add_parser(
        "build-streams",
        help="build one source's byte streams (wiki, roam or primer) for byte-level training",
        description=__doc__,
    )
    p.add_argument("--source", required=True, choices=STREAM_SOURCES, help="which stream to build")
    p.add_argument("--out-dir", default=None, help="output folder (default: {cache_dir}/streams)")
    add_config_args(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from niels_gpt.streams.job import build_stream_from_config

    cfg = resolve_config(args)
    build_stream_from_config(cfg, args.source, args.out_dir or layout.streams_dir(cfg["cache_dir"]))
    return 0
