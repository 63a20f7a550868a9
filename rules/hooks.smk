# The run's hooks: what happens at its start and end, whatever the targets (rules/common.smk holds CACHE).
# A failed rebuild never costs the good cache it was replacing (niels_gpt/keep.py): the outputs of the
# jobs about to run are hard-linked aside at the start and put back, with Snakemake's record of them, for
# every job that does not finish. The run ends with one line per job, or the failed job's error line last.
RUN = {}


onstart:
    RUN["records"] = keep.Records.of(workflow)
    RUN["groups"] = keep.jobs_to_run(workflow)
    RUN["kept"], recovered = keep.snapshot(RUN["groups"], CACHE, RUN["records"])
    for group in recovered:
        print(f"niels_gpt: put back the previous outputs of {group.job} (an earlier run was stopped)")


onsuccess:
    if "kept" in RUN:
        keep.discard(RUN["kept"])
    print(run_summary.success_message(RUN.get("groups", [])))


onerror:
    failed_jobs = run_summary.failed(RUN.get("groups", []))
    restored = keep.restore(RUN["kept"], RUN.get("records")) if "kept" in RUN else []
    records = RUN.get("records") is not None
    print(run_summary.failure_message(failed_jobs, restored, records=records), file=sys.stderr)
    raise SystemExit(1)  # after the error line, not Snakemake's closing lines
