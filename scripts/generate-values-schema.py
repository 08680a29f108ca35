#!/usr/bin/env python3
"""Writes the `config` part of helm/apns-worker/values.schema.json from schemas/worker-config.schema.json, so
that `helm install` refuses a worker.yaml the worker would refuse (a typo such as kafka.gruop, a bare number
as a duration) instead of the pods crash-looping. Helm's schema loader cannot follow the worker schema's
relative $refs (it resolves them against file:/// of the current directory, and a packaged chart holds no
files outside itself), so the definitions they point to are copied into the values schema's $defs as
"config.<name>" and "common.<name>".

    scripts/generate-values-schema.py           # rewrite values.schema.json
    scripts/generate-values-schema.py --check   # exit 1 if it is stale (Tests/System/test_chart.py runs this)

Everything else in values.schema.json is written by hand and kept as it is (reformatted the same way)."""

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORKER_SCHEMA = ROOT / "schemas" / "worker-config.schema.json"
COMMON_SCHEMA = ROOT / "schemas" / "defs" / "common.json"
VALUES_SCHEMA = ROOT / "helm" / "apns-worker" / "values.schema.json"
GENERATED_PREFIXES = ("config.", "common.")
# The keys the chart writes into worker.yaml itself; the workload template refuses them with its own message.
CHART_OWNED = {"rules": "rules", "metrics": "metrics.port", "shutdown": "drainTimeoutSeconds"}
WIDTH = 120


def re2_pattern(pattern):
    """Helm checks patterns with Go's regexp (RE2), which has no \\uXXXX escape: \\u0000 becomes \\x00, which
    ECMA-262, Python and RE2 all read the same way."""
    def replace(match):
        code = int(match.group(1), 16)
        if code > 0xFF:
            raise SystemExit(f"{WORKER_SCHEMA}: pattern {pattern!r}: \\u{match.group(1)} has no RE2 spelling here")
        return f"\\x{code:02x}"
    return re.sub(r"\\u([0-9a-fA-F]{4})", replace, pattern)


def re2_patterns(node):
    if isinstance(node, dict):
        return {key: re2_pattern(value) if key == "pattern" and isinstance(value, str) else re2_patterns(value)
                for key, value in node.items()}
    if isinstance(node, list):
        return [re2_patterns(item) for item in node]
    return node


def rewrite_refs(node, common, used):
    """Points every $ref at the values schema's own $defs, noting the common definitions used."""
    if isinstance(node, dict):
        result = {}
        for key, value in node.items():
            if key == "$ref":
                if value.startswith("defs/common.json#/$defs/"):
                    name = value.rsplit("/", 1)[1]
                    if name not in common:
                        raise SystemExit(f"{WORKER_SCHEMA}: $ref {value} names no definition of {COMMON_SCHEMA}")
                    used.add(name)
                    value = f"#/$defs/common.{name}"
                elif value.startswith("#/$defs/"):
                    value = "#/$defs/config." + value[len("#/$defs/"):]
                else:
                    raise SystemExit(f"{WORKER_SCHEMA}: cannot copy the $ref {value} (only #/$defs/... and "
                                     "defs/common.json#/$defs/... are understood)")
            result[key] = rewrite_refs(value, common, used)
        return result
    if isinstance(node, list):
        return [rewrite_refs(item, common, used) for item in node]
    return node


def generated_parts():
    worker = json.loads(WORKER_SCHEMA.read_text())
    common = json.loads(COMMON_SCHEMA.read_text())["$defs"]
    used = set()
    config = {key: value for key, value in worker.items() if key not in ("$schema", "$id", "title", "$defs")}
    config["description"] = ("worker.yaml, checked exactly as schemas/worker-config.schema.json checks it (this part "
                             "is generated from that schema by scripts/generate-values-schema.py: edit the schema, "
                             "then run the script). " + worker.get("description", ""))
    config = rewrite_refs(config, common, used)
    for key, value in CHART_OWNED.items():
        config["properties"][key] = dict(config["properties"][key])
        config["properties"][key]["description"] = (f"Set by the chart from {value}; leave config.{key} out "
                                                    "(the chart refuses it).")
    defs = {f"config.{name}": rewrite_refs(value, common, used) for name, value in worker.get("$defs", {}).items()}
    # Common definitions may refer to one another (#/$defs/x inside common.json): copy those too.
    pending, done = sorted(used), set()
    while pending:
        name = pending.pop()
        if name in done:
            continue
        done.add(name)
        text = json.dumps(common[name]).replace('"#/$defs/', '"#/$defs/common.')
        defs[f"common.{name}"] = json.loads(text)
        pending.extend(other for other in common if f'"#/$defs/common.{other}"' in text and other not in done)
    return re2_patterns(config), re2_patterns(dict(sorted(defs.items())))


def compact(value, indent=0, lead=0):
    """JSON with every object or array that fits in WIDTH columns on one line, the rest one member a line.
    `lead`: the characters before the value on its first line (its key)."""
    one_line = json.dumps(value, ensure_ascii=False)
    if indent + lead + len(one_line) + 1 <= WIDTH or not isinstance(value, (dict, list)) or not value:
        return one_line
    pad = " " * (indent + 2)
    if isinstance(value, dict):
        members = []
        for key, item in value.items():
            name = json.dumps(key, ensure_ascii=False) + ": "
            members.append(pad + name + compact(item, indent + 2, len(name)))
        return "{\n" + ",\n".join(members) + "\n" + " " * indent + "}"
    items = [pad + compact(item, indent + 2) for item in value]
    return "[\n" + ",\n".join(items) + "\n" + " " * indent + "]"


def values_schema_text():
    values = json.loads(VALUES_SCHEMA.read_text())
    config, defs = generated_parts()
    values["properties"]["config"] = config
    kept = {name: value for name, value in values.get("$defs", {}).items() if not name.startswith(GENERATED_PREFIXES)}
    values["$defs"] = dict(sorted({**kept, **defs}.items()))
    return compact(values) + "\n"


def main(arguments):
    text = values_schema_text()
    if arguments == ["--check"]:
        if VALUES_SCHEMA.read_text() != text:
            print(f"{VALUES_SCHEMA.relative_to(ROOT)} is stale: its config part no longer matches "
                  f"{WORKER_SCHEMA.relative_to(ROOT)}; run scripts/generate-values-schema.py", file=sys.stderr)
            return 1
        return 0
    if arguments:
        print(__doc__, file=sys.stderr)
        return 2
    VALUES_SCHEMA.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
