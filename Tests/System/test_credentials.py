"""Black-box tests of `apns-worker token` and `apns-worker credentials inspect`.

Tokens are checked with an independent verifier (PyJWT with the cryptography backend) against a
public key made by the openssl command-line tool; certificates are made with openssl at test time.
"""
import json
import os
import subprocess
import time

import jwt
import pytest

from push_certificates import openssl, write_extension_config

BIN = os.environ.get("APNS_WORKER_BIN", "apns-worker")
KEY_ID = "ABC123DEFG"
TEAM_ID = "DEF123GHIJ"


def worker(*args, env=None):
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("APNS_")}
    full_env.update(env or {})
    return subprocess.run([BIN, *args], capture_output=True, text=True, env=full_env, timeout=60)


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    d = tmp_path_factory.mktemp("keys")
    openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", "AuthKey.p8", cwd=d)
    openssl("pkey", "-in", "AuthKey.p8", "-pubout", "-out", "AuthKey.pub.pem", cwd=d)
    openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", "other.p8", cwd=d)
    openssl("pkey", "-in", "other.p8", "-pubout", "-out", "other.pub.pem", cwd=d)
    openssl("pkcs8", "-topk8", "-in", "AuthKey.p8", "-v2", "aes-256-cbc", "-passout", "pass:key-secret-42",
            "-out", "encrypted.p8", cwd=d)
    openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-384", "-out", "p384.p8", cwd=d)
    (d / "key.pass").write_text("key-secret-42\n")
    return d


def token_for(keys, key_file="AuthKey.p8", extra=(), env=None):
    result = worker("token", "--key-file", str(keys / key_file), "--key-id", KEY_ID, "--team-id", TEAM_ID,
                    *extra, env=env)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_token_verifies_with_pyjwt_against_the_openssl_public_key(keys):
    before = int(time.time())
    token = token_for(keys)
    after = int(time.time())
    assert jwt.get_unverified_header(token) == {"alg": "ES256", "kid": KEY_ID}
    claims = jwt.decode(token, (keys / "AuthKey.pub.pem").read_bytes(), algorithms=["ES256"],
                        issuer=TEAM_ID, options={"require": ["iss", "iat"]})
    assert set(claims) == {"iss", "iat"}
    assert before <= claims["iat"] <= after
    assert "=" not in token and token.count(".") == 2


def test_token_does_not_verify_with_another_key(keys):
    token = token_for(keys)
    with pytest.raises(jwt.exceptions.InvalidSignatureError):
        jwt.decode(token, (keys / "other.pub.pem").read_bytes(), algorithms=["ES256"])


def test_tampered_token_is_rejected_by_pyjwt(keys):
    header, claims, signature = token_for(keys).split(".")
    forged = jwt.utils.base64url_encode(json.dumps({"iss": "EVILTEAM00", "iat": 1}).encode()).decode()
    with pytest.raises(jwt.exceptions.InvalidSignatureError):
        jwt.decode(f"{header}.{forged}.{signature}", (keys / "AuthKey.pub.pem").read_bytes(), algorithms=["ES256"])


def test_encrypted_key_password_comes_from_a_file_or_the_environment(keys):
    public = (keys / "AuthKey.pub.pem").read_bytes()
    from_file = token_for(keys, "encrypted.p8", extra=("--key-password-file", str(keys / "key.pass")))
    from_env = token_for(keys, "encrypted.p8", env={"APNS_KEY_PASSWORD": "key-secret-42"})
    for token in (from_file, from_env):
        assert jwt.decode(token, public, algorithms=["ES256"])["iss"] == TEAM_ID


def test_encrypted_key_without_password_fails_with_the_fix(keys):
    result = worker("token", "--key-file", str(keys / "encrypted.p8"), "--key-id", KEY_ID, "--team-id", TEAM_ID)
    assert result.returncode == 1
    assert "encrypted private key and no password was given" in result.stderr
    assert result.stdout == ""


def test_wrong_key_password_never_echoes_the_password(keys):
    result = worker("token", "--key-file", str(keys / "encrypted.p8"), "--key-id", KEY_ID, "--team-id", TEAM_ID,
                    env={"APNS_KEY_PASSWORD": "not-the-secret-77"})
    assert result.returncode == 1
    assert "password is wrong" in result.stderr
    assert "not-the-secret-77" not in result.stderr + result.stdout


@pytest.mark.parametrize("args, status, message", [
    (["--key-file", "/nonexistent/AuthKey.p8", "--key-id", KEY_ID, "--team-id", TEAM_ID], 1, "not found"),
    (["--key-file", "{keys}/AuthKey.p8", "--key-id", "abc", "--team-id", TEAM_ID], 1, "Key ID 'abc' is not valid"),
    (["--key-file", "{keys}/AuthKey.p8", "--key-id", KEY_ID, "--team-id", "team"], 1, "Team ID 'team' is not valid"),
    (["--key-file", "{keys}/p384.p8", "--key-id", KEY_ID, "--team-id", TEAM_ID], 1, "secp384r1"),
    (["--key-file", "{keys}/AuthKey.p8", "--team-id", TEAM_ID], 2, "needs --key-id"),
    (["--key-file", "{keys}/AuthKey.p8", "--key-id", KEY_ID, "--team-id", TEAM_ID, "--password", "x"], 2,
     "unknown option '--password'"),
])
def test_token_errors_name_the_problem(keys, args, status, message):
    result = worker("token", *[a.replace("{keys}", str(keys)) for a in args])
    assert result.returncode == status, result.stderr
    assert message in result.stderr


def test_inspect_key_as_json(keys):
    result = worker("credentials", "inspect", "--json", "--key-file", str(keys / "AuthKey.p8"),
                    "--key-id", KEY_ID, "--team-id", TEAM_ID)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["usable"] is True and report["kind"] == "provider-token-key"
    assert report["key_id"] == KEY_ID and report["team_id"] == TEAM_ID
    private_body = "".join(l for l in (keys / "AuthKey.p8").read_text().splitlines() if not l.startswith("-----"))
    assert private_body[:20] not in result.stdout


TOPICS = ["com.example.app", "com.example.app.voip"]


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("pki")
    write_extension_config(d / "ext.cnf", TOPICS)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    openssl("req", "-x509", *ec, "-keyout", "root.key", "-out", "root.pem", "-days", "10", "-subj", "/CN=Root",
            "-config", "ext.cnf", "-extensions", "ca", cwd=d)
    openssl("req", "-new", *ec, "-keyout", "inter.key", "-out", "inter.csr", "-subj", "/CN=Intermediate", cwd=d)
    openssl("x509", "-req", "-in", "inter.csr", "-CA", "root.pem", "-CAkey", "root.key", "-set_serial", "2",
            "-days", "10", "-extfile", "ext.cnf", "-extensions", "ca", "-out", "inter.pem", cwd=d)
    openssl("req", "-new", *ec, "-keyout", "leaf.key", "-out", "leaf.csr",
            "-subj", "/UID=com.example.app/CN=Apple Development IOS Push Services: com.example.app", cwd=d)
    openssl("x509", "-req", "-in", "leaf.csr", "-CA", "inter.pem", "-CAkey", "inter.key", "-set_serial", "3",
            "-days", "10", "-extfile", "ext.cnf", "-extensions", "push", "-out", "leaf.pem", cwd=d)
    # Expired: -days -1 puts notAfter a day in the past (OpenSSL 3.0's x509 has no -not_after).
    openssl("x509", "-req", "-in", "leaf.csr", "-CA", "inter.pem", "-CAkey", "inter.key", "-set_serial", "4",
            "-days", "-1", "-out", "expired.pem", cwd=d)
    openssl("pkcs12", "-export", "-in", "leaf.pem", "-inkey", "leaf.key", "-certfile", "inter.pem",
            "-passout", "pass:p12-secret-99", "-out", "push.p12", cwd=d)
    openssl("pkcs12", "-export", "-in", "leaf.pem", "-inkey", "leaf.key", "-passout", "pass:p12-secret-99",
            "-out", "nochain.p12", cwd=d)
    openssl("pkcs12", "-export", "-in", "expired.pem", "-inkey", "leaf.key", "-certfile", "inter.pem",
            "-passout", "pass:p12-secret-99", "-out", "expired.p12", cwd=d)
    openssl("x509", "-in", "leaf.pem", "-outform", "DER", "-out", "renamed.p12", cwd=d)
    openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", "other.key", cwd=d)
    (d / "p12.pass").write_text("p12-secret-99\n")
    return d


def inspect(*args, env=None):
    return worker("credentials", "inspect", *[str(a) for a in args], env=env)


def test_inspect_p12_as_json_reports_topics_environment_and_expiry(pki):
    result = inspect("--cert-file", pki / "push.p12", "--password-file", pki / "p12.pass", "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert report["usable"] is True and report["kind"] == "certificate"
    assert report["topics"] == TOPICS
    assert report["environments"] == ["sandbox"]
    assert report["subject"].startswith("UID=com.example.app, CN=Apple Development IOS Push Services")
    assert report["chain_certificates"] == 1
    assert report["days_left"] in (9, 10)
    # Ten days left is under the 30-day renewal warning.
    assert any("expires in" in w for w in report["warnings"])
    assert not any("intermediate" in w for w in report["warnings"])


def test_inspect_text_output_with_password_from_the_environment(pki):
    result = inspect("--cert-file", pki / "push.p12", env={"APNS_CERT_PASSWORD": "p12-secret-99"})
    assert result.returncode == 0, result.stderr
    assert "pushes to:     com.example.app, com.example.app.voip" in result.stdout
    assert "environments:  sandbox" in result.stdout
    assert "days left" in result.stdout
    assert "p12-secret-99" not in result.stdout


def test_inspect_warns_about_a_missing_intermediate(pki):
    result = inspect("--cert-file", pki / "nochain.p12", "--password-file", pki / "p12.pass", "--json")
    assert result.returncode == 0
    assert any("lacks the intermediate" in w for w in json.loads(result.stdout)["warnings"])


@pytest.mark.parametrize("args, code, message", [
    (["--cert-file", "{pki}/push.p12"], "passwordRequired", "protected by a password"),
    (["--cert-file", "{pki}/push.p12", "--password-file", "{pki}/wrong.pass"], "wrongPassword", "is wrong"),
    (["--cert-file", "{pki}/renamed.p12", "--password-file", "{pki}/p12.pass"], "certificateInsteadOfPKCS12",
     "DER certificate (.cer)"),
    (["--cert-file", "{pki}/expired.p12", "--password-file", "{pki}/p12.pass"], "certificateExpired", "expired on"),
    (["--cert-file", "{pki}/leaf.pem", "--key-file", "{pki}/other.key"], "keyCertificateMismatch", "does not belong"),
    (["--cert-file", "{pki}/missing.p12"], "fileNotFound", "not found"),
])
def test_inspect_failures_have_their_own_message(pki, args, code, message):
    (pki / "wrong.pass").write_text("guess\n")
    result = inspect(*[a.replace("{pki}", str(pki)) for a in args], "--json")
    assert result.returncode == 1, result.stdout
    report = json.loads(result.stdout)
    assert report["usable"] is False
    assert report["error"]["code"] == code
    assert message in report["error"]["message"]
    assert "p12-secret-99" not in result.stdout and "guess" not in result.stdout
    text = inspect(*[a.replace("{pki}", str(pki)) for a in args])
    assert text.returncode == 1 and message in text.stderr


def test_inspect_without_a_credential_is_a_usage_error():
    result = inspect("--json")
    assert result.returncode == 2
    assert "give --cert-file FILE" in result.stderr
