"""Curation before training: duplicates removed across sources, train decontaminated against every val
split and the configured benchmarks (see README "Curation")."""
