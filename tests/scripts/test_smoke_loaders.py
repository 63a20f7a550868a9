"""`python -m scripts.smoke_loaders [--demo]`: two samples of every loader offline; one clear error per hub source."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


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
    assert proc.stdout.rstrip().endswith("9/9 loaders ok") and "error" not in proc.stderr
    loaders = ("fineweb_edu", "wikitext", "gutenberg", "roam", "wikitext_lines", "dolly15k", "oasst1", "primer")
    shown = re.findall(r"^== (\w+)\n(.*?)(?=^== |\Z)", proc.stdout, re.M | re.S)
    assert [name for name, _ in shown] == [*loaders, "primer_text"]
    for name, samples in shown:  # two samples each (primer_text: one summary line)
        assert samples.count("  [") >= (1 if name == "primer_text" else 2), (name, samples)


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
    assert proc.returncode == 1
    hub = ("fineweb_edu", "wikitext", "gutenberg", "dolly15k", "oasst1")
    assert proc.stdout.rstrip().endswith(f"0/5 loaders ok; failed: {', '.join(hub)}")
    errors = [line.strip() for line in proc.stderr.strip().splitlines()]
    assert len(errors) == 5 and all(
        e.startswith("error: SourceUnavailableError: cannot reach hub dataset") for e in errors
    )
    for line, dataset in zip(
        errors,
        (
            "HuggingFaceFW/fineweb-edu",
            "Salesforce/wikitext",
            "nikolina-p/gutenberg_clean_en_splits",
            "databricks/databricks-dolly-15k",
            "OpenAssistant/oasst1",
        ),
    ):
        assert f"'{dataset}'" in line and "run with `--config demo=true` (Snakemake) or `--demo` (CLI)" in line
