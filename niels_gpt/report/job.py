"""Config -> the report's files: what the `report_*` and `leakage` rules (and the CLI) run.

`write_figures(cfg, family, out_dir)` measures one family's caches under `cfg["cache_dir"]`
(stats.py) and draws its figures (figures.py; leakage: leakage_view.py from leakage.json), named in
`layout.REPORT_FIGURES`. `write_leakage(cfg, out)` runs the audit (leakage.py) with the `leakage.*`
keys, writes leakage.json, logs one line per val split (stderr), and applies the gate; a failed gate
writes nothing (the error names the worst pairs). The workflow runs it in two steps: `write_leakage_part`
per space (cache/report/leakage_tokens.json, leakage_bytes.json), then `write_leakage_joined` (the gate).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from niels_gpt import layout
from niels_gpt.atomic import atomic_write_json
from niels_gpt.log import log

FIGURE_FAMILIES = tuple(layout.REPORT_FIGURES)  # the four cache families, and the leakage audit


def _tokenizer(cfg: dict, path: str | None):
    from niels_gpt.tokenizer import SentencePieceTokenizer

    return SentencePieceTokenizer(path or layout.tokenizer_model(cfg["cache_dir"]))


def leakage_json_path(cfg: dict) -> str:
    return f"{layout.report_dir(cfg['cache_dir'])}/{layout.LEAKAGE_JSON}"


def write_figures(cfg: dict, family: str, out_dir: str | os.PathLike, *, tokenizer: str | None = None) -> list[Path]:
    """Draw one family's figures into `out_dir`; returns their paths."""
    from niels_gpt.report import figures, stats

    cache = cfg["cache_dir"]
    if family == "pretrain":
        return figures.draw_pretrain(stats.pretrain_family(cache), out_dir)
    if family == "sft":
        return figures.draw_sft(stats.sft_family(cache, cfg["sft"]["mix"]), out_dir)
    if family == "tokenizer":
        return figures.draw_tokenizer(stats.tokenizer_family(cache, _tokenizer(cfg, tokenizer).piece_bytes()), out_dir)
    if family == "streams":
        return figures.draw_streams(stats.streams_family(cache, cfg["streams"]["p_train"]), out_dir)
    if family == "leakage":
        from niels_gpt.report.leakage_view import draw_leakage

        path = leakage_json_path(cfg)
        if not os.path.exists(path):
            raise FileNotFoundError(f"{path}: no leakage audit; run `python -m niels_gpt.cache.cli leakage` first")
        with open(path, encoding="utf-8") as f:
            return draw_leakage(json.load(f), out_dir)
    raise ValueError(f"unknown report family {family!r}; expected one of {', '.join(FIGURE_FAMILIES)}")


def summary_lines(result: dict) -> list[str]:
    """One line per val split: share of its n-grams in any train split, and the train split with most
    (`result`: leakage.json, or one space's part)."""
    lines = []
    for v in result["val_splits"]:
        worst = max(v["fraction"].items(), key=lambda kv: (kv[1], kv[0]), default=("-", 0.0))
        n = result["n"] if "space" in result else result["n"][v["space"]]
        lines.append(
            f"{v['name']} val: {v['ngrams']:,} {n}-grams in {v['units']:,} {v['unit']}s, "
            f"{100 * v['fraction_any']:.2f}% in some train split (most: {worst[0]} {100 * worst[1]:.2f}%)"
        )
    return lines + [f"left out: {k['name']}: {k['reason']}" for k in result["skipped"]]


def write_leakage(cfg: dict, out: str | os.PathLike, *, num_threads: int = 2, tokenizer: str | None = None) -> dict:
    """Run the audit over cfg["cache_dir"], apply the gate, write `out` (leakage.json); returns the result."""
    from niels_gpt.report.leakage import audit

    settings = cfg["leakage"]
    start = time.perf_counter()
    result = audit(
        cfg["cache_dir"],
        n_tokens=settings["n_tokens"],
        n_bytes=settings["n_bytes"],
        top=settings["top_units"],
        max_fraction=settings["max_fraction"],
        num_threads=num_threads,
        tokenizer=_audit_tokenizer(cfg, tokenizer),
    )
    _log_scanned(result, time.perf_counter() - start)
    return _gate_and_write(result, out)


def write_leakage_part(
    cfg: dict, space: str, out: str | os.PathLike, *, num_threads: int = 2, tokenizer: str | None = None
) -> dict:
    """One space's part of the audit (leakage.audit_part) -> `out`; no gate (the join applies it)."""
    from niels_gpt.report.leakage import audit_part

    settings = cfg["leakage"]
    start = time.perf_counter()
    part = audit_part(
        cfg["cache_dir"],
        space,
        n=settings[f"n_{space}"],
        top=settings["top_units"],
        num_threads=num_threads,
        tokenizer=_audit_tokenizer(cfg, tokenizer) if space == "tokens" else None,
    )
    _log_scanned(part, time.perf_counter() - start)
    atomic_write_json(out, part)
    log(f"leakage audit, {space} -> {out}")
    return part


def write_leakage_joined(cfg: dict, parts: list[str | os.PathLike], out: str | os.PathLike) -> dict:
    """leakage.json from the spaces' parts (leakage.merge_parts), gate applied; returns the result."""
    from niels_gpt.report.leakage import merge_parts

    settings = cfg["leakage"]
    loaded = {}
    for path in parts:
        try:
            with open(path, encoding="utf-8") as f:
                loaded[str(path)] = json.load(f)
        except (OSError, ValueError) as e:
            raise ValueError(
                f"{path}: cannot read a leakage part ({e}); run `leakage --space tokens|bytes` again"
            ) from e
    result = merge_parts(
        loaded,
        n_tokens=settings["n_tokens"],
        n_bytes=settings["n_bytes"],
        max_fraction=settings["max_fraction"],
    )
    for line in summary_lines(result):
        log(line)
    return _gate_and_write(result, out)


def _audit_tokenizer(cfg: dict, path: str | None):
    tok_path = path or layout.tokenizer_model(cfg["cache_dir"])
    return _tokenizer(cfg, tok_path) if os.path.exists(tok_path) else None


def _log_scanned(result: dict, seconds: float) -> None:
    scanned = sum(t["positions"] for t in result["train_splits"])
    for line in summary_lines(result):
        log(line)
    log(f"scanned {scanned:,} train positions in {seconds:.1f} s ({scanned / max(seconds, 1e-9) / 1e6:.1f} M/s)")


def _gate_and_write(result: dict, out: str | os.PathLike) -> dict:
    from niels_gpt.report.leakage import check_gate

    check_gate(result)
    atomic_write_json(out, result)
    log(f"leakage audit -> {out}")
    return result
