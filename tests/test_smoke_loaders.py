"""`python -m scripts.smoke_loaders --demo`: two samples from every loader, offline (issue 3, item 8)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_demo_smoke_prints_every_loader_and_exits_zero(tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    proc = subprocess.run(
        [sys.executable, "-m", "scripts.smoke_loaders", "--demo"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    for loader in ("fineweb", "wikitext", "gutenberg", "dolly", "oasst1", "roam", "primer"):
        assert loader in proc.stdout.lower(), loader


def test_hub_smoke_offline_fails_with_the_demo_hint(tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    proc = subprocess.run(
        [sys.executable, "-m", "scripts.smoke_loaders"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode != 0
    assert "demo" in (proc.stdout + proc.stderr)
