"""README.md stays true: its config table is the schema's, its first two commands are the CI's."""

from __future__ import annotations

import re
from pathlib import Path

from scripts.config_table import readme_with_table

ROOT = Path(__file__).resolve().parents[2]


def test_config_table_matches_the_schema():
    text = (ROOT / "README.md").read_text()
    assert readme_with_table(text) == text, "run: python -m scripts.config_table --write"


def test_ci_runs_the_readme_test_command():
    blocks = re.findall(r"```bash\n(.*?)\n```", (ROOT / "README.md").read_text(), re.S)
    demo, test = blocks[0].strip(), blocks[1].strip()
    assert demo.endswith(".venv/bin/snakemake --config demo=true")  # the demo, into cache-demo/, no -j needed
    assert "pytest" in test and "torch==2.13.0" in test
    assert test in (ROOT / ".ci" / "run").read_text()


def test_layout_tree_lists_every_module_once():
    text = (ROOT / "README.md").read_text()
    block = text.split("## Layout", 1)[1].split("```", 2)[1]
    listed = re.findall(r"^(niels_gpt/\S+\.(?:py|yaml))\s", block, re.M)
    on_disk = sorted(
        p.relative_to(ROOT).as_posix() for p in (ROOT / "niels_gpt").rglob("*") if p.suffix in (".py", ".yaml")
    )
    assert sorted(listed) == on_disk and len(listed) == len(set(listed))
