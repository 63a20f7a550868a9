"""`python -m scripts.sample_data`: regenerate the sample files of the chosen sources (default: all)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from niels_gpt.log import log
from scripts.sample_data.sources import SOURCES, write_source


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m scripts.sample_data", description=__doc__.splitlines()[0])
    ap.add_argument("--out-root", type=Path, default=Path("."), help="repository root to write under (default: .)")
    ap.add_argument("--seed", type=int, default=0, help="generator seed (default: 0)")
    ap.add_argument("--only", nargs="+", choices=SOURCES, default=SOURCES, help="sources to write (default: all)")
    args = ap.parse_args(argv)
    for name in args.only:
        t0 = time.perf_counter()
        paths = write_source(name, args.out_root, args.seed)
        size = sum(p.stat().st_size for p in paths)
        log(f"{name}: {len(paths):,} files, {size:,} bytes in {time.perf_counter() - t0:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
