"""README's "Train with PyTorch and Hugging Face" stays true: its four snippets (a DataLoader with workers,
a StatefulDataLoader saved and resumed, a Hugging Face model, the Hugging Face Trainer) run as written against
the demo caches, and it says what labels and shift_labels hold."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SECTION = "## Train with PyTorch and Hugging Face"


def section() -> str:
    text = (ROOT / "README.md").read_text()
    return text.split(SECTION, 1)[1].split("\n## ", 1)[0]


def snippets() -> list[str]:
    return re.findall(r"```python\n(.*?)\n```", section(), re.S)


def test_the_section_says_what_labels_and_shift_labels_hold():
    text = section()
    assert len(snippets()) == 4
    for words in ("**unshifted**", "**already shifted**", "labels[:, 1:] == shift_labels[:, :-1]", "-100"):
        assert words in text, words


@pytest.mark.parametrize(
    "which",
    [0, 1, 2, 3],
    ids=["DataLoader with workers", "StatefulDataLoader resume", "Hugging Face", "Hugging Face Trainer"],
)
def test_snippet_runs_as_written_against_the_demo_caches(which, demo_cache, tmp_path):
    pytest.importorskip({1: "torchdata", 2: "transformers", 3: "accelerate"}.get(which, "torch"))
    (tmp_path / "cache").symlink_to(demo_cache, target_is_directory=True)
    old, namespace = os.getcwd(), {"__name__": "__readme__"}
    os.chdir(tmp_path)  # the snippets read ./cache
    try:
        exec(compile(snippets()[which], f"README.md snippet {which + 1}", "exec"), namespace)
    finally:
        os.chdir(old)
        # a function defined in the snippet refers to the namespace: clearing it frees the loaders now, in
        # order (freed later by the cycle collector, stopping their 4 worker processes took about 20 s)
        namespace.clear()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache"]  # nothing left where the snippet was run
