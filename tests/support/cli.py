"""Running `python -m niels_gpt.cache.cli` commands in a test, and reading what they print."""

from __future__ import annotations

import re

from niels_gpt.cache.cli import main
from niels_gpt.command_line import run_cli


def cache_cli(capsys, *args) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of one command."""
    rc = run_cli(main, [*map(str, args)])
    out = capsys.readouterr()
    return rc, out.out, out.err


def verify_cli(capsys, *args) -> tuple[int, str]:
    """(exit code, stdout + stderr) of `verify ARGS`."""
    rc, out, err = cache_cli(capsys, "verify", *args)
    return rc, out + err


def line_of(out: str, name: str) -> str:
    """verify's line of one artifact."""
    return next(line for line in out.splitlines() if line.startswith(name + " "))


def problems_of(out: str, name: str) -> str:
    """The lines of one artifact in verify's output: its own line and the problem lines under it."""
    lines = out.splitlines()
    start = lines.index(line_of(out, name))
    rest = lines[start + 1 :]
    more = next((i for i, line in enumerate(rest) if not line.startswith(" ")), len(rest))
    return "\n".join(lines[start : start + 1 + more])


def row(out: str, *starts: str) -> list[str]:
    """The cells of the first table row beginning with `starts` (cells are separated by 2+ spaces)."""
    for line in out.splitlines():
        cells = re.split(r"\s{2,}", line.strip())
        if cells[: len(starts)] == list(starts):
            return cells
    raise AssertionError(f"no row {starts} in:\n{out}")


def section(out: str, title: str) -> str:
    """The part of `info`'s output after the table title `title`."""
    return out.split(f"\n{title}\n", 1)[1]
