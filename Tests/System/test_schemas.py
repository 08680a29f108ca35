"""The JSON Schemas in schemas/: each is a valid 2020-12 schema with only relative references, each of
its examples validates (with check-jsonschema, as users will run it), and realistic mistakes fail with
a message that names them.

Other test modules validate what the worker produces with `validate_records`:

    from test_schemas import validate_records
    validate_records("push-outcome", outcomes)      # raises AssertionError listing every violation
"""

import copy
import functools
import json
import subprocess
import sys
import urllib.parse
from pathlib import Path

import pytest
import referencing
import referencing.jsonschema
import yaml
from check_jsonschema.formats.implementations import validate_rfc3339
from jsonschema import Draft202012Validator

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = ROOT / "schemas"
EXAMPLES = SCHEMAS / "examples"
CHECK_JSONSCHEMA = Path(sys.executable).parent / "check-jsonschema"

# Schema name (file stem without .schema) → what it describes.
RECORD_SCHEMAS = ["push-request", "push-outcome", "invalid-token", "dlq-headers", "worker-config", "rules"]
ALL_SCHEMA_FILES = sorted(SCHEMAS.glob("*.schema.json")) + sorted((SCHEMAS / "defs").glob("*.json"))


def _load(path: Path):
    text = path.read_text()
    return yaml.safe_load(text) if path.suffix in (".yaml", ".yml") else json.loads(text)


def _retrieve(uri: str) -> referencing.Resource:
    path = Path(urllib.parse.unquote(urllib.parse.urlparse(uri).path))
    return referencing.Resource.from_contents(json.loads(path.read_text()),
                                              default_specification=referencing.jsonschema.DRAFT202012)


def _format_checker():
    checker = copy.deepcopy(Draft202012Validator.FORMAT_CHECKER)
    checker.checks("date-time")(validate_rfc3339)
    return checker


@functools.cache
def schema_validator(schema_name: str) -> Draft202012Validator:
    """A validator for schemas/<schema_name>.schema.json that resolves its relative $refs from disk."""
    uri = (SCHEMAS / f"{schema_name}.schema.json").as_uri()
    return Draft202012Validator({"$ref": uri}, registry=referencing.Registry(retrieve=_retrieve),
                                format_checker=_format_checker())


def schema_errors(schema_name: str, instance) -> list[str]:
    """Every violation of the schema by `instance`, as 'at <json path>: <message>'."""
    errors = sorted(schema_validator(schema_name).iter_errors(instance), key=lambda e: list(e.absolute_path))
    messages = []
    for error in errors:
        # Report the innermost failures of anyOf/oneOf branches too: they name the real mistake.
        leaves = [e for e in error.context or [] if not e.context] or [error]
        for leaf in leaves:
            messages.append(f"at {leaf.json_path}: {leaf.message}")
    return messages


def validate_records(schema_name: str, records) -> None:
    """Asserts that every record (a dict, or JSON text/bytes) satisfies schemas/<schema_name>.schema.json.

    For the integration tests: `validate_records("push-outcome", consumed_outcomes)`. The assertion
    message lists each violation with the record's index and the JSON path inside it.
    """
    problems = []
    for index, record in enumerate(records):
        if isinstance(record, (bytes, bytearray, str)):
            try:
                record = json.loads(record)
            except ValueError as error:
                problems.append(f"record {index}: not JSON: {error}")
                continue
        problems += [f"record {index} {message}" for message in schema_errors(schema_name, record)]
    assert not problems, f"{len(problems)} violation(s) of {schema_name}.schema.json:\n" + "\n".join(problems[:50])


def examples_of(schema_name: str) -> list[Path]:
    return sorted(p for p in EXAMPLES.iterdir() if p.name.split(".")[0] == schema_name)


def check_jsonschema(*arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(CHECK_JSONSCHEMA), *arguments], capture_output=True, text=True, timeout=120)


# ---------------------------------------------------------------------------------------------------
# The schemas themselves

@pytest.mark.parametrize("path", ALL_SCHEMA_FILES, ids=lambda p: p.name)
def test_schema_is_valid_2020_12(path):
    result = check_jsonschema("--check-metaschema", str(path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert _load(path)["$schema"] == "https://json-schema.org/draft/2020-12/schema"


def _walk(node, path="#"):
    if isinstance(node, dict):
        yield path, node
        for key, value in node.items():
            yield from _walk(value, f"{path}/{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _walk(value, f"{path}/{index}")


@pytest.mark.parametrize("path", ALL_SCHEMA_FILES, ids=lambda p: p.name)
def test_schema_has_no_absolute_id_and_every_ref_resolves(path):
    schema = _load(path)
    for where, node in _walk(schema):
        assert "$id" not in node, f"{path.name} {where}: an absolute $id makes relative refs download (tooling.md)"
        ref = node.get("$ref")
        if isinstance(ref, str):
            assert "://" not in ref, f"{path.name} {where}: $ref {ref} must be relative"
            target_file, _, pointer = ref.partition("#")
            target = _load((path.parent / target_file).resolve()) if target_file else schema
            for part in [p for p in pointer.split("/") if p]:
                assert part in target, f"{path.name} {where}: $ref {ref} does not resolve ('{part}' missing)"
                target = target[part]


@pytest.mark.parametrize("schema_name", RECORD_SCHEMAS)
def test_every_default_satisfies_its_own_schema(schema_name):
    """A documented default that the schema itself rejects would mislead whoever copies it."""
    path = SCHEMAS / f"{schema_name}.schema.json"
    registry = referencing.Registry(retrieve=_retrieve)
    defaults = [(where, node) for where, node in _walk(_load(path)) if "default" in node and where != "#"]
    for where, node in defaults:
        subschema = {k: v for k, v in node.items() if k != "default"}
        # An in-memory wrapper whose base URI is the schema file's, so the subschema's relative refs resolve.
        check = Draft202012Validator({"$id": path.as_uri(), "$defs": {"sub": subschema}, "$ref": "#/$defs/sub"},
                                     registry=registry)
        errors = [e.message for e in check.iter_errors(node["default"])]
        assert not errors, f"{schema_name} {where}: default {node['default']!r}: {errors}"
    if schema_name == "worker-config":
        assert len(defaults) >= 15


# ---------------------------------------------------------------------------------------------------
# Examples

@pytest.mark.parametrize("schema_name", RECORD_SCHEMAS)
def test_examples_validate_with_check_jsonschema(schema_name):
    examples = examples_of(schema_name)
    assert len(examples) >= 2, f"schemas/examples needs examples of {schema_name}"
    result = check_jsonschema("--schemafile", str(SCHEMAS / f"{schema_name}.schema.json"), *map(str, examples))
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_example_belongs_to_a_schema():
    for path in EXAMPLES.iterdir():
        assert path.name.split(".")[0] in RECORD_SCHEMAS, f"{path.name}: name it <schema>.<what>.json|yaml"


@pytest.mark.parametrize("schema_name", RECORD_SCHEMAS)
def test_examples_validate_with_the_python_helper_too(schema_name):
    validate_records(schema_name, [_load(path) for path in examples_of(schema_name)])


# ---------------------------------------------------------------------------------------------------
# Mistakes that must fail, each with the message that should name it

def _example(name):
    return _load(EXAMPLES / name)


def _set(document, path, value):
    """Sets (or with value=DELETE removes) the member at a dotted path; list indices are numbers."""
    parts = path.split(".") if not path.startswith("[") else [path[1:-1]]
    node = document
    for part in parts[:-1]:
        node = node[int(part)] if isinstance(node, list) else node[part]
    last = parts[-1]
    if value is DELETE:
        del node[int(last) if isinstance(node, list) else last]
    elif isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return document


DELETE = object()
TOKEN = "740f4707bebcf74f9b7c25d48e3358945f6aa01da5ddb387462c7eaf61bb78ad"

NEGATIVE_CASES = [
    # (id, schema, example file, path, value, expected message fragment)
    ("event without id", "push-request", "push-request.chat-message.json", "id", DELETE,
     "'id' is a required property"),
    ("event without devices", "push-request", "push-request.chat-message.json", "devices", [], "should be non-empty"),
    ("token not hex", "push-request", "push-request.chat-message.json", "devices.0.token", "zz" * 32,
     "does not match"),
    ("token too short", "push-request", "push-request.chat-message.json", "devices.0.token", "abcd", "does not match"),
    ("unknown environment", "push-request", "push-request.chat-message.json", "devices.0.environment", "prod",
     "is not one of"),
    ("priority 7", "push-request", "push-request.chat-message.json", "apns.priority", 7, "is not one of"),
    ("push type is not an override", "push-request", "push-request.chat-message.json", "apns.push_type", "voip",
     "Additional properties are not allowed ('push_type'"),
    ("negative badge", "push-request", "push-request.chat-message.json", "apns.badge", -1, "less than the minimum"),
    ("unknown interruption level", "push-request", "push-request.chat-message.json", "apns.interruption_level",
     "urgent", "is not one of"),
    ("collapse id over 64", "push-request", "push-request.chat-message.json", "apns.collapse_id", "x" * 65,
     "is too long"),
    ("occurred_at not RFC 3339", "push-request", "push-request.chat-message.json", "occurred_at", "2026-11-29 12:00",
     "does not match"),
    ("app not a bundle id", "push-request", "push-request.chat-message.json", "app", "chat", "does not match"),
    ("delivered with 410", "push-outcome", "push-outcome.delivered.json", "http_status", 410, "200 was expected"),
    ("delivered with a reason", "push-outcome", "push-outcome.delivered.json", "reason", "Unregistered",
     "is not of type 'null'"),
    ("skipped with attempts", "push-outcome", "push-outcome.skipped-no-rule.json", "attempts",
     [{"apns_id": "3c4d5e6f-7a8b-4c9d-8e0f-1a2b3c4d5e6f", "http_status": 200, "reason": None,
       "started_at": "2026-11-29T12:00:00Z", "latency_ms": 1}], "is expected to be empty"),
    ("rejected without reason", "push-outcome", "push-outcome.rejected-unregistered.json", "reason", None,
     "None is not of type 'string'"),
    ("rejected with 503", "push-outcome", "push-outcome.rejected-unregistered.json", "http_status", 503,
     "is greater than the maximum of 499"),
    ("sent without apns-id", "push-outcome", "push-outcome.delivered.json", "apns_id", None,
     "None is not of type 'string'"),
    ("nothing sent but an HTTP status", "push-outcome", "push-outcome.rejected-before-sending.json", "http_status",
     400, "400 is not of type 'null'"),
    ("uppercase apns-id", "push-outcome", "push-outcome.delivered.json", "apns_id",
     "2F5C8D6E-5B1A-4C1E-9A7D-0C4B8E2F1A3D", "does not match"),
    ("unknown outcome field", "push-outcome", "push-outcome.delivered.json", "token_hash", "x",
     "Additional properties are not allowed ('token_hash'"),
    ("attempt without latency", "push-outcome", "push-outcome.delivered.json", "attempts.0.latency_ms", DELETE,
     "'latency_ms' is a required property"),
    ("negative partition", "push-outcome", "push-outcome.delivered.json", "source.partition", -1,
     "less than the minimum of 0"),
    ("unknown status", "push-outcome", "push-outcome.delivered.json", "status", "sent", "is not one of"),
    ("invalid-token reason not a token reason", "invalid-token", "invalid-token.unregistered.json", "reason",
     "TooManyRequests", "is not one of"),
    ("invalid_since absent", "invalid-token", "invalid-token.unregistered.json", "invalid_since", DELETE,
     "'invalid_since' is a required property"),
    ("invalid-token environment development", "invalid-token", "invalid-token.unregistered.json", "environment",
     "development", "is not one of"),
    ("dlq without error class", "dlq-headers", "dlq-headers.invalid-event.json", "[apns-worker.error.class]",
     DELETE, "'apns-worker.error.class' is a required property"),
    ("dlq unknown error class", "dlq-headers", "dlq-headers.invalid-event.json", "[apns-worker.error.class]",
     "oops", "is not one of"),
    ("dlq unknown reserved header", "dlq-headers", "dlq-headers.invalid-event.json", "[apns-worker.retry]", "1",
     "'apns-worker.retry'"),
    ("dlq partition with leading zero", "dlq-headers", "dlq-headers.invalid-event.json",
     "[apns-worker.source.partition]", "03", "does not match"),
    ("dlq header value not a string", "dlq-headers", "dlq-headers.invalid-event.json", "[traceparent]", 5,
     "5 is not of type 'string'"),
    ("config without apps", "worker-config", "worker-config.production.yaml", "apps", DELETE,
     "'apps' is a required property"),
    ("config typo at top level", "worker-config", "worker-config.minimal.yaml", "kafak", {},
     "Additional properties are not allowed ('kafak'"),
    ("inline .p8 key", "worker-config", "worker-config.minimal.yaml", "credentials.team-key.key",
     "-----BEGIN PRIVATE KEY-----", "Unevaluated properties are not allowed ('key'"),
    ("inline p12 password", "worker-config", "worker-config.production.yaml",
     "credentials.legacy-production.password", "hunter2", "Unevaluated properties are not allowed ('password'"),
    ("token credential without key id", "worker-config", "worker-config.minimal.yaml",
     "credentials.team-key.key_id", DELETE, "'key_id' is a required property"),
    ("key id of 9 characters", "worker-config", "worker-config.minimal.yaml", "credentials.team-key.key_id",
     "ABC123DEF", "does not match"),
    ("token fields on a certificate", "worker-config", "worker-config.production.yaml",
     "credentials.legacy-production.team_id", "DEF123GHIJ", "Unevaluated properties are not allowed ('team_id'"),
    ("unknown credential type", "worker-config", "worker-config.minimal.yaml", "credentials.team-key.type", "jwt",
     "is not one of"),
    ("kafka password inline", "worker-config", "worker-config.production.yaml", "kafka.properties.sasl.password",
     "hunter2", "'sasl.password' should not be valid"),
    ("group.id in passthrough", "worker-config", "worker-config.production.yaml", "kafka.properties.group.id", "x",
     "'group.id' should not be valid"),
    ("auto commit in passthrough", "worker-config", "worker-config.production.yaml",
     "kafka.properties.enable.auto.offset.store", True, "'enable.auto.offset.store' should not be valid"),
    ("duration without unit", "worker-config", "worker-config.production.yaml", "shutdown.drain_timeout", "30",
     "does not match"),
    ("unknown log level", "worker-config", "worker-config.production.yaml", "log.level", "verbose",
     "is not one of"),
    ("listen without host separator", "worker-config", "worker-config.production.yaml", "metrics.listen", "9090",
     "does not match"),
    ("no brokers", "worker-config", "worker-config.minimal.yaml", "kafka.brokers", [], "should be non-empty"),
    ("broker without port", "worker-config", "worker-config.minimal.yaml", "kafka.brokers", ["kafka-0"],
     "does not match"),
    ("http endpoint", "worker-config", "worker-config.simulator.yaml", "apns.endpoints.production",
     "http://127.0.0.1:38443", "does not match"),
    ("app that is not a bundle id", "worker-config", "worker-config.minimal.yaml", "apps.chat",
     {"credential": "team-key"}, "'chat' does not match"),
    ("zero connections", "worker-config", "worker-config.minimal.yaml", "apns", {"connections": 0},
     "less than the minimum of 1"),
]


def _mutated(example, path, value):
    document = _example(example)
    if path.startswith("kafka.properties.") and value is not DELETE:
        document["kafka"]["properties"][path.removeprefix("kafka.properties.")] = value
        return document
    if path.startswith("credentials.") or path.startswith("apps."):
        section, name, *rest = path.split(".")
        if not rest:
            document[section][name] = value
            return document
        target = document[section][name]
        if value is DELETE:
            del target[rest[0]]
        else:
            target[rest[0]] = value
        return document
    return _set(document, path, value)


@pytest.mark.parametrize("case", NEGATIVE_CASES, ids=[case[0] for case in NEGATIVE_CASES])
def test_mistake_is_rejected_with_a_message_naming_it(case):
    _, schema_name, example, path, value, expected = case
    errors = schema_errors(schema_name, _mutated(example, path, value))
    assert errors, f"{schema_name} accepted the mistake"
    assert any(expected in message for message in errors), errors


def test_check_jsonschema_rejects_every_mistake_too(tmp_path):
    """The same mistakes through the command users run; each file must be reported, with a JSON path."""
    by_schema: dict[str, list[Path]] = {}
    for index, (_, schema_name, example, path, value, _) in enumerate(NEGATIVE_CASES):
        instance = tmp_path / f"{index:02d}-{schema_name}.json"
        instance.write_text(json.dumps(_mutated(example, path, value)))
        by_schema.setdefault(schema_name, []).append(instance)
    for schema_name, instances in by_schema.items():
        result = check_jsonschema("-o", "json", "--schemafile", str(SCHEMAS / f"{schema_name}.schema.json"),
                                  *map(str, instances))
        assert result.returncode == 1, result.stdout + result.stderr
        report = json.loads(result.stdout)
        failed = {Path(error["filename"]).name for error in report["errors"]}
        assert failed == {p.name for p in instances}, report


def test_validate_records_reports_the_record_index_and_path():
    good = _example("push-outcome.delivered.json")
    bad = _mutated("push-outcome.delivered.json", "source.offset", "42")
    with pytest.raises(AssertionError) as raised:
        validate_records("push-outcome", [good, json.dumps(good), bad, b"{not json"])
    message = str(raised.value)
    assert "record 2 at $.source.offset: '42' is not of type 'integer'" in message
    assert "record 3: not JSON" in message
    assert "record 0" not in message and "record 1" not in message
