"""Credentials and TLS, end to end on the stack's secured endpoints: `neardup serve` with
SASL (SCRAM over TLS, PLAIN in the clear) and a Redis ACL user (over TLS, and in the URL)
decides records; a wrong password or an untrusted CA makes it exit with status 2 within
seconds, saying what is wrong, and no password, right or wrong, appears in its output.

The test's own producer and reader use the broker's plaintext listener (the same broker,
the same topics); only serve goes through the secured ones. Passwords reach serve through
its environment, never its command line.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote, urlsplit

import pytest
import redis

from ..helpers import SAMPLE, read_jsonl
from .admin import create_topics, index_keys
from .endpoints import (
    REDIS_URL,
    STACK_CA_FILE,
    STACK_CLIENT_CERT,
    STACK_CLIENT_KEY,
    STACK_KAFKA_PASSWORD,
    STACK_KAFKA_SASL,
    STACK_KAFKA_SASL_SSL,
    STACK_KAFKA_USER,
    STACK_REDIS_PASSWORD,
    STACK_REDIS_TLS_URL,
    STACK_REDIS_USER,
)
from .processes import Names, Serve, logs
from .readers import DecisionReader, Producer

FAIL_WITHIN = 20.0  # seconds from start to exit for a refused credential or certificate
WRONG = "not-the-password-7d1e"

SECURED = {
    "NEARDUP_STACK_REDIS_USER": STACK_REDIS_USER,
    "NEARDUP_STACK_REDIS_PASSWORD": STACK_REDIS_PASSWORD,
    "NEARDUP_STACK_REDIS_TLS_URL": STACK_REDIS_TLS_URL,
    "NEARDUP_STACK_CA_FILE": STACK_CA_FILE,
    "NEARDUP_STACK_KAFKA_SASL": STACK_KAFKA_SASL,
    "NEARDUP_STACK_KAFKA_SASL_SSL": STACK_KAFKA_SASL_SSL,
    "NEARDUP_STACK_KAFKA_USER": STACK_KAFKA_USER,
    "NEARDUP_STACK_KAFKA_PASSWORD": STACK_KAFKA_PASSWORD,
}


@pytest.fixture(scope="module", autouse=True)
def secured_endpoints() -> None:
    """Fail (never skip), as for the plain servers, when the stack offers no secured
    endpoints."""
    missing = [k for k, v in SECURED.items() if not v]
    if missing:
        pytest.fail(
            f"the security tests need the stack's secured endpoints ({', '.join(missing)} "
            "unset): `ops/stack.sh env` prints them",
            pytrace=False,
        )


# ------------------------------------------------------------------ environments


def redis_tls(password: str = STACK_REDIS_PASSWORD, ca: str = STACK_CA_FILE) -> dict[str, str]:
    """The ACL user over TLS (the client certificate too when the stack has one)."""
    env = {
        "NEARDUP_REDIS_URL": STACK_REDIS_TLS_URL,
        "NEARDUP_REDIS_USERNAME": STACK_REDIS_USER,
        "NEARDUP_REDIS_PASSWORD": password,
        "NEARDUP_REDIS_CA_FILE": ca,
    }
    if STACK_CLIENT_CERT and STACK_CLIENT_KEY:
        env["NEARDUP_REDIS_CERT_FILE"] = STACK_CLIENT_CERT
        env["NEARDUP_REDIS_KEY_FILE"] = STACK_CLIENT_KEY
    return env


def redis_url_with_credentials() -> dict[str, str]:
    """The ACL user in the plain server's URL: redis://user:password@host:port/db."""
    parts = urlsplit(REDIS_URL)
    login = f"{quote(STACK_REDIS_USER, safe='')}:{quote(STACK_REDIS_PASSWORD, safe='')}"
    return {"NEARDUP_REDIS_URL": parts._replace(netloc=f"{login}@{parts.netloc}").geturl()}


def kafka_sasl_ssl(
    mechanism: str, password: str = STACK_KAFKA_PASSWORD, ca: str = STACK_CA_FILE
) -> dict[str, str]:
    return {
        "NEARDUP_BOOTSTRAP_SERVERS": STACK_KAFKA_SASL_SSL,
        "NEARDUP_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
        "NEARDUP_KAFKA_SASL_MECHANISM": mechanism,
        "NEARDUP_KAFKA_USERNAME": STACK_KAFKA_USER,
        "NEARDUP_KAFKA_PASSWORD": password,
        "NEARDUP_KAFKA_CA_FILE": ca,
    }


def kafka_sasl_plaintext(mechanism: str, password: str = STACK_KAFKA_PASSWORD) -> dict[str, str]:
    return {
        "NEARDUP_BOOTSTRAP_SERVERS": STACK_KAFKA_SASL,
        "NEARDUP_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
        "NEARDUP_KAFKA_SASL_MECHANISM": mechanism,
        "NEARDUP_KAFKA_USERNAME": STACK_KAFKA_USER,
        "NEARDUP_KAFKA_PASSWORD": password,
    }


def assert_no_secrets(output: str, *secrets: str) -> None:
    for secret in {STACK_REDIS_PASSWORD, STACK_KAFKA_PASSWORD, *secrets}:
        assert secret not in output, f"a password appears in serve's output:\n{output}"


# ------------------------------------------------------------------ serving


def records(tag: str) -> list[dict[str, str]]:
    """Three distinct sample texts, a near copy of the first (a word changed), an exact
    copy of the second."""
    texts = [r["text"][:2000] for r in read_jsonl(SAMPLE)[:6:2]]
    words = texts[0].split()
    words[len(words) // 2] = "changed"
    out = [{"id": f"{tag}-{n}", "text": t} for n, t in enumerate(texts)]
    out.append({"id": f"{tag}-near", "text": " ".join(words)})
    out.append({"id": f"{tag}-copy", "text": texts[1]})
    return out


def serve_and_decide(
    names: Names,
    serve: Callable[..., Serve],
    decisions: DecisionReader,
    env: dict[str, str],
    rclient: redis.Redis,
) -> None:
    create_topics({names.input: 1})  # one partition: the records are decided in order
    server = serve(env=env)
    sent = records(names.group)
    with Producer() as producer:
        for r in sent:
            producer.send_record(names.input, r)
        producer.flush()
    missing = decisions.wait_for([r["id"] for r in sent], timeout=90)
    assert not missing, f"no decision for {missing}\n{logs([server])}"
    first = decisions.first()
    assert first[sent[3]["id"]]["decision"] == "duplicate", first
    assert first[sent[3]["id"]]["duplicate_of"] == sent[0]["id"], first
    assert first[sent[4]["id"]]["exact"] is True, first
    assert [first[r["id"]]["decision"] for r in sent[:3]] == ["unique"] * 3, first
    assert index_keys(rclient, names.index), "serve wrote no index keys to Redis"
    assert server.stop() == 0, logs([server])
    assert_no_secrets(server.log(tail=1_000_000))


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_serve_over_sasl_ssl_with_scram_and_redis_tls_with_an_acl_user(
    mechanism: str,
    names: Names,
    serve: Callable[..., Serve],
    decisions: DecisionReader,
    rclient: redis.Redis,
) -> None:
    env = {**kafka_sasl_ssl(mechanism), **redis_tls()}
    serve_and_decide(names, serve, decisions, env, rclient)


def test_serve_over_sasl_plaintext_with_plain_and_the_redis_user_in_the_url(
    names: Names,
    serve: Callable[..., Serve],
    decisions: DecisionReader,
    rclient: redis.Redis,
) -> None:
    env = {**kafka_sasl_plaintext("PLAIN"), **redis_url_with_credentials()}
    serve_and_decide(names, serve, decisions, env, rclient)


# ------------------------------------------------------------------ failing fast


def new_ca(directory: Path) -> Path:
    """A freshly made CA certificate (PEM) that signed nothing: a trust anchor under which
    no server's certificate verifies."""
    key, cert = directory / "other-ca.key", directory / "other-ca.crt"
    request = ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2"]
    subprocess.run(
        [*request, "-subj", "/CN=neardup-it-other-ca", "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return cert


def exits_fast(server: Serve) -> tuple[int, str]:
    """Serve's exit status, which must come within FAIL_WITHIN seconds, and its output."""
    started = time.monotonic()
    try:
        code = server.wait(FAIL_WITHIN)
    except Exception:
        server.kill()
        raise AssertionError(
            f"serve still runs {FAIL_WITHIN:.0f} s after start:\n{server.log()}"
        ) from None
    output = server.log(tail=1_000_000)
    assert time.monotonic() - started < FAIL_WITHIN
    return code, output


def test_a_wrong_redis_password_ends_serve_with_status_2(
    names: Names, serve: Callable[..., Serve]
) -> None:
    server = serve(env={**kafka_sasl_ssl("SCRAM-SHA-256"), **redis_tls(password=WRONG)})
    code, output = exits_fast(server)
    assert code == 2, output
    assert f"refused the credentials of user '{STACK_REDIS_USER}'" in output, output
    assert "Redis at rediss://" in output, output
    assert "Traceback" not in output, output
    assert_no_secrets(output, WRONG)


@pytest.mark.parametrize(
    ("protocol", "mechanism"),
    [("SASL_SSL", "SCRAM-SHA-256"), ("SASL_SSL", "SCRAM-SHA-512"), ("SASL_PLAINTEXT", "PLAIN")],
)
def test_a_wrong_kafka_password_ends_serve_with_status_2(
    protocol: str, mechanism: str, names: Names, serve: Callable[..., Serve]
) -> None:
    if protocol == "SASL_SSL":
        kafka, address = kafka_sasl_ssl(mechanism, password=WRONG), STACK_KAFKA_SASL_SSL
    else:
        kafka, address = kafka_sasl_plaintext(mechanism, password=WRONG), STACK_KAFKA_SASL
    server = serve(env={**kafka, **redis_tls()})
    code, output = exits_fast(server)
    assert code == 2, output
    expected = (
        f"Kafka at {address} refused the SASL credentials of user '{STACK_KAFKA_USER}' "
        f"({mechanism})"
    )
    assert expected in output, output
    assert "Traceback" not in output, output
    assert_no_secrets(output, WRONG)


@pytest.mark.parametrize("server_kind", ["redis", "kafka"])
def test_a_certificate_from_another_ca_ends_serve_with_status_2(
    server_kind: str, names: Names, serve: Callable[..., Serve], tmp_path: Path
) -> None:
    other = str(new_ca(tmp_path))
    if server_kind == "redis":
        env = {**kafka_sasl_ssl("SCRAM-SHA-256"), **redis_tls(ca=other)}
        expected = "Redis at rediss://"
    else:
        env = {**kafka_sasl_ssl("SCRAM-SHA-256", ca=other), **redis_tls()}
        expected = f"Kafka at {STACK_KAFKA_SASL_SSL}"
    code, output = exits_fast(serve(env=env))
    assert code == 2, output
    assert expected in output and "TLS certificate is not trusted" in output, output
    assert_no_secrets(output)
