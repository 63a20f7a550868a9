"""What a Snakemake run prints at its end: one line per job it ran, or, when a job failed, what was kept
and the job's error line, last.

Snakemake's own report of a job is its settings (the rule's command line holds every config value the job
uses as JSON); the workflow's hooks print these lines instead and the settings stay in the job's log.
Reads only the small files a job wrote (meta.json, its log): cheap at any cache size.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from niels_gpt.keep import Group


def _meta(path: str) -> dict | None:
    try:
        meta = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return meta if isinstance(meta, dict) else None


def _counts(meta: dict, unit: str, key: str) -> str:
    return ", ".join(
        f"{split} {meta[f'{split}_{key}']:,} {unit}" for split in ("train", "val") if f"{split}_{key}" in meta
    )


def _describe(meta: dict) -> str:
    if meta.get("built") is False:
        return f"not built ({meta.get('reason', 'disabled')})"
    kind = meta.get("kind")
    if kind == "tokenizer":
        return f"{meta.get('vocab_size', 0):,} ids, sha256 {str(meta.get('sha256', ''))[:8]}"
    if kind == "sft":
        return f"{_counts(meta, 'examples', 'examples')}; {_counts(meta, 'tokens', 'tokens')}"
    if kind == "pretrain":
        return _counts(meta, "tokens", "tokens")
    if kind == "streams":
        return f"{meta.get('split', '?')} {meta.get('n_bytes', 0):,} bytes"
    return "written"


def _where(paths: list[str]) -> str:
    """`folder/ (n files)` for several outputs, the path for one."""
    if len(paths) == 1:
        return paths[0]
    return f"{os.path.commonpath(paths)}/ ({len(paths)} outputs)"


def result_line(group: Group) -> str:
    """`job: what it built`, from the meta.json files among its outputs (else the folder it wrote)."""
    metas = [m for p in group.outputs if p.endswith("meta.json") for m in [_meta(p)] if m is not None]
    if not metas:
        return f"{group.job}: wrote {_where(group.outputs)}"
    return f"{group.job}: {'; '.join(_describe(m) for m in metas)} -> {_where(group.outputs)}"


# The order of the result lines: the way the data flows (the DAG's own order is arbitrary), then by name.
FLOW = (
    "tokenizer",
    "pretrain",
    "pretrain_part",
    "sft",
    "curate",
    "curate_pretrain",
    "curate_pretrain_part",
    "pretrain_merge",
    "curate_sft",
    "streams",
    "certificate",
)


def _flow_order(group: Group) -> tuple[int, str]:
    rule = group.job.split()[0]
    return (FLOW.index(rule) if rule in FLOW else len(FLOW), group.job)


def success_message(groups: list[Group]) -> str:
    """One line per job that ran (the aggregate flag job left out), in the order the data flows."""
    lines = [result_line(g) for g in sorted(groups, key=_flow_order) if g.logs]
    return "\n".join(["niels_gpt: built"] + [f"  {ln}" for ln in lines]) if lines else ""


def failed(groups: list[Group]) -> list[Group]:
    """The jobs of `groups` that ran and did not finish: outputs not all there, and a log written (Snakemake
    deletes a job's log before it runs it; a job that never started because another failed has none)."""
    return [
        g
        for g in groups
        if not all(os.path.lexists(p) for p in g.outputs) and any(os.path.exists(log) for log in g.logs)
    ]


def error_lines(log: str | os.PathLike, limit: int = 3) -> list[str]:
    """The last `limit` `error: ...` lines of a job's log (the one line a build command prints for a
    user's mistake), else its last non-empty line."""
    try:
        lines = Path(log).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []
    errors = [ln for ln in lines if ln.startswith("error:")]
    if errors:
        return errors[-limit:]
    rest = [ln for ln in lines if ln.strip()]
    return rest[-1:]


def failure_message(groups: list[Group], restored: list[Group], *, records: bool = True) -> str:
    """What a failed run prints last: each failed job, what was kept, its log, then its error line."""
    kept = {g.job: g for g in restored}
    lines = []
    for group in groups:
        if group.job in kept:
            what = _where(kept[group.job].present)
            lines.append(f"{group.job} failed; kept the previous {what}: it is there as before the run")
            if not records:  # this Snakemake's records could not be put back with the files
                lines.append(f"  (Snakemake may take it for up to date: rebuild it with -R {group.job.split()[0]})")
        else:
            lines.append(f"{group.job} failed; it had no previous version to keep")
        for log in group.logs:
            lines.append(f"  log: {log}")
            lines.extend(f"  {ln}" for ln in error_lines(log))
    return "\n".join(lines)
