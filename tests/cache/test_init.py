"""niels_gpt.cache is the public face only: import-light, and nothing below it imports from it."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "niels_gpt"


def imported_modules(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def test_no_module_below_the_public_face_imports_it():
    upward = {
        str(path.relative_to(PACKAGE)): sorted(
            n for n in imported_modules(path) if n.split(".")[:2] == ["niels_gpt", "cache"]
        )
        for path in PACKAGE.rglob("*.py")
        if path.parent.name != "cache"
    }
    assert {path: names for path, names in upward.items() if names} == {}


def test_importing_the_package_loads_no_torch_and_no_datasets():
    code = "import sys, niels_gpt.cache; print(sorted({'torch', 'datasets', 'numpy'} & set(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
