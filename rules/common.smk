# What every rules/*.smk shares: the validated config, CACHE, the tokenizer model most jobs read, the
# params builders (each rule names the config keys it depends on) and the input functions of jobs that
# read source files. The .smk files hold rules and data only; their functions are these (snakemake --lint).
# Runs at parse time on every invocation (including -n): keep it cheap - no hub calls, no torch.

import json
import os
import shlex
import sys

from niels_gpt import keep, layout, run_summary
from niels_gpt.config import ConfigError, prepare_config, replace_mixtures
from niels_gpt.data.registry import STREAMED_SOURCES


# A mixture given with --config replaces the one in config.yaml (Snakemake would merge them key by key).
replace_mixtures(config, workflow.config_settings.config)

try:
    _validated = prepare_config(dict(config), source="config.yaml and --config")
except ConfigError as err:
    sys.exit(str(err))
config.clear()
config.update(_validated)

CACHE = config["cache_dir"]


# A demo command naming cache/all (or a real build command naming cache-demo/) stops with one line saying why.
# Snakemake knows the targets only after reading this file, so the command line itself is looked at.
_wrong_folder = layout.other_build_problem(CACHE, config["demo"], sys.argv[1:])
if _wrong_folder:
    sys.exit(_wrong_folder)
TOKENIZER_MODEL = layout.tokenizer_model(CACHE)


def spec_json(values):
    """One canonical JSON string per job: changing any value in it re-runs exactly that job."""
    return json.dumps(values, sort_keys=True, separators=(",", ":"))


# The hub section (retries, timeouts, checkpoints) reaches every job that reads the hub on its command line,
# not through params: it never changes what is built, so changing it re-runs no job.
HUB_SETTINGS = shlex.join(["--set", f"hub={spec_json(config['hub'])}"])


def config_values(*keys):
    """{key: value} of the named config keys: top-level ("seed"), a section ("tokenizer"), or dotted
    ("sft.t_max", nested as {"sft": {"t_max": ...}})."""
    values = {}
    for key in keys:
        section, _, name = key.partition(".")
        if name:
            values.setdefault(section, {})[name] = config[section][name]
        else:
            values[section] = config[section]
    return values


def config_spec(*keys):
    """params.spec of a job that depends on these config keys only."""
    return spec_json(config_values(*keys))


def source_spec(*keys, config_source=None):
    """params.spec of a per-source job: the named keys plus its source's section of config["sources"].
    `config_source` maps the {source} wildcard to its config name where they differ (stream wiki ->
    wikitext)."""

    def spec(wildcards):
        name = config_source[wildcards.source] if config_source else wildcards.source
        return spec_json({**config_values(*keys), "sources": {name: config["sources"][name]}})

    return spec


def wildcard_index(wildcard, values):
    """A params function: the position of the job's `wildcard` value in `values` (part_007 -> 7)."""

    def index(wildcards):
        return values.index(wildcards[wildcard])

    return index


# Snakemake reads `{name}` in an input path as a wildcard and has no escape for it there, so a file whose
# name holds a brace (a note called "{draft}.md") cannot be an input. Such files are tracked through a
# param instead: their path, size and mtime, so editing one re-runs exactly the jobs that read it.
def _nameable(path):
    return "{" not in path and "}" not in path


def source_inputs(input_files):
    """An input function: the files `input_files(config, source)` lists that Snakemake can name."""

    def inputs(wildcards):
        return [p for p in input_files(config, wildcards.source) if _nameable(p)]

    return inputs


def source_unnameable(input_files):
    """A params function: {path: [size, mtime_ns]} of the files source_inputs leaves out."""

    def unnameable(wildcards):
        paths = input_files(config, wildcards.source)
        return {p: [st.st_size, st.st_mtime_ns] for p in paths if not _nameable(p) for st in [os.stat(p)]}

    return unnameable


# Job priorities (Snakemake runs the ready job of highest priority first). Curation puts one chain on the
# critical path: tokenizer -> every raw build -> curate -> the apply jobs -> the certificate (which also
# writes the token part of the leakage audit). Its jobs go first; the byte streams and their part of the
# audit (not curated), and the figures, fill the free core (priority 0). Among the builds the streamed
# sources (fineweb-edu: the longest) start first.
CHAIN_PRIORITY = 20


def build_priority(wildcards):
    """The raw builds: on the chain; a streamed source (the longest build) first."""
    return CHAIN_PRIORITY + (5 if wildcards.source in STREAMED_SOURCES else 0)
