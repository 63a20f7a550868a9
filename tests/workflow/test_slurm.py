"""The demo DAG on a real SLURM cluster through profiles/slurm (opt-in: `.venv/bin/pytest -m slurm`).

The cluster test needs a SLURM controller that answers `sinfo` (`scripts/slurm_local.sh start` stands up
a one-node one) and snakemake-executor-plugin-slurm (`pip install -e '.[slurm]'`); it is skipped with the
reason otherwise, and never part of the default test command (pyproject deselects the marker). The
cluster is treated as one without accounting (--slurm-status-command squeue, what the profile's comments
prescribe), and the CPU-heavy rules get at most the CPUs of the cluster's smallest node. The work folders
are created inside the repository, which the nodes see (/tmp may be node-local), and removed afterwards.
The README's command itself, `pytest -m slurm` through the pytest entry point, is checked by default.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.workflow.test_workflow import ROOT, artifact_hashes, make_workdir

DEMO_WITH_PARTS = ["--config", "demo=true", "pretrain={num_parts: 2}"]
# squeue instead of sacct for job states (no accounting). No account flag: the plugin tries to guess one
# with sacct, fails (two warnings) and submits without, which is what --slurm-no-account would ask for (the
# plugin has ignored that flag since 1.2)
NO_ACCOUNTING = ["--slurm-status-command", "squeue"]
THREADED_RULES = ("pretrain", "pretrain_part", "sft")  # the profile's set-threads
CLUSTER_TEST = "test_demo_dag_with_two_parts_goes_through_sbatch_and_matches_a_local_build"


@pytest.fixture(scope="module")
def node_cpus() -> int:
    """CPUs of the cluster's smallest node; skips when there is no cluster to submit to."""
    if shutil.which("sinfo") is None:
        pytest.skip("no SLURM client (sinfo) on PATH; `scripts/slurm_local.sh start` sets up a one-node cluster")
    if importlib.util.find_spec("snakemake_executor_plugin_slurm") is None:
        pytest.skip("snakemake-executor-plugin-slurm is not installed: pip install -e '.[slurm]'")
    proc = subprocess.run(["sinfo", "-h", "-o", "%c"], capture_output=True, text=True, timeout=60)
    if proc.returncode != 0 or not proc.stdout.split():
        pytest.skip(f"no SLURM controller answers sinfo ({proc.stderr.strip() or 'no nodes'})")
    return min(int(c) for c in proc.stdout.split())


def run_snakemake(workdir: Path, *args: str) -> str:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_HOME": str(workdir / ".hf")}
    cmd = [sys.executable, "-m", "snakemake", *args]
    proc = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, env=env, timeout=3600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"{' '.join(cmd)} failed ({proc.returncode}):\n{out[-6000:]}"
    return out


def job_stats(out: str) -> dict[str, int]:
    table = out.split("Job stats:")[1].split("\n\n")[0]
    return {m[1]: int(m[2]) for m in re.finditer(r"^(\w+)\s+(\d+)\s*$", table, re.M) if m[1] != "total"}


def slurm_job(job_id: str) -> dict[str, str]:
    """`scontrol show job` as key -> value (finished jobs stay visible for slurm.conf's MinJobAge)."""
    out = subprocess.run(["scontrol", "show", "job", job_id], capture_output=True, text=True, check=True).stdout
    return dict(re.findall(r"(\w+)=(\S+)", out))


def test_pytest_m_slurm_as_the_readme_writes_it_collects_the_cluster_test():
    entry_point = Path(sys.executable).parent / "pytest"  # the venv's `pytest`, not `python -m pytest`
    if not entry_point.exists():
        pytest.skip(f"no pytest entry point beside {sys.executable}")
    proc = subprocess.run(
        [str(entry_point), "-m", "slurm", "--collect-only", "-q"], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    collected = [line for line in proc.stdout.splitlines() if "::" in line]
    assert collected == [f"tests/workflow/test_slurm.py::{CLUSTER_TEST}"]


@pytest.mark.slurm
def test_demo_dag_with_two_parts_goes_through_sbatch_and_matches_a_local_build(node_cpus):
    work = Path(tempfile.mkdtemp(prefix=".slurm-test-", dir=ROOT))
    try:
        local, cluster = make_workdir(work / "local"), make_workdir(work / "cluster")
        run_snakemake(local, "cache-demo/all", "-j2", *DEMO_WITH_PARTS)
        threads = [f"{rule}={min(node_cpus, 8)}" for rule in THREADED_RULES]
        out = run_snakemake(
            cluster,
            "cache-demo/all",
            "--profile",
            "profiles/slurm",
            "--quiet",
            "host",  # each job's block too (profiles/default hides them): the local rule is named there
            *NO_ACCOUNTING,
            "--slurm-init-seconds-before-status-checks",
            "5",
            "--set-threads",
            *threads,
            *DEMO_WITH_PARTS,
        )
        stats = job_stats(out)
        assert stats["pretrain_part"] == 2 and stats["pretrain_merge"] == 1, stats
        submitted = re.findall(r"Job (\d+) has been submitted with SLURM jobid (\d+)", out)
        assert len(submitted) == sum(stats.values()) - stats["all"], (stats, submitted)  # all: the one local rule
        assert len({job for job, _ in submitted}) == len(submitted)
        for _, slurm_id in submitted:
            job = slurm_job(slurm_id)
            assert (job["JobState"], job["ExitCode"]) == ("COMPLETED", "0:0"), (slurm_id, job)
        assert re.search(r"localrule all:", out)
        hashes = artifact_hashes(cluster / "cache-demo")
        assert hashes == artifact_hashes(local / "cache-demo")  # the parts and the manifests byte for byte
        fineweb = sorted(k for k in hashes if k.startswith("pretrain/fineweb_edu/"))
        assert (
            "pretrain/fineweb_edu/meta.json" in fineweb and "pretrain/fineweb_edu/parts/part_001/meta.json" in fineweb
        )
        assert all(k == "pretrain/fineweb_edu/meta.json" or "/parts/" in k for k in fineweb), fineweb
    finally:
        shutil.rmtree(work, ignore_errors=True)
