"""Black-box tests of `apns-worker send --dry-run` and `--curl`: output, exit codes, shell safety.

Exit codes: 0 printed, 1 the request is invalid (every problem on stderr, one per line), 2 usage.
"""
import json
import os
import re
import subprocess

import pytest

BIN = os.environ.get("APNS_WORKER_BIN", "apns-worker")
TOKEN = "0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9"
UUID_V4 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")


def send(*args, stdin=None):
    return subprocess.run([BIN, "send", *args], input=stdin, capture_output=True, text=True, timeout=30)


def dry_run(*args, stdin=None):
    result = send("--dry-run", *args, stdin=stdin)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 1, result.stdout
    return json.loads(lines[0])


def test_dry_run_prints_the_request_as_one_json_object():
    printed = dry_run("--device-token", TOKEN, "--topic", "com.example.app", "--environment", "sandbox",
                      "--priority", "5", "--expiration", "1764417600", "--collapse-id", "evt-9f2",
                      "--apns-id", "123E4567-E89B-42D3-A456-426614174000",
                      "--payload", '{"aps": {"alert": {"title": "Hi", "body": "日本 😀"}}, "k": 1}')
    assert printed["method"] == "POST"
    assert printed["url"] == "https://api.sandbox.push.apple.com/3/device/" + TOKEN
    assert list(printed["headers"].items()) == [
        ("apns-push-type", "alert"),
        ("apns-topic", "com.example.app"),
        ("apns-priority", "5"),
        ("apns-expiration", "1764417600"),
        ("apns-collapse-id", "evt-9f2"),
        ("apns-id", "123e4567-e89b-42d3-a456-426614174000"),
    ]
    assert printed["body"] == {"aps": {"alert": {"title": "Hi", "body": "日本 😀"}}, "k": 1}


def test_defaults_production_alert_priority_10_no_expiration_and_a_fresh_id_per_run():
    first = dry_run("--device-token", TOKEN, "--topic", "com.example.app")
    second = dry_run("--device-token", TOKEN, "--topic", "com.example.app")
    assert first["url"] == "https://api.push.apple.com/3/device/" + TOKEN
    assert first["headers"]["apns-push-type"] == "alert"
    assert first["headers"]["apns-priority"] == "10"
    assert "apns-expiration" not in first["headers"]
    assert "authorization" not in first["headers"]
    assert first["body"] == {"aps": {"alert": "Hello from apns-worker"}}
    assert UUID_V4.match(first["headers"]["apns-id"])
    assert first["headers"]["apns-id"] != second["headers"]["apns-id"]


def test_background_defaults_to_content_available_and_priority_5():
    printed = dry_run("--device-token", TOKEN, "--topic", "com.example.app", "--push-type", "background")
    assert printed["body"] == {"aps": {"content-available": 1}}
    assert printed["headers"]["apns-priority"] == "5"


def test_pasted_token_is_normalised():
    pasted = "<" + " ".join(TOKEN[i:i + 8].upper() for i in range(0, 64, 8)) + ">\n"
    printed = dry_run("--device-token", pasted, "--topic", "com.example.app")
    assert printed["url"].endswith("/3/device/" + TOKEN)


@pytest.mark.parametrize("push_type,topic,expected", [
    ("voip", "com.example.app", "com.example.app.voip"),
    ("voip", "com.example.app.voip", "com.example.app.voip"),
    ("liveactivity", "com.example.app", "com.example.app.push-type.liveactivity"),
    ("pushtotalk", "com.example.app", "com.example.app.voip-ptt"),
    ("fileprovider", "com.example.app.pushkit.fileprovider", "com.example.app.pushkit.fileprovider"),
])
def test_topic_gets_the_push_types_suffix_once(push_type, topic, expected):
    payload = ('{"aps":{"timestamp":1764417600,"event":"end","content-state":{}}}' if push_type == "liveactivity"
               else '{"x":1}')
    printed = dry_run("--device-token", TOKEN, "--topic", topic, "--push-type", push_type, "--payload", payload)
    assert printed["headers"]["apns-topic"] == expected
    assert printed["headers"]["apns-push-type"] == push_type


def test_expiration_zero_is_sent_as_zero():
    printed = dry_run("--device-token", TOKEN, "--topic", "com.example.app", "--expiration", "0")
    assert printed["headers"]["apns-expiration"] == "0"


def test_payload_from_a_file_and_from_stdin(tmp_path):
    path = tmp_path / "payload.json"
    path.write_text('{\n  "aps": {"badge": 3}\n}\n')
    printed = dry_run("--device-token", TOKEN, "--topic", "a.b", "--payload-file", str(path))
    assert printed["body"] == {"aps": {"badge": 3}}
    printed = dry_run("--device-token", TOKEN, "--topic", "a.b", "--payload-file", "-", stdin='{"aps":{"sound":"x"}}')
    assert printed["body"] == {"aps": {"sound": "x"}}


def test_invalid_request_prints_every_problem_and_exits_1():
    result = send("--dry-run", "--device-token", "0a1b2c3d4e5f6071xyz", "--topic", "com.example.app",
                  "--push-type", "background", "--priority", "10", "--collapse-id", "x" * 65,
                  "--payload", '{"aps":{"alert":"hi","orderId":7,"badge":"3"}}')
    assert result.returncode == 1
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    fields = [line.split(":", 1)[0] for line in lines]
    assert fields == [
        "device-token", "apns-collapse-id", "apns-priority", "payload.aps.orderId", "payload.aps.badge",
        "payload.aps.alert", "payload.aps.badge", "payload.aps.content-available",
    ], result.stderr
    assert "'x' at position 17" in lines[0]
    assert "use 5" in lines[2]


@pytest.mark.parametrize("args,expected", [
    (["--expiration", "-1"], "apns-expiration: -1 is negative"),
    (["--expiration", "1764417600000"], "apns-expiration: 1764417600000 looks like milliseconds"),
    (["--priority=7"], "apns-priority: 7 is not an APNs priority"),
    (["--environment", "staging"], "environment: 'staging' is not an APNs environment"),
    (["--push-type", "banner"], "apns-push-type: 'banner' is not an APNs push type"),
    (["--apns-id", "1234"], "apns-id: '1234' is not a UUID"),
    (["--collapse-id", "日" * 22], "apns-collapse-id: the collapse id is 66 bytes"),
    (["--push-type", "liveactivity", "--payload", '{"aps":{"event":"stop","timestamp":1}}'],
     "payload.aps.event: 'stop' is not a Live Activity event"),
])
def test_each_invalid_field_is_named_with_what_would_be_right(args, expected):
    result = send("--dry-run", "--device-token", TOKEN, "--topic", "com.example.app", *args)
    assert result.returncode == 1
    assert result.stderr.startswith(expected), result.stderr


def test_inline_option_values_work():
    printed = dry_run("--device-token=" + TOKEN, "--topic=com.example.app", "--priority=5")
    assert printed["headers"]["apns-priority"] == "5"


def test_payload_over_the_limit_counts_multibyte_characters():
    # 4076 bytes of CJK text (1358 characters + 2 ASCII) make a 4096-byte payload; one more byte is too many.
    fits = '{"aps":{"alert":"' + "日" * 1358 + 'ab"}}'
    assert send("--dry-run", "--device-token", TOKEN, "--topic", "a.b", "--payload", fits).returncode == 0
    over = '{"aps":{"alert":"' + "日" * 1358 + 'abc"}}'
    result = send("--dry-run", "--device-token", TOKEN, "--topic", "a.b", "--payload", over)
    assert result.returncode == 1
    assert "4097 bytes" in result.stderr and "4096-byte limit" in result.stderr


def test_invalid_json_payload_says_where():
    result = send("--dry-run", "--device-token", TOKEN, "--topic", "a.b", "--payload", '{"aps":{"alert":"x",}}')
    assert result.returncode == 1
    assert result.stderr.startswith("payload: the payload is not valid JSON: line 1, column 21")


def test_unreadable_payload_file_exits_1(tmp_path):
    result = send("--dry-run", "--device-token", TOKEN, "--topic", "a.b", "--payload-file", str(tmp_path / "nope"))
    assert result.returncode == 1
    assert "no such file" in result.stderr


@pytest.mark.parametrize("args,message", [
    (["--dry-run", "--device-token", TOKEN, "--topic", "a.b", "--dry-runn"], "unknown option '--dry-runn'"),
    (["--dry-run", "--device-token", TOKEN, "--topic"], "option '--topic' needs a value"),
    (["--dry-run", "--topic", "a.b"], "missing required option --device-token"),
    (["--dry-run", "--device-token", TOKEN, "--topic", "a.b", "--payload", "{}", "--payload-file", "x"],
     "not both"),
    (["--dry-run", "--device-token", TOKEN, "--topic", "a.b", "--push-type", "voip"], "no default payload"),
    (["--dry-run", "--device-token", TOKEN, "--device-token", TOKEN, "--topic", "a.b"], "more than once"),
])
def test_usage_errors_exit_2(args, message):
    result = send(*args)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr
    assert result.stdout == ""


def test_sending_without_a_credential_says_what_it_needs():
    # Sending itself is tested in test_client_send.py.
    result = send("--device-token", TOKEN, "--topic", "com.example.app")
    assert result.returncode == 2
    assert "--key-file" in result.stderr and "--cert-file" in result.stderr and "--dry-run" in result.stderr


def test_help_lists_the_options():
    result = send("--help")
    assert result.returncode == 0
    for option in ["--dry-run", "--curl", "--device-token", "--topic", "--push-type", "--priority", "--expiration",
                   "--collapse-id", "--apns-id", "--payload", "--payload-file", "--environment"]:
        assert option in result.stdout


def run_curl_command(command, tmp_path):
    """Runs the printed command in bash with `curl` replaced by a function that records its arguments."""
    script = 'curl() { printf "%s\\0" "$@"; }\n' + command
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "AUTHENTICATION_TOKEN": "eyJ.jwt.sig"}
    result = subprocess.run(["bash", "-c", script], capture_output=True, timeout=30, cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    return [arg.decode() for arg in result.stdout.split(b"\0")[:-1]]


def test_curl_command_sends_the_same_request(tmp_path):
    payload = '{"aps":{"alert":"it\'s $(touch pwned) `touch pwned2` \\"quoted\\" 日本"},"n":1}'
    result = send("--curl", "--device-token", TOKEN, "--topic", "com.example.app", "--push-type", "voip",
                  "--environment", "sandbox", "--apns-id", "123e4567-e89b-42d3-a456-426614174000",
                  "--collapse-id", "it's", "--payload", payload)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("curl --http2 ")
    assert "$AUTHENTICATION_TOKEN" in result.stdout
    args = run_curl_command(result.stdout, tmp_path)
    assert not (tmp_path / "pwned").exists() and not (tmp_path / "pwned2").exists()
    assert args == [
        "--http2", "--request", "POST",
        "--header", "authorization: bearer eyJ.jwt.sig",
        "--header", "apns-push-type: voip",
        "--header", "apns-topic: com.example.app.voip",
        "--header", "apns-priority: 10",
        "--header", "apns-collapse-id: it's",
        "--header", "apns-id: 123e4567-e89b-42d3-a456-426614174000",
        "--data-binary", json.dumps(json.loads(payload), separators=(",", ":"), ensure_ascii=False),
        "https://api.sandbox.push.apple.com/3/device/" + TOKEN,
    ]


def test_curl_refuses_an_invalid_request_too():
    result = send("--curl", "--device-token", TOKEN, "--topic", "com.example.app", "--priority", "7")
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.startswith("apns-priority: 7 is not an APNs priority")
