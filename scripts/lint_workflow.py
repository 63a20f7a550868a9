"""`snakemake --lint`, with the two findings this workflow keeps on purpose filtered out; exit 1 on any other.

Kept on purpose, both "Shell command directly uses variable X from outside of the rule":
- `sys`: every rule runs `{sys.executable} -m niels_gpt...` so jobs use the interpreter that runs
  Snakemake (a bare `python` resolves through PATH and breaks when the venv is not activated). Passing
  the interpreter through `params` instead would make every cache rebuild whenever the venv's path changes.
- `HUB_SETTINGS` (rules/common.smk): the `hub` config section (retries, timeouts, checkpoints) reaches
  the jobs that read the hub on their command line. It never changes what is built; through `params` a
  changed retry count would rebuild every cache.

    python -m scripts.lint_workflow
"""

from __future__ import annotations

import re
import subprocess
import sys

INTENTIONAL = tuple(
    f"Shell command directly uses variable {name} from outside of the rule" for name in ("sys", "HUB_SETTINGS")
)


def findings(text: str) -> list[tuple[str, str]]:
    """(where, title) of every lint: `Lints for <where>:` followed by `    * <title>:` lines."""
    out, where = [], None
    for line in text.splitlines():
        if m := re.match(r"Lints for (.+):$", line):
            where = m.group(1)
        elif m := re.match(r"    \* (.+?):?$", line):
            out.append((where or "?", m.group(1)))
    return out


def main() -> int:
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "--lint", "--config", "demo=true"], capture_output=True, text=True
    )
    text = proc.stdout + proc.stderr
    found = findings(text)
    if proc.returncode not in (0, 1) or (proc.returncode == 1 and not found):
        print(text, file=sys.stderr)
        print("snakemake --lint failed to run", file=sys.stderr)
        return 1
    unexpected = [(where, title) for where, title in found if title not in INTENTIONAL]
    for where, title in unexpected:
        print(f"lint: {where}: {title}")
    kept = len(found) - len(unexpected)
    print(f"snakemake --lint: {len(unexpected)} finding(s), {kept} intentional (sys, HUB_SETTINGS) filtered")
    return 1 if unexpected else 0


if __name__ == "__main__":
    sys.exit(main())
