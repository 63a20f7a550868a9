"""Read-only tools over a built cache: `verify`, `info` and `inspect` (never part of the workflow's DAG).

tree.py (the one cache-tree walker: which artifacts a path names, their splits and files; the report
reads it too), scan.py (streaming passes over token files: hash, id range, eot counts), verify.py
(re-check every artifact against its meta.json), checks.py (what verify checks in each family),
info.py (what every cache holds, as rows), info_tables.py (those rows as tables), samples.py (decoded
samples, the SFT loss-active span marked), cli.py (the three commands).
"""
