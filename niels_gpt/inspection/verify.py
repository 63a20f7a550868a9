"""`verify`: re-check every cache artifact against its meta.json.

Per artifact (tree.py lists them; checks.py holds the checks), every problem is collected, never only the first.
Every meta.json first has the fields its kind requires (`meta.check_required`) and a `kind` that is the
artifact's family; a not-built record (`built: false`) is then skipped with its reason, not failed. Then:
  tokenizer  spm.model's sha256 / vocab size / special ids == its meta.json; it loads.
  pretrain   the shards meta lists (a parted source's manifest: every part's shard, relative to the source
             folder) are there and no unlisted shard in a split folder; each has an even byte size, the
             token count and sha256 meta records, every id < vocab_size; split totals and document
             counts (eot ids as readers see them, plus a budget-cut last document) match meta; no part
             of a manifest changed since the merge (its meta.json sha256). A damaged part file names
             its part, and the fix line rebuilds that part (the merge then reruns).
  sft        {split}_tokens.bin even, token count, sha256 and byte size as meta; every id < vocab;
             {split}_idx.npy is 1-D int64, starts at 0, strictly increasing, last < n_tokens, one
             offset per example meta counts; every example starts with a role token; the loss-active
             tokens (loss_mask_from_tokens) add up to meta's num_label_tokens.
  streams    the .bin has meta's n_bytes and sha256 and is valid UTF-8.
Every token cache must carry the sha256 of the tokenizer in use (`{cache}/tokenizer/spm.model` or
--tokenizer): a cache built with another tokenizer decodes to garbage. `--quick` skips the sha256
hashing (everything else still reads the files). Files are read in chunks (scan.py): memory stays
flat on multi-GB shards.
"""

from __future__ import annotations

import os
from pathlib import Path

from niels_gpt.inspection.checks import (
    REBUILD,
    Check,
    Context,
    format_version_problem,
    verify_pretrain,
    verify_sft,
    verify_stream,
    verify_tokenizer,
)
from niels_gpt.inspection.expected import build_command, builds_here, expected_meta_paths
from niels_gpt.inspection.tree import Artifact, Selection, default_tokenizer_path, find_artifacts, stray_tmp_files
from niels_gpt.layout import (
    FAMILIES,
    FORMAT_VERSION,
    META,
    STREAM_FORMAT_VERSION,
    STREAM_META_SUFFIX,
    TOKENIZER_FORMAT_VERSION,
)
from niels_gpt.meta import check_required, is_built

VERIFIERS = {"tokenizer": verify_tokenizer, "pretrain": verify_pretrain, "sft": verify_sft, "streams": verify_stream}
FORMAT_VERSIONS = {
    kind: {"streams": STREAM_FORMAT_VERSION, "tokenizer": TOKENIZER_FORMAT_VERSION}.get(kind, FORMAT_VERSION)
    for kind in FAMILIES
}


def kind_problem(art: Artifact, meta: dict) -> str | None:
    """Why meta.json's `kind` does not fit the artifact: another family, or one unlike the folder it sits in."""
    kind, folder = meta.get("kind"), art.path.parent.name
    if kind in FAMILIES and kind != art.kind:
        return f"meta.json says kind {kind!r}, but {art.name} is a {art.kind} artifact; {REBUILD}"
    if art.kind != "tokenizer" and folder in FAMILIES and folder != art.kind:
        return f"meta.json says kind {art.kind!r}, but the artifact sits in {folder}/; {REBUILD}"
    return None


def meta_problems(art: Artifact, meta: dict) -> list[str]:
    """What makes the artifact's files unreadable by its meta.json: a required field missing, a wrong kind."""
    problem = kind_problem(art, meta)
    problems = [problem] if problem else []
    try:
        check_required(meta, path=art.meta_path.name)
    except ValueError as e:
        problems.append(str(e))
    return problems


def verify_artifact(art: Artifact, ctx: Context) -> Check:
    """Every check of one artifact; never raises for a damaged cache (problems are collected)."""
    c = Check(art)
    if not art.meta_path.is_file():
        c.status, c.problems = "FAIL", [f"no {art.meta_path.name}: the build never finished; {REBUILD}"]
        return c
    try:
        meta = art.read_meta()
    except ValueError as e:
        c.status, c.problems = "FAIL", [str(e)]
        return c
    if not isinstance(meta, dict):
        c.status, c.problems = "FAIL", [f"{art.meta_path.name}: not a JSON object; {REBUILD}"]
        return c
    c.problems = meta_problems(art, meta)
    if not c.problems and not is_built(meta):
        c.status, c.detail = "skipped", f"not built: {meta['reason']}"
        return c
    if not c.problems:
        format_version_problem(meta, FORMAT_VERSIONS[art.kind], c.problems)
        VERIFIERS[art.kind](art, meta, ctx, c)
    c.status = "FAIL" if c.problems else "ok"
    return c


def load_tokenizer(path: Path | None):
    """(tokenizer, problem): the tokenizer in use, or None and why it could not be loaded."""
    from niels_gpt.tokenizer import SentencePieceTokenizer

    if path is None:
        return None, "no tokenizer: the path is outside a cache tree; pass --tokenizer <spm.model>"
    try:
        return SentencePieceTokenizer(path), None
    except (OSError, ValueError) as e:
        return None, str(e)


def missing_checks(selection: Selection, cfg: dict) -> list[Check]:
    """A failed Check for every artifact `cfg` builds that the whole tree of `selection` lacks."""
    if not selection.whole_tree or not builds_here(cfg, selection.root):
        return []
    found = {os.path.abspath(a.meta_path) for a in selection.artifacts}
    checks = []
    for meta in expected_meta_paths(cfg, selection.root):
        if os.path.abspath(meta) in found:
            continue
        name = meta.parent.relative_to(selection.root).as_posix() if meta.name == META else f"streams/{meta.name}"
        name = name.removesuffix(STREAM_META_SUFFIX)
        kind = name.split("/")[0]
        art = Artifact(kind, name, meta.parent, meta)
        how = build_command(meta, selection.root, cfg, force=False)
        checks.append(Check(art, "FAIL", [f"missing: never built, or its build failed; build it: {how}"]))
    return checks


def fix_command(check: Check, root, cfg: dict) -> str | None:
    """The command that rebuilds a failed artifact of a cache tree (None outside a tree)."""
    if check.status != "FAIL" or root is None or check.artifact.name == "tokenizer in use":
        return None
    if check.rebuild:  # the parts of a manifest whose files are damaged; the merge follows them
        return build_command(" ".join(str(p) for p in check.rebuild), root, cfg, force=True)
    return build_command(check.artifact.meta_path, root, cfg, force=check.artifact.meta_path.exists())


def verify(
    path: str | os.PathLike,
    *,
    tokenizer_path: str | os.PathLike | None = None,
    quick: bool = False,
    on_bytes=None,
    config: dict | None = None,
) -> tuple[Selection, list[Check], list[Path]]:
    """(selection, one Check per artifact, stray *.tmp files). With `config`, a whole tree it builds (its
    cache_dir, cache/ or cache-demo/ under the current folder) is checked against it too: every artifact it
    builds must be there (missing_checks).

    If the tokenizer in use cannot be loaded, a failed "tokenizer in use" check comes first (unless the
    tokenizer artifact itself already failed), and token caches are checked against their own vocab_size.
    """
    selection = find_artifacts(path)
    tok_path = Path(tokenizer_path) if tokenizer_path else default_tokenizer_path(selection)
    tokenizer, tok_problem = load_tokenizer(tok_path)
    ctx = Context(tokenizer, tok_path, quick, on_bytes)
    checks = [verify_artifact(a, ctx) for a in selection.artifacts]
    if config is not None:
        checks += missing_checks(selection, config)
    needs_tokenizer = any(c.artifact.family.space == "tokens" and c.status != "skipped" for c in checks)
    reported = any(c.artifact.kind == "tokenizer" and c.status == "FAIL" for c in checks)
    if tok_problem and needs_tokenizer and not reported:
        where = tok_path or Path("tokenizer")
        checks.insert(
            0,
            Check(
                Artifact("tokenizer", "tokenizer in use", where, where),
                "FAIL",
                [f"{tok_problem}; token caches were checked against their own meta.json vocab_size only"],
            ),
        )
    return selection, checks, stray_tmp_files(selection)
