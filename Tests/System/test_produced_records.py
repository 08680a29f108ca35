"""Records the worker really produced in the Swift integration tests (written as JSON lines under
APNS_WORKER_RECORDS_DIR by WorkerIntegrationTests), validated against schemas/ with check-jsonschema,
a validator no one here wrote."""
import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RECORDS = os.environ.get("APNS_WORKER_RECORDS_DIR")
CHECK_JSONSCHEMA = Path(os.sys.executable).parent / "check-jsonschema"


@pytest.mark.skipif(not RECORDS, reason="APNS_WORKER_RECORDS_DIR is set by scripts/test.sh after the Swift tests")
@pytest.mark.parametrize("schema", ["push-outcome", "invalid-token", "dlq-headers"])
def test_produced_records_satisfy_their_schema(schema, tmp_path):
    source = Path(RECORDS) / f"{schema}.jsonl"
    assert source.exists(), f"{source} missing: the Swift integration test did not write it"
    records = [json.loads(line) for line in source.read_text().splitlines() if line.strip()]
    assert records, f"{source} is empty"
    # check-jsonschema validates one document per file, so a sample: every kind of record there is
    # (rejections and retries as well as deliveries), up to 100 of each, plus the first 100.
    unusual = [r for r in records if r.get("status") not in (None, "delivered") or len(r.get("attempts", [])) > 1]
    chosen = unusual[:100] + records[:100]
    files = []
    for index, record in enumerate(chosen):
        path = tmp_path / f"{schema}-{index}.json"
        path.write_text(json.dumps(record))
        files.append(str(path))
    result = subprocess.run(
        [str(CHECK_JSONSCHEMA), "--schemafile", str(ROOT / "schemas" / f"{schema}.schema.json"), *files],
        capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
