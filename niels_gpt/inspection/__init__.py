"""Read-only tools over a built cache: `verify`, `info` and `inspect` (never part of the workflow's DAG).

tree.py (which artifacts a path names), scan.py (streaming passes over token files: hash, id range,
eot counts), verify.py (re-check every artifact against its meta.json), info.py (what every cache
holds, as tables), samples.py (decoded samples, the SFT loss-active span marked), cli.py (the three
commands).
"""
