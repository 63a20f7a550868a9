"""Print two samples from every loader; exit non-zero on any exception.

    python -m scripts.smoke_loaders            # the hub (network), the loaders' defaults, take=2
    python -m scripts.smoke_loaders --demo     # offline: the bundled sample data via config demo=true

--demo goes through `niels_gpt.data.registry` with the validated config (demo=true), so it reads
exactly the files `snakemake --config demo=true` reads. For oasst1 the first two threads are shown
as roles + the first 80 characters of each message.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import traceback

PREVIEW_CHARS = 80
TAKE = 2


def _one_line(text: str, n: int = PREVIEW_CHARS) -> str:
    text = text.replace("\n", "\\n")
    return text[:n] + ("..." if len(text) > n else "")


def _show_pretrain(name: str, samples) -> None:
    for s in samples:
        print(f"  [{name}] {len(s.text):,} chars meta={_short_meta(s.meta)}: {_one_line(s.text)}")


def _show_chat(name: str, samples) -> None:
    for s in samples:
        print(f"  [{name}] {len(s.messages)} messages meta={_short_meta(s.meta)}")
        for m in s.messages:
            print(f"      {m.role:>9}: {_one_line(m.content)}")


def _short_meta(meta: dict) -> dict:
    return {k: (v if not isinstance(v, list) or len(v) <= 4 else f"[{len(v)} items]") for k, v in meta.items()}


def hub_checks() -> list[tuple[str, callable]]:
    """Every hub loader with its defaults, take=2 (network)."""
    from niels_gpt.data.dolly import iter_dolly_sft
    from niels_gpt.data.fineweb_edu import iter_fineweb_edu
    from niels_gpt.data.gutenberg import iter_gutenberg
    from niels_gpt.data.oasst1 import iter_oasst1_sft
    from niels_gpt.data.wikitext import iter_wikitext

    return [
        ("fineweb_edu", lambda: _show_pretrain("fineweb_edu", iter_fineweb_edu(name="CC-MAIN-2024-10", take=TAKE))),
        ("wikitext", lambda: _show_pretrain("wikitext", iter_wikitext(take=TAKE))),
        ("gutenberg", lambda: _show_pretrain("gutenberg", iter_gutenberg(take=TAKE))),
        ("dolly15k", lambda: _show_chat("dolly15k", iter_dolly_sft(take=TAKE))),
        ("oasst1", lambda: _show_chat("oasst1", itertools.islice(iter_oasst1_sft(take_trees=TAKE), TAKE))),
    ]


def demo_checks(config_file: str | None) -> list[tuple[str, callable]]:
    """Every source of the registry on the bundled sample data (demo=true), two samples each."""
    from niels_gpt.config import load_config, prepare_config
    from niels_gpt.data import registry
    from niels_gpt.data.primer import load_primer_text, split_primer_dialogues

    cfg = load_config(config_file, {"demo": True}) if config_file else prepare_config({"demo": True})

    def pretrain(source: str):
        inp = registry.pretrain_input(cfg, source)
        for split, samples in (("stream", inp.stream), ("train", inp.train), ("val", inp.val)):
            if samples is not None:
                print(f"  {split}:")
                _show_pretrain(source, itertools.islice(samples, TAKE))

    def sft(source: str):
        samples, _ = registry.sft_input(cfg, source)
        _show_chat(source, itertools.islice(samples, TAKE))

    def primer_text():
        p = cfg["sources"]["primer"]
        text = load_primer_text(p["text"])
        train, val = split_primer_dialogues(text, p["val_frac"], cfg["seed"], p["delimiter"])
        print(f"  [primer_text] {len(text):,} chars, train {len(train):,} / val {len(val):,}: {_one_line(text)}")

    def wikitext_lines():
        lines = registry.wikitext_lines(cfg)
        print("  " + ", ".join(f"{k}: {len(v):,} lines" for k, v in lines.items()))
        for line in lines["train"][:TAKE]:
            print(f"  [wikitext line] {_one_line(line)}")

    checks = [(s, lambda s=s: pretrain(s)) for s in registry.PRETRAIN_SOURCES]
    checks.append(("wikitext_lines", wikitext_lines))
    checks += [(s, lambda s=s: sft(s)) for s in registry.SFT_SOURCES]
    checks.append(("primer_text", primer_text))
    return checks


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m scripts.smoke_loaders", description=__doc__.splitlines()[0])
    p.add_argument("--demo", action="store_true", help="read the bundled sample data offline (default: the hub)")
    p.add_argument(
        "--config-file", default=None, help="config.yaml to start from with --demo (default: schema defaults)"
    )
    args = p.parse_args(argv)
    checks = demo_checks(args.config_file) if args.demo else hub_checks()
    failed = []
    for name, run in checks:
        print(f"== {name}", flush=True)
        try:
            run()
        except (OSError, ValueError) as e:  # bad input or no network: the message says what to do
            print(f"  error: {type(e).__name__}: {e}", file=sys.stderr)
            failed.append(name)
        except Exception:
            traceback.print_exc()
            failed.append(name)
    print(
        f"{len(checks) - len(failed)}/{len(checks)} loaders ok" + (f"; failed: {', '.join(failed)}" if failed else "")
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
