"""`verify`, `info` and `inspect`: the read-only commands over a built cache.

    python -m niels_gpt.cache.cli verify [CACHE_DIR | ARTIFACT] [--quick] [--tokenizer spm.model]
    python -m niels_gpt.cache.cli info [CACHE_DIR | ARTIFACT] [--json]
    python -m niels_gpt.cache.cli inspect PATH [--n 3] [--seed 0] [--split train] [--example I]

The path defaults to `cache_dir` of config.yaml; the tokenizer to `{cache}/tokenizer/spm.model`.
`verify` prints one line per artifact (ok / FAIL: reason / skipped) and a summary, and exits 1 if any
artifact failed; stray `*.tmp` files are reported as warnings (a build may be running).
"""

from __future__ import annotations

import os
import sys

from niels_gpt.command_line import DEFAULT_CONFIG_FILE, add_tokenizer_arg
from niels_gpt.config import load_config, schema_defaults
from niels_gpt.log import progress

TOKENIZER_HELP = "tokenizer model the caches must match (default: {cache}/tokenizer/spm.model of PATH's cache tree)"
VERIFY_DOC = "re-hash every artifact against its meta.json and check its structure; exit 1 on any failure"
INFO_DOC = "table of every cache: tokens, documents/examples, bytes, empty documents, vocab coverage, label share"
INSPECT_DOC = "decoded samples: pretrain windows, SFT examples with the loss-active span marked, streams bytes"


def _path_arg(p, what: str) -> None:
    p.add_argument(
        "path", nargs="?", default=None, metavar="PATH", help=f"{what} (default: cache_dir of config.yaml, i.e. cache)"
    )


def _default_path(args) -> str:
    """PATH, else cache_dir of ./config.yaml (or the default, "cache")."""
    if args.path is not None:
        return args.path
    return _config_or_defaults()["cache_dir"]


def _bytes_bar(desc: str):
    return progress(desc=desc, unit="B", unit_scale=True, leave=False)


def register(sub) -> None:
    p = sub.add_parser("verify", help=VERIFY_DOC, description=VERIFY_DOC + ". " + (__doc__ or "").split("\n\n")[-1])
    _path_arg(p, "cache root, a family folder (pretrain/, sft/, streams/) or one artifact")
    p.add_argument(
        "--quick", action="store_true", help="skip sha256 hashing (sizes, ids, offsets and counts are still checked)"
    )
    add_tokenizer_arg(p, help=TOKENIZER_HELP)
    p.set_defaults(func=run_verify)

    p = sub.add_parser("info", help=INFO_DOC, description=INFO_DOC)
    _path_arg(p, "cache root, a family folder or one artifact")
    add_tokenizer_arg(p, help=TOKENIZER_HELP)
    p.add_argument("--json", action="store_true", help="print the same numbers as one JSON document")
    p.set_defaults(func=run_info)

    p = sub.add_parser("inspect", help=INSPECT_DOC, description=INSPECT_DOC)
    p.add_argument(
        "path",
        metavar="PATH",
        help="one artifact: cache/pretrain/wikitext[/val], cache/sft/primer, cache/streams/wiki_train.bin, ...",
    )
    p.add_argument("--n", type=int, default=3, help="samples to show (default: 3)")
    p.add_argument("--seed", type=int, default=0, help="seed of the torch.Generator that picks them (default: 0)")
    p.add_argument("--split", choices=("train", "val"), default=None, help="split to sample (default: train)")
    p.add_argument("--example", type=int, default=None, help="SFT: show this example index instead of random ones")
    p.add_argument("--tokens", type=int, default=128, help="pretrain window length in tokens (default: 128)")
    p.add_argument(
        "--bytes", dest="n_bytes", type=int, default=400, help="stream window length in bytes (default: 400)"
    )
    p.add_argument(
        "--color",
        choices=("auto", "always", "never"),
        default="auto",
        help="SFT: loss-active text in green instead of [[...]] (auto: when stdout is a terminal)",
    )
    add_tokenizer_arg(p, help=TOKENIZER_HELP)
    p.set_defaults(func=run_inspect)


def format_check(check, width: int, fix: str | None = None) -> list[str]:
    name = check.artifact.name.ljust(width)
    if check.status == "skipped":
        return [f"{name}  skipped ({check.detail})"]
    if check.status == "ok":
        return [f"{name}  ok" + (f"  {check.detail}" if check.detail else "")]
    lines = [f"{name if i == 0 else ' ' * width}  FAIL: {problem}" for i, problem in enumerate(check.problems)]
    return lines + ([f"{' ' * width}  fix: {fix}"] if fix and "build it: snakemake" not in lines[0] else [])


def _config_or_defaults() -> dict:
    return load_config(DEFAULT_CONFIG_FILE) if os.path.exists(DEFAULT_CONFIG_FILE) else schema_defaults()


def run_verify(args) -> int:
    from niels_gpt.inspection.verify import fix_command, verify

    path = _default_path(args)
    cfg = _config_or_defaults()
    with _bytes_bar("verify") as bar:
        selection, checks, stray = verify(
            path, tokenizer_path=args.tokenizer, quick=args.quick, on_bytes=bar.update, config=cfg
        )
    width = max((len(c.artifact.name) for c in checks), default=0)
    for c in checks:
        print("\n".join(format_check(c, width, fix_command(c, selection.root, cfg))))
    for tmp in stray:
        print(f"warn: stray temporary file {tmp} (left by a running or killed build; delete it if no build is running)")
    n = {s: sum(c.status == s for c in checks) for s in ("ok", "FAIL", "skipped")}
    hashed = "sha256 not checked (--quick)" if args.quick else "sha256 of every file checked"
    print(
        f"verify {path}: {n['ok']} ok, {n['FAIL']} failed, {n['skipped']} skipped (not built), "
        f"{len(stray)} stray .tmp file{'s' if len(stray) != 1 else ''}; {hashed}"
    )
    return 1 if n["FAIL"] else 0


def run_info(args) -> int:
    from niels_gpt.inspection.info import collect_info, info_json
    from niels_gpt.inspection.info_tables import format_info

    with _bytes_bar("info") as bar:
        rows, current, tok_path = collect_info(_default_path(args), tokenizer_path=args.tokenizer, on_bytes=bar.update)
    print((info_json if args.json else format_info)(rows, current, tok_path))
    return 0


def run_inspect(args) -> int:
    from niels_gpt.inspection.samples import inspect_cache

    color = args.color == "always" or (args.color == "auto" and sys.stdout.isatty())
    print(
        inspect_cache(
            args.path,
            n=args.n,
            seed=args.seed,
            split=args.split,
            tokenizer_path=args.tokenizer,
            tokens=args.tokens,
            n_bytes=args.n_bytes,
            example=args.example,
            color=color,
        )
    )
    return 0
