"""One job of a `bench_full_build` run, alone, as of now and as of `--before`: its peak memory, split into
what it holds (anonymous pages: Python objects, buffers) and the files it has mapped (file-backed pages:
the `datasets` Arrow cache, shards, libraries), and whether both versions wrote the same files.

The job's command is taken from the run's Snakemake log (`Shell command:` of the rule that logs to
`cache/logs/{job}.log`), its output folder replaced by a scratch one; it runs in the run's work folder
against a loopback hub over the same data, with the run's HF_HOME (already filled by the run, so no
version pays the download) and tokenizer. Versions alternate over `--rounds`; a sampler reads
/proc/<pid>/status of the job's process tree every 0.1 s (VmRSS, RssAnon, RssFile, summed over the tree).
Reported per version: wall s, peak RSS, peak anonymous, peak file-backed (MiB), and the sha256 of every
file written (compared between versions and rounds).

    python -m benchmarks.bench_full_build --scale 0.25 ...   # first: the run whose jobs are re-run
    python -m benchmarks.bench_job_memory --scale 0.25 --job streams/wiki --before 3ea7e58 [--rounds 2]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
from pathlib import Path

from benchmarks.bench_full_build import REPO, STATUS_FIELDS, run_sampled, source_at
from tests.support.hub import HubServer, hub_env

SAMPLE_S = 0.1  # the streams jobs' peaks last seconds; 0.1 s costs ~1 % of a core


def job_command(work: Path, job: str) -> str:
    """The shell command of `job` (e.g. "streams/wiki") as the run's Snakemake printed it, without its log
    redirect, with `{out}` for its output folder."""
    log = f"cache/logs/{job}.log"
    for line in (work / "snakemake.log").read_text().splitlines():
        if line.startswith("Shell command:") and f"> {log} " in line:
            cmd = line.split(":", 1)[1].split(f" > {log}")[0].strip()
            return re.sub(r"--out-dir \$\(dirname [^)]*\)", "--out-dir {out}", cmd)
    raise SystemExit(f"no command logging to {log} in {work / 'snakemake.log'}: run bench_full_build first")


def file_hashes(out: Path) -> dict[str, str]:
    return {
        p.relative_to(out).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(out.rglob("*"))
        if p.is_file() and not p.name.endswith(".json")  # meta.json records times and the code's paths
    }


def run_once(cmd: str, work: Path, out: Path, env: dict) -> dict:
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    wall, sampler = run_sampled(cmd.replace("{out}", str(out)), work, env, out.with_suffix(".log"), SAMPLE_S)
    return {"s": wall, **sampler.peak, "files": file_hashes(out)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=float, default=1.0, help="the bench_full_build run to re-run a job of")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "out" / "full_build", help="its --out")
    ap.add_argument("--job", action="append", required=True, help="e.g. streams/wiki, tokenizer; repeatable")
    ap.add_argument("--before", default=None, help="also run the job as of this git revision, interleaved")
    ap.add_argument("--after", default=None, help="run 'now' as of this git revision (default: the working tree)")
    ap.add_argument("--rounds", type=int, default=2, help="rounds of each version")
    args = ap.parse_args()
    work, root = args.out / f"run-{args.scale:g}", args.out / f"hub-{args.scale:g}"
    versions: dict[str, Path | None] = {"now": source_at(args.after, args.out) if args.after else None}
    if args.before:
        versions[f"before ({args.before})"] = source_at(args.before, args.out)
    with HubServer(root / "repos") as hub:
        base = hub_env(hub, work / "hf_home")
        for job in args.job:
            cmd = job_command(work, job)
            runs: dict[str, list[dict]] = {label: [] for label in versions}
            print(f"\n{job} at scale {args.scale:g}, {args.rounds} interleaved rounds; load {os.getloadavg()[0]:.1f}")
            for _ in range(args.rounds):
                for label, source in versions.items():
                    path = os.pathsep.join(str(p) for p in (source or REPO, base.get("PYTHONPATH")) if p)
                    slug = re.sub(r"\W+", "_", f"{job}_{label}").strip("_")
                    runs[label].append(run_once(cmd, work, work / "job_memory" / slug, {**base, "PYTHONPATH": path}))
            for label, done in runs.items():
                peak = {k: max(d[k] for d in done) / 2**20 for k in STATUS_FIELDS}
                walls = ", ".join(f"{d['s']:.1f}" for d in done)
                print(
                    f"  {label:22s} wall {walls} s; peak RSS {peak['VmRSS']:,.0f} MiB = anonymous "
                    f"{peak['RssAnon']:,.0f} + file-backed {peak['RssFile']:,.0f} (peaks of each, summed over the tree)"
                )
            files = [d["files"] for done in runs.values() for d in done]
            same = all(f == files[0] for f in files)
            print(f"  files written ({len(files[0])}, meta.json left out), the same in every version and round: {same}")
            for name, digest in files[0].items():
                print(f"    {name} {digest}")


if __name__ == "__main__":
    main()
