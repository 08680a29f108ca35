"""What the system tests need to make Apple-like push certificates with openssl: the topics extension
(1.2.840.113635.100.6.3.6) as DER, and the openssl config sections for a test CA and a push leaf."""
import subprocess


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def der(tag, body):
    assert len(body) < 128
    return bytes([tag, len(body)]) + body


def topics_extension(topics):
    """The topics extension's value: a sequence of (topic, ("app")) pairs, as Apple's certificates carry."""
    return der(0x30, b"".join(der(0x0C, t.encode()) + der(0x30, der(0x0C, b"app")) for t in topics))


def write_extension_config(path, topics):
    """An openssl config with a `ca` section and a `push` leaf section carrying the sandbox marker
    (1.2.840.113635.100.6.3.1) and the topics extension."""
    path.write_text(
        "[req]\ndistinguished_name = dn\n[dn]\n"
        "[ca]\nbasicConstraints = critical, CA:TRUE\nkeyUsage = critical, keyCertSign\n"
        "[push]\nbasicConstraints = critical, CA:FALSE\n"
        "1.2.840.113635.100.6.3.1 = DER:0500\n"
        f"1.2.840.113635.100.6.3.6 = DER:{topics_extension(topics).hex().upper()}\n")
