"""What `verify` checks in each kind of artifact (verify.py runs them and collects the outcome).

Each verifier `(art, meta, ctx, check)` (verify.VERIFIERS, by family) appends every problem it finds to `check.problems`
(never only the first) and sets `check.detail` to what it measured. Files are read in chunks
(scan.py), so memory stays flat on multi-GB shards; `ctx.quick` skips the sha256 hashing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from niels_gpt.chat_template import ROLE_NAMES, loss_mask_from_tokens
from niels_gpt.hashing import sha256_file
from niels_gpt.inspection.scan import example_blocks, scan_bytes, scan_tokens
from niels_gpt.inspection.tree import Artifact
from niels_gpt.layout import SPLITS, TOKENIZER_MODEL
from niels_gpt.shard_list import is_manifest, manifest_problems, split_shards, unlisted_shards
from niels_gpt.token_files import OFFSET_DTYPE, TOKEN_DTYPE, open_tokens

SHORT_SHA = 12  # hex digits shown for a file hash mismatch (both sides); tokenizer mismatches show all 64
REBUILD = "rebuild it (the fix line below)"


@dataclass
class Check:
    """The outcome for one artifact: status ok | FAIL | skipped, problems, and what was checked."""

    artifact: Artifact
    status: str = "ok"
    problems: list[str] = field(default_factory=list)
    detail: str = ""
    rebuild: list[Path] = field(default_factory=list)  # meta.json files to rebuild (default: the artifact's)


@dataclass
class Context:
    tokenizer: object | None  # SentencePieceTokenizer in use, or None if it could not be loaded
    tokenizer_path: Path | None
    quick: bool
    on_bytes: object = None  # progress callback (bytes read)


def _short(sha: str | None) -> str:
    return "none" if not sha else sha[:SHORT_SHA]


def format_version_problem(meta: dict, want: int, problems: list[str]) -> None:
    if meta.get("format_version") != want:
        problems.append(f"format_version {meta.get('format_version')} in meta.json, this code reads {want}; {REBUILD}")


def _tokenizer_matches(meta: dict, ctx: Context, problems: list[str]) -> int | None:
    """Compare meta's tokenizer fields to the tokenizer in use; returns the vocab size ids must stay under."""
    tok = ctx.tokenizer
    if tok is None:
        return meta.get("vocab_size")
    if meta.get("tokenizer_sha256") != tok.sha256:
        problems.append(
            f"built with tokenizer sha256 {meta.get('tokenizer_sha256')}, but {ctx.tokenizer_path} has sha256 "
            f"{tok.sha256}; rebuild this cache with the current tokenizer (or verify with --tokenizer <its model>)"
        )
    if meta.get("vocab_size") != tok.vocab_size:
        problems.append(f"vocab_size {meta.get('vocab_size')} in meta.json, the tokenizer has {tok.vocab_size}")
    if meta.get("special_token_ids") != tok.special_ids:
        problems.append(
            f"special_token_ids {meta.get('special_token_ids')} in meta.json, the tokenizer has {tok.special_ids}"
        )
    return tok.vocab_size


def _ids_in_vocab(where: str, scan, vocab: int | None, problems: list[str]) -> None:
    if vocab is not None and scan.first_out_of_vocab is not None:
        problems.append(
            f"{where}: token id {scan.max_id:,} >= vocab_size {vocab:,} "
            f"(first bad id at token {scan.first_out_of_vocab:,})"
        )


def _hash_matches(where: str, got: str | None, want: str | None, problems: list[str]) -> None:
    if got is not None and got != want:
        problems.append(
            f"{where}: sha256 {_short(got)}... does not match meta.json's {_short(want)}... (changed after the build)"
        )


def _even_size(path: Path, where: str, problems: list[str]) -> int | None:
    """Tokens in `path`, or None (problem recorded) if it is missing or has an odd byte size."""
    if not path.is_file():
        problems.append(f"{where}: missing; {REBUILD}")
        return None
    size = path.stat().st_size
    if size % TOKEN_DTYPE.itemsize:
        problems.append(f"{where}: {size:,} bytes is odd, not a whole number of uint16 tokens (truncated?)")
        return None
    return size // TOKEN_DTYPE.itemsize


def verify_tokenizer(art: Artifact, meta: dict, ctx: Context, c: Check) -> None:
    model = art.path / meta.get("model_file", TOKENIZER_MODEL)
    if not model.is_file():
        c.problems.append(f"{model}: missing; {REBUILD}")
        return
    sha = sha256_file(model)
    if sha != meta.get("sha256"):
        c.problems.append(f"{model.name}: sha256 {sha} does not match meta.json's {meta.get('sha256')}")
    tok = ctx.tokenizer if ctx.tokenizer is not None and Path(ctx.tokenizer_path) == model else None
    if tok is None:
        from niels_gpt.tokenizer import SentencePieceTokenizer

        try:
            tok = SentencePieceTokenizer(model)
        except ValueError as e:
            c.problems.append(str(e))
            return
    if tok.vocab_size != meta.get("vocab_size") or tok.special_ids != meta.get("special_token_ids"):
        c.problems.append(
            f"{model.name}: {tok.vocab_size:,} pieces, specials {tok.special_ids}; meta.json says "
            f"{meta.get('vocab_size')}, {meta.get('special_token_ids')}"
        )
    c.detail = f"{tok.vocab_size:,} pieces, sha256 {_short(sha)}"


def _part_to_rebuild(art: Artifact, meta: dict, shard, c: Check, first: int) -> None:
    """A manifest's damaged file is its part's: that part is what to rebuild (the merge then runs again).
    `first`: the index of the file's first problem, which gets the note."""
    if shard.part is None:
        return
    rel = next((p.get("meta") for p in meta.get("parts") or [] if p.get("index") == shard.part), None)
    if rel is None:
        return
    c.problems[first] += f" [a file of part {shard.part}: rebuild that part]"
    if art.path / rel not in c.rebuild:
        c.rebuild.append(art.path / rel)


def verify_pretrain(art: Artifact, meta: dict, ctx: Context, c: Check) -> None:
    """Every file meta.json lists (a manifest: every part's shard, re-hashed) against its record, the split
    totals and document counts as readers see the ids (a manifest's end_eot applied), no unlisted shard in a
    split folder, and no part of a manifest changed since the merge."""
    vocab = _tokenizer_matches(meta, ctx, c.problems)
    eot = meta.get("eot_id")
    totals = []
    c.problems += manifest_problems(art.path, meta)
    for split in SPLITS:
        shards = split_shards(art.path, split, meta)
        for name in unlisted_shards(art.path, split, shards):
            c.problems.append(f"{name}: on disk but not listed in meta.json (stale shard?); {REBUILD}")
        n_split, after_eot, last, n_eot, problems_before = 0, True, None, 0, len(c.problems)
        for s in shards:
            before = len(c.problems)
            n = _even_size(s.path, s.name, c.problems)
            if n is None:
                _part_to_rebuild(art, meta, s, c, before)
                continue
            if n != s.tokens:
                c.problems.append(f"{s.name}: {n:,} tokens, meta.json says {s.tokens}")
            scan = scan_tokens(
                s, hash=not ctx.quick, vocab_size=vocab, eot_id=eot, after_eot=after_eot, on_bytes=ctx.on_bytes
            )
            _hash_matches(s.name, scan.sha256, s.sha256, c.problems)
            _ids_in_vocab(s.name, scan, vocab, c.problems)
            if len(c.problems) > before:
                _part_to_rebuild(art, meta, s, c, before)
            n_split += n
            n_eot += scan.n_eot
            if scan.last_token is not None:
                last, after_eot = scan.last_token, scan.last_token == eot
        listed_total = sum(s.tokens or 0 for s in shards)
        if meta.get(f"{split}_tokens") != listed_total:
            c.problems.append(
                f"{split}: meta.json {split}_tokens={meta.get(f'{split}_tokens')} but its shards list {listed_total:,}"
            )
        if len(c.problems) == problems_before and f"{split}_documents" in meta:
            docs = n_eot + int(last is not None and last != eot)  # a budget-cut last document has no eot
            if docs != meta[f"{split}_documents"]:
                c.problems.append(
                    f"{split}: {docs:,} documents in the shards (eot ids), "
                    f"meta.json says {meta[f'{split}_documents']:,}"
                )
        totals.append(f"{split} {n_split:,} tokens in {len(shards)} shard{'s' if len(shards) != 1 else ''}")
    c.detail = ", ".join(totals) + (f" (a manifest of {meta.get('num_parts')} parts)" if is_manifest(meta) else "")


def _check_offsets(where: str, offsets, n_tok: int, n_examples, problems: list[str]) -> bool:
    if offsets.ndim != 1 or offsets.dtype != OFFSET_DTYPE:
        problems.append(f"{where}: expected a 1-D int64 array, got {offsets.dtype} with shape {offsets.shape}")
        return False
    if len(offsets) != n_examples:
        problems.append(f"{where}: {len(offsets):,} offsets, meta.json counts {n_examples} examples")
    if not len(offsets):
        if n_tok:
            problems.append(f"{where}: no offsets for {n_tok:,} tokens")
        return not n_tok
    ok = True
    if offsets[0] != 0:
        problems.append(f"{where}: first offset is {int(offsets[0]):,}, must be 0")
        ok = False
    bad = np.flatnonzero(np.diff(offsets) <= 0)
    if len(bad):
        i = int(bad[0])
        problems.append(
            f"{where}: offsets not strictly increasing ({len(bad):,} times; first at example {i + 1:,}: "
            f"{int(offsets[i]):,} then {int(offsets[i + 1]):,})"
        )
        ok = False
    if offsets[-1] >= n_tok:
        problems.append(f"{where}: last offset {int(offsets[-1]):,} is not below the {n_tok:,} tokens of the file")
        ok = False
    return ok


def _sft_split(art: Artifact, meta: dict, split: str, vocab, ctx: Context, problems: list[str]) -> str:
    (tok_path,), idx_path = art.files(split), art.offsets(split)
    tok_name, idx_name = tok_path.name, idx_path.name
    files = meta.get("files") or {}
    stats = (meta.get("splits") or {}).get(split, {})
    n_tok = _even_size(tok_path, tok_name, problems)
    if not idx_path.is_file():
        problems.append(f"{idx_name}: missing; {REBUILD}")
    if n_tok is None or not idx_path.is_file():
        return f"{split} ?"
    for want in (meta.get(f"{split}_tokens"), stats.get("num_tokens")):
        if want is not None and want != n_tok:
            problems.append(f"{tok_name}: {n_tok:,} tokens, meta.json says {want:,}")
    for name, path in ((tok_name, tok_path), (idx_name, idx_path)):
        want = files.get(name, {})
        if "bytes" in want and path.stat().st_size != want["bytes"]:
            problems.append(f"{name}: {path.stat().st_size:,} bytes, meta.json says {want['bytes']:,}")
    scan = scan_tokens(tok_path, hash=not ctx.quick, vocab_size=vocab, on_bytes=ctx.on_bytes)
    _hash_matches(tok_name, scan.sha256, files.get(tok_name, {}).get("sha256"), problems)
    _ids_in_vocab(tok_name, scan, vocab, problems)
    if not ctx.quick:
        _hash_matches(idx_name, sha256_file(idx_path), files.get(idx_name, {}).get("sha256"), problems)
    try:
        offsets = np.load(idx_path, mmap_mode="r", allow_pickle=False)
    except ValueError as e:
        problems.append(f"{idx_name}: not a readable .npy array ({e})")
        return f"{split} ?"
    if not _check_offsets(idx_name, offsets, n_tok, meta.get(f"{split}_examples"), problems) or not len(offsets):
        return f"{split} {len(offsets):,} examples"
    special = meta.get("special_token_ids") or {}
    tokens = open_tokens(tok_path)
    roles = np.array([special.get(r, -1) for r in ROLE_NAMES])
    not_role = np.flatnonzero(~np.isin(tokens[np.asarray(offsets)], roles))
    if len(not_role):
        i = int(not_role[0])
        problems.append(
            f"{tok_name}: {len(not_role):,} examples do not start with a role token (first: example {i:,}, "
            f"token {int(tokens[int(offsets[i])])} at {int(offsets[i]):,})"
        )
    elif "num_label_tokens" in stats and special:
        labels = sum(
            int(loss_mask_from_tokens(tokens[lo:hi], special, example_starts=starts).sum())
            for lo, hi, starts in example_blocks(offsets, n_tok)
        )
        if labels != stats["num_label_tokens"]:
            problems.append(
                f"{tok_name}: {labels:,} loss-active tokens, "
                f"meta.json num_label_tokens says {stats['num_label_tokens']:,}"
            )
    return f"{split} {len(offsets):,} examples / {n_tok:,} tokens"


def verify_sft(art: Artifact, meta: dict, ctx: Context, c: Check) -> None:
    vocab = _tokenizer_matches(meta, ctx, c.problems)
    c.detail = ", ".join(_sft_split(art, meta, split, vocab, ctx, c.problems) for split in SPLITS)


def verify_stream(art: Artifact, meta: dict, ctx: Context, c: Check) -> None:
    if not art.path.is_file():
        c.problems.append(f"{art.path.name}: missing; {REBUILD}")
        return
    size = art.path.stat().st_size
    if size != meta.get("n_bytes"):
        c.problems.append(f"{art.path.name}: {size:,} bytes, meta says n_bytes={meta.get('n_bytes')}")
    scan = scan_bytes(art.path, hash=not ctx.quick, on_bytes=ctx.on_bytes)
    _hash_matches(art.path.name, scan.sha256, meta.get("sha256"), c.problems)
    if scan.utf8_error:
        c.problems.append(f"{art.path.name}: {scan.utf8_error}")
    c.detail = f"{size:,} bytes"
