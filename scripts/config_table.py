"""Print the config reference table of README.md from niels_gpt/config_schema.yaml.

    python -m scripts.config_table            # print the table
    python -m scripts.config_table --write    # replace it in README.md between the markers

tests/docs/test_readme.py fails when README.md's table differs from the schema, so the README cannot
drift from the configuration that is really validated.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from niels_gpt.config import _resolve, load_schema

README = Path(__file__).resolve().parents[1] / "README.md"
BEGIN, END = "<!-- config-table:begin -->", "<!-- config-table:end -->"


def _rows(node: dict, schema: dict, path: str = ""):
    node = _resolve(node, schema)
    props = node.get("properties")
    for key, sub in (props or {}).items():
        sub = _resolve(sub, schema)
        dotted = f"{path}.{key}" if path else key
        if sub.get("properties"):
            yield from _rows(sub, schema, dotted)
        else:
            yield dotted, sub


def _cell(value) -> str:
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else json.dumps(value)
    return "`" + text.replace("|", "\\|") + "`"


def config_table() -> str:
    schema = load_schema()
    lines = ["| key | default | meaning |", "| --- | --- | --- |"]
    for dotted, node in _rows(schema, schema):
        desc = " ".join(str(node.get("description", "")).split()).replace("|", "\\|")
        lines.append(f"| `{dotted}` | {_cell(node.get('default'))} | {desc} |")
    return "\n".join(lines)


def readme_with_table(text: str) -> str:
    pattern = re.compile(re.escape(BEGIN) + ".*?" + re.escape(END), re.S)
    if not pattern.search(text):
        raise SystemExit(f"{README}: markers {BEGIN} / {END} not found")
    return pattern.sub(lambda _: f"{BEGIN}\n{config_table()}\n{END}", text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write", action="store_true", help="update README.md in place")
    args = parser.parse_args()
    if args.write:
        README.write_text(readme_with_table(README.read_text()))
    else:
        print(config_table())


if __name__ == "__main__":
    main()
