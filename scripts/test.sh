#!/usr/bin/env bash
# Runs the whole test suite: the house rules (scripts/lint.sh), a build with no compiler warnings, Swift
# unit and integration tests, then the black-box system tests (interop with curl/h2load/nghttpd/h2o,
# schemas, the Helm chart) under pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --test

lint_status=0
scripts/lint.sh || lint_status=$?

# Warnings are errors here, but only here: a warning must not stop a developer's local build.
# (A clean checkout compiles every file, so every warning shows.)
set +e
swift build --build-tests 2>&1 | tee /tmp/apns-worker-build.log | grep -Ev '^\[[0-9]+/[0-9]+\]'
build_status=${PIPESTATUS[0]}
if [[ $build_status -ne 0 ]]; then
    echo "test.sh: the build failed"
    exit 1
fi
warnings=$(grep -c ': warning: ' /tmp/apns-worker-build.log)
# Passing tests' lines are dropped to keep the log readable; failures and summaries stay.
export APNS_WORKER_RECORDS_DIR="$PWD/.build/produced-records"
rm -rf "$APNS_WORKER_RECORDS_DIR"
swift test --skip-build 2>&1 | tee /tmp/apns-worker-swift-test.log | grep -Ev '^(◇|✔|􀟈|􁁛) '
swift_status=${PIPESTATUS[0]}
set -e
grep -E 'Test run with|Executed [0-9]+ tests' /tmp/apns-worker-swift-test.log | tail -3 || true

# The Kafka suites again on librdkafka 2.16 (confluent-kafka's wheel, same SONAME as Debian's 2.0.2, loaded in
# its place at run time): its own mock cluster, its consumer group protocol, its fixes. With them every worker
# test that runs librdkafka: the whole worker on the mock cluster (WorkerIntegrationTests: outage, rebalance,
# 10,000 events), parking through the retry topic, and librdkafka's refusal of bad properties (their time
# here: docs/performance.md).
rdkafka216=$(scripts/librdkafka-2.16.sh)
set +e
LD_LIBRARY_PATH="$rdkafka216" swift test --skip-build \
    --filter 'KafkaTests\.|WorkerTests\.(Kafka|WorkerIntegrationTests|ParkingTests|CredentialLoadingTests)' 2>&1 \
    | tee /tmp/apns-worker-swift-test-216.log | grep -Ev '^(◇|✔|􀟈|􁁛) '
swift216_status=${PIPESTATUS[0]}
set -e
grep -E 'librdkafka .* loaded|Test run with|Executed [0-9]+ tests' /tmp/apns-worker-swift-test-216.log | tail -3 || true
[[ $swift216_status -eq 0 ]] || swift_status=$swift216_status

system_status=0
if compgen -G "Tests/System/test_*.py" >/dev/null; then
    set +e
    swift build -c release --product apns-worker 2>&1 | tee /tmp/apns-worker-release-build.log \
        | grep -Ev '^\[[0-9]+/[0-9]+\]'
    release_status=${PIPESTATUS[0]}
    warnings=$((warnings + $(grep -c ': warning: ' /tmp/apns-worker-release-build.log)))
    set -e
    [[ $release_status -eq 0 ]] || { echo "test.sh: the release build failed"; exit 1; }
    APNS_WORKER_BIN="$(swift build -c release --show-bin-path)/apns-worker" .venv/bin/pytest -q Tests/System \
        || system_status=$?
    # The worker's Kafka-heavy system tests again with librdkafka 2.16 (test_tansu.py always runs on it).
    echo "test.sh: Kafka system tests on librdkafka 2.16"
    LD_LIBRARY_PATH="$rdkafka216" APNS_WORKER_BIN="$(swift build -c release --show-bin-path)/apns-worker" \
        .venv/bin/pytest -q Tests/System/test_kafka_redo.py Tests/System/test_worker_process.py \
        Tests/System/test_kafka_mock.py Tests/System/test_fault_storm.py || system_status=$?
fi

if [[ $swift_status -ne 0 || $system_status -ne 0 || $lint_status -ne 0 || $warnings -ne 0 ]]; then
    echo "test.sh: FAILED (swift test: $swift_status, system tests: $system_status, lint: $lint_status," \
        "compiler warnings: $warnings)"
    exit 1
fi
echo "test.sh: all suites passed"
