"""Mutation testing of the pipeline's core with mutmut, one group of modules at a time (not in CI: slow).

    pip install mutmut==3.8.1
    python -m scripts.mutation config                 # or: registry, chat_template, sft, pretrain
    python -m scripts.mutation sft --max-children 2   # worker processes (default 2)
    mutmut show <mutant name>                         # the diff of one survivor

mutmut reads its settings from setup.cfg only, so this writes the group's `[mutmut]` section there for
the run and removes it afterwards (an existing setup.cfg is refused, not overwritten). Each group
mutates its modules and runs only the test files listed beside them; mutmut then runs, for every
mutant, just the tests of those files that call the mutated function. Results stay in mutants/
(gitignored); a rerun of the same group only tests mutants whose code changed.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SETUP_CFG = ROOT / "setup.cfg"

# group -> (modules to mutate, the test files that cover them)
GROUPS = {
    "config": (["niels_gpt/config.py"], ["tests/common/test_config.py", "tests/common/test_command_line.py"]),
    "registry": (
        ["niels_gpt/data/registry.py"],
        [
            "tests/data/test_registry.py",
            "tests/sft/test_job.py",
            "tests/pretrain/test_job.py",
            "tests/test_streams.py",
            "tests/pretrain/test_parts.py",
        ],
    ),
    "chat_template": (
        ["niels_gpt/chat_template.py"],
        ["tests/common/test_chat_template.py", "tests/test_sft_masking.py", "tests/test_primer_sft.py"],
    ),
    "sft": (
        ["niels_gpt/sft/writer.py", "niels_gpt/sft/windows.py"],
        [
            "tests/sft/test_windows.py",
            "tests/sft/test_writer.py",
            "tests/test_sft_cache_roundtrip.py",
            "tests/sft/test_dataset.py",
            "tests/sft/test_job.py",
        ],
    ),
    "pretrain": (
        ["niels_gpt/pretrain/writer.py", "niels_gpt/pretrain/shards.py"],
        [
            "tests/pretrain/test_writer.py",
            "tests/pretrain/test_shards.py",
            "tests/test_cache_determinism.py",
            "tests/pretrain/test_job.py",
        ],
    ),
}
# Files the tests read beside the package and tests/ (mutmut runs them in a copy under mutants/)
ALSO_COPY = ["config.yaml", "README.md", "data"]


def setup_cfg(group: str) -> str:
    modules, tests = GROUPS[group]

    def lines(values: list[str]) -> str:
        return "".join(f"\n    {v}" for v in values)

    return (
        "[mutmut]\n"
        "source_paths = niels_gpt\n"
        f"only_mutate ={lines(modules)}\n"
        f"pytest_add_cli_args_test_selection ={lines(tests)}\n"
        "pytest_add_cli_args =\n    -p\n    no:randomly\n    -q\n"
        f"also_copy ={lines(ALSO_COPY)}\n"
        "process_isolation = forkserver\n"  # torch is not fork-safe once imported
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m scripts.mutation", description=__doc__.splitlines()[0])
    p.add_argument("group", choices=sorted(GROUPS))
    p.add_argument("--max-children", type=int, default=2, help="mutmut worker processes (default: 2)")
    args = p.parse_args(argv)
    if SETUP_CFG.exists():
        sys.exit(f"{SETUP_CFG} exists: move it away first (mutmut would read the settings from it)")
    SETUP_CFG.write_text(setup_cfg(args.group))
    try:
        mutmut = [sys.executable, "-m", "mutmut"]
        subprocess.run([*mutmut, "run", "--max-children", str(args.max_children)], cwd=ROOT, check=False)
        return subprocess.run([*mutmut, "results"], cwd=ROOT, check=False).returncode
    finally:
        SETUP_CFG.unlink()


if __name__ == "__main__":
    sys.exit(main())
