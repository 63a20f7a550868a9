"""The Snakemake profiles are consistent with the workflow (the SLURM run itself: test_slurm.py, opt-in)."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
SLURM = ROOT / "profiles" / "slurm" / "config.yaml"


def rule_threads() -> dict[str, str]:
    """rule name -> its `threads:` value as written in rules/*.smk (rules without threads are left out)."""
    found = {}
    for smk in (ROOT / "rules").glob("*.smk"):
        for name, body in re.findall(r"^\s*rule (\w+):\n(.*?)(?=^\s*rule |\Z)", smk.read_text(), re.M | re.S):
            m = re.search(r"^\s*threads: (.+)$", body, re.M)
            if m:
                found[name] = m.group(1).strip()
    return found


def test_slurm_profile_asks_for_as_many_cpus_as_each_job_uses():
    profile = yaml.safe_load(SLURM.read_text())
    threads = profile["set-threads"]
    declared = rule_threads()
    assert set(threads) <= set(declared), f"set-threads names rules that do not exist: {set(threads) - set(declared)}"
    assert "tokenizer" not in threads, "the tokenizer's threads come from tokenizer.num_threads (part of the model)"
    resources = profile["default-resources"]
    assert "cpus_per_task" not in resources or all(resources["cpus_per_task"] >= t for t in threads.values())


def test_slurm_profile_marks_site_settings_and_the_flags_for_clusters_without_accounting():
    text = SLURM.read_text()
    resources = yaml.safe_load(text)["default-resources"]
    for key in ("slurm_partition", "slurm_account"):
        assert key not in resources, f"{key} is a site setting: leave it commented out"
        assert re.search(rf"^\s*# {key}: .*SITE SETTING", text, re.M), key
    assert "slurm-status-command: squeue" in text and "MinJobAge" in text
