"""Credentials and TLS options (no network): how they are parsed and checked, what the
clients get, how failures are sorted (refused = ConfigError), and that no password is
ever printed: not in --help, reprs, URLs shown or error messages."""

from __future__ import annotations

import argparse
import os
import re
import ssl
import subprocess
import sys
from pathlib import Path

import pytest
import redis
from kafka.errors import (
    IllegalSaslStateError,
    KafkaConnectionError,
    SaslAuthenticationFailedError,
    UnsupportedSaslMechanismError,
)
from redis.exceptions import AuthenticationWrongNumberOfArgsError, NoPermissionError

from detector.access import Secret, kafka_addresses, read_secret, redact_url, resolve
from detector.cli import _kafka_settings, _redis_settings, main, parser
from detector.errors import ConfigError, cause
from detector.index.redis.connect import RedisSettings, refusal
from detector.stream.kafka import KafkaSettings
from detector.stream.kafka.settings import _refused

from .helpers import ROOT

PASSWORD = "s3cret-Pa55-9f2c"  # distinctive, so a leak cannot hide among other words


def openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)


@pytest.fixture(scope="session")
def tls_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A self-signed certificate with its key in one PEM file (it serves as CA file,
    client certificate and key: the settings load them, nothing connects), a second
    key, and an encrypted one."""
    d = tmp_path_factory.mktemp("tls")
    ec = ("-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256")  # quick to make
    openssl("genpkey", *ec, "-out", str(d / "key.pem"))
    openssl("genpkey", *ec, "-out", str(d / "other.key"))
    openssl("genpkey", *ec, "-aes128", "-pass", "pass:pw", "-out", str(d / "encrypted.key"))
    openssl(
        *("req", "-x509", "-key", str(d / "key.pem"), "-days", "1", "-subj", "/CN=t"),
        *("-out", str(d / "cert.pem")),
    )
    (d / "both.pem").write_text((d / "cert.pem").read_text() + (d / "key.pem").read_text())
    return d


@pytest.fixture
def pem(tls_dir: Path) -> Path:
    return tls_dir / "both.pem"


# --------------------------------------------------------------------------- printing


def test_serve_help_shows_no_secret_taken_from_the_environment() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEARDUP_")}
    env.update(
        PYTHONPATH=str(ROOT),
        NEARDUP_REDIS_PASSWORD=PASSWORD + "-redis",
        NEARDUP_KAFKA_PASSWORD=PASSWORD + "-kafka",
        NEARDUP_REDIS_URL=f"redis://neardup:{PASSWORD}-url@127.0.0.1:6379/0",
    )
    shown = {}
    for command in ("serve", "bench", "tail", "produce"):
        done = subprocess.run(
            [sys.executable, "-m", "detector", command, "--help"],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=env,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        assert "--kafka-password" in done.stdout
        assert PASSWORD not in done.stdout + done.stderr, done.stdout
        shown[command] = done.stdout
    assert "redis://neardup:***@127.0.0.1:6379/0" in shown["serve"]  # the URL, redacted


def test_a_secret_prints_as_stars_everywhere() -> None:
    secret = Secret(PASSWORD)
    assert str(secret) == repr(secret) == "'***'"
    assert f"{secret} {secret!r} {[secret]}".count("***") == 3
    assert PASSWORD not in f"{secret} {secret!r} {[secret]} { ({'p': secret}) }"
    assert secret.reveal() == PASSWORD
    assert secret == Secret(PASSWORD) and secret != Secret("other")


def test_settings_reprs_hide_the_passwords() -> None:
    kafka = KafkaSettings(
        "b:9094",
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN",
        username="u",
        password=Secret(PASSWORD),
    )
    redis_at = RedisSettings.from_options(f"redis://u:{PASSWORD}@h:6379/0")
    for text in (repr(kafka), str(kafka), repr(redis_at), str(redis_at)):
        assert PASSWORD not in text and "***" in text


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"),
        ("redis://user@h:1/0", "redis://user@h:1/0"),
        (f"redis://user:{PASSWORD}@h:1/0", "redis://user:***@h:1/0"),
        (f"rediss://:{PASSWORD}@h:1/0", "rediss://:***@h:1/0"),
        (f"redis://u:p%40ss:{PASSWORD}@h/0", "redis://u:***@h/0"),  # ':' and '@' in it
        (f"redis://h:1/0?password={PASSWORD}&db=2", "redis://h:1/0?password=***&db=2"),
        (f"unix://u:{PASSWORD}@/run/redis.sock?db=1", "unix://u:***@/run/redis.sock?db=1"),
    ],
)
def test_urls_are_shown_without_their_password(url: str, shown: str) -> None:
    assert redact_url(url) == shown


# --------------------------------------------------------------------------- Redis


def test_credentials_in_the_redis_url_are_taken_out_of_it() -> None:
    s = RedisSettings.from_options(f"redis://neardup:{PASSWORD}@10.0.0.1:6380/3")
    assert (s.url, s.username, s.password) == (
        "redis://10.0.0.1:6380/3",
        "neardup",
        Secret(PASSWORD),
    )
    s = RedisSettings.from_options(
        f"redis://10.0.0.1/0?password={PASSWORD}&health_check_interval=2"
    )
    assert s.url == "redis://10.0.0.1/0?health_check_interval=2"
    assert (s.username, s.password) == (None, Secret(PASSWORD))
    s = RedisSettings.from_options(f"rediss://:{PASSWORD}@h:6380/0")
    assert (s.url, s.username, s.password) == ("rediss://h:6380/0", None, Secret(PASSWORD))
    s = RedisSettings.from_options(f"unix://nd:{PASSWORD}@/run/redis.sock?db=1")
    assert (s.url, s.username) == ("unix:///run/redis.sock?db=1", "nd")  # redis-py takes it
    assert s.client().connection_pool.connection_kwargs["path"] == "/run/redis.sock"
    # percent-escapes in the URL are the characters they stand for
    s = RedisSettings.from_options("redis://us%3Aer:p%40ss@h/0")
    assert (s.username, s.password) == ("us:er", Secret("p@ss"))


def test_redis_options_win_over_the_url_and_a_url_without_credentials_is_kept() -> None:
    s = RedisSettings.from_options(
        "redis://old:oldpw@h:1/0", username="new", password=Secret(PASSWORD)
    )
    assert (s.url, s.username, s.password) == ("redis://h:1/0", "new", Secret(PASSWORD))
    url = "redis://h:1/0?socket_keepalive=true"
    assert RedisSettings.from_options(url).url == url


def test_the_redis_client_gets_the_credentials_and_tls_options(pem: Path) -> None:
    s = RedisSettings.from_options(
        "rediss://h:6380/0",
        username="neardup",
        password=Secret(PASSWORD),
        ca_file=str(pem),
        cert_file=str(pem),
        key_file=str(pem),
    )
    pool = s.client().connection_pool
    kw = pool.connection_kwargs
    assert pool.connection_class is redis.SSLConnection
    assert (kw["username"], kw["password"]) == ("neardup", PASSWORD)
    assert (kw["ssl_ca_certs"], kw["ssl_certfile"], kw["ssl_keyfile"]) == (str(pem),) * 3
    assert kw["ssl_check_hostname"] is True and kw["ssl_cert_reqs"] == "required"
    assert (kw["socket_timeout"], kw["socket_connect_timeout"]) == (30, 5)
    plain = RedisSettings.from_options("redis://h:6379/0").client().connection_pool
    assert plain.connection_class is redis.Connection
    assert (
        "ssl_ca_certs" not in plain.connection_kwargs and "password" not in plain.connection_kwargs
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"url": f"http://u:{PASSWORD}@h/"},
            r"must start with redis://, rediss:// \(TLS\) or unix://",
        ),
        ({"url": "redis://h/0", "ca_file": "PEM"}, "need a rediss:// URL"),
        ({"url": "rediss://h/0", "key_file": "PEM"}, "--redis-key-file needs --redis-cert-file"),
        ({"url": "rediss://h/0", "ca_file": "/no/such/ca.pem"}, "--redis-ca-file /no/such"),
        ({"url": "redis://h/0", "username": "neardup"}, "Redis user 'neardup' needs a password"),
    ],
)
def test_redis_settings_that_cannot_work_are_config_errors(
    options: dict[str, str], message: str, pem: Path
) -> None:
    options = {k: str(pem) if v == "PEM" else v for k, v in options.items()}
    with pytest.raises(ConfigError, match=message) as caught:
        RedisSettings.from_options(**options)  # type: ignore[arg-type]
    assert PASSWORD not in str(caught.value)


def test_an_unreadable_file_is_a_config_error(pem: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "access", lambda path, mode: False)  # root reads everything
    with pytest.raises(ConfigError, match=r"--redis-ca-file .*: not readable by this user"):
        RedisSettings.from_options("rediss://h/0", ca_file=str(pem))
    with pytest.raises(ConfigError, match=r"--kafka-cert-file .*: not readable by this user"):
        KafkaSettings("h:9093", security_protocol="SSL", cert_file=str(pem))


@pytest.mark.parametrize("prefix", ["redis", "kafka"])
def test_tls_files_that_do_not_load_are_config_errors(prefix: str, tls_dir: Path) -> None:
    def settings(**files: str) -> object:
        if prefix == "redis":
            return RedisSettings("rediss://h:6380/0", **files)  # type: ignore[arg-type]
        return KafkaSettings("h:9093", security_protocol="SSL", **files)  # type: ignore[arg-type]

    cert, key = str(tls_dir / "cert.pem"), str(tls_dir / "key.pem")
    settings(ca_file=cert, cert_file=cert, key_file=key)  # these load
    with pytest.raises(ConfigError, match=f"--{prefix}-ca-file .*: no PEM CA certificate"):
        settings(ca_file=key)
    with pytest.raises(ConfigError, match=r"cannot be loaded \(KEY_VALUES_MISMATCH\)"):
        settings(cert_file=cert, key_file=str(tls_dir / "other.key"))
    with pytest.raises(ConfigError, match=f"--{prefix}-cert-file .* with --{prefix}-key-file"):
        settings(cert_file=cert, key_file=str(tls_dir / "encrypted.key"))  # and no prompt
    with pytest.raises(ConfigError, match="cannot be loaded"):
        settings(cert_file=cert)  # no key in it, none given


def _wrapped(inner: BaseException) -> redis.ConnectionError:
    """As redis-py reports a TLS failure: a ConnectionError raised while handling it."""
    try:
        try:
            raise inner
        except BaseException as exc:
            raise redis.ConnectionError("Error 1 connecting to h:6380.") from exc
    except redis.ConnectionError as outer:
        return outer


def _cert_error() -> ssl.SSLCertVerificationError:
    exc = ssl.SSLCertVerificationError(1, "certificate verify failed")
    exc.verify_message = "self-signed certificate in certificate chain"
    return exc


def _alert() -> ssl.SSLError:
    exc = ssl.SSLError(1, "[SSL: TLSV1_ALERT_UNKNOWN_CA] tlsv1 alert unknown ca")
    exc.reason = "TLSV1_ALERT_UNKNOWN_CA"
    return exc


@pytest.mark.parametrize(
    ("error", "message"),
    [
        (
            redis.AuthenticationError("invalid username-password pair"),
            "refused the credentials of user 'neardup'",
        ),
        (
            redis.ResponseError("WRONGPASS invalid username-password pair"),
            "refused the credentials",
        ),
        (
            AuthenticationWrongNumberOfArgsError("wrong number of arguments for 'auth'"),
            "has no ACL users",
        ),
        (
            NoPermissionError("this user has no permissions to run the 'eval' command"),
            "does not let user 'neardup'",
        ),
        (redis.ResponseError("NOPERM this user has no permissions"), "does not let user"),
        (_wrapped(_cert_error()), "its TLS certificate is not trusted \\(self-signed certificate"),
        (_wrapped(_alert()), "refused the TLS handshake \\(TLSV1_ALERT_UNKNOWN_CA\\)"),
    ],
)
def test_redis_failures_no_retry_cures_are_config_errors(error: Exception, message: str) -> None:
    s = RedisSettings.from_options(f"rediss://neardup:{PASSWORD}@127.0.0.1:6380/0")
    problem = refusal(error, s)
    assert isinstance(problem, ConfigError)
    assert "Redis at rediss://127.0.0.1:6380/0" in str(problem)
    assert re.search(message, str(problem)), problem
    assert PASSWORD not in str(problem)


def test_a_redis_password_missing_is_said_so() -> None:
    problem = refusal(redis.AuthenticationError("Authentication required."), RedisSettings())
    assert problem is not None and "wants a password" in str(problem)


@pytest.mark.parametrize(
    "error",
    [
        redis.ConnectionError("Error 111 connecting to h:6379. Connection refused."),
        redis.TimeoutError("Timeout connecting to server"),
        _wrapped(ssl.SSLEOFError(8, "EOF occurred in violation of protocol")),
        redis.ResponseError("ERR unknown command"),
    ],
)
def test_redis_failures_a_retry_may_cure_are_left_alone(error: Exception) -> None:
    assert refusal(error, RedisSettings()) is None


# --------------------------------------------------------------------------- Kafka


def sasl(**more: object) -> KafkaSettings:
    options: dict[str, object] = {
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-256",
        "username": "neardup",
        "password": Secret(PASSWORD),
    }
    options.update(more)
    return KafkaSettings("127.0.0.1:9095", **options)  # type: ignore[arg-type]


def test_kafka_clients_get_the_sasl_and_tls_options(pem: Path) -> None:
    common = sasl(ca_file=str(pem), cert_file=str(pem), key_file=str(pem)).common()
    assert common == {
        "bootstrap_servers": ["127.0.0.1:9095"],
        "client_id": "neardup",
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-256",
        "sasl_plain_username": "neardup",
        "sasl_plain_password": PASSWORD,
        "ssl_cafile": str(pem),
        "ssl_certfile": str(pem),
        "ssl_keyfile": str(pem),
        "ssl_check_hostname": True,
    }
    plain = KafkaSettings("a:9092,b:9092").common()
    assert plain == {
        "bootstrap_servers": ["a:9092", "b:9092"],
        "client_id": "neardup",
        "security_protocol": "PLAINTEXT",
    }
    ssl_only = KafkaSettings("a:9093", security_protocol="SSL").common()
    assert ssl_only["ssl_cafile"] is None and "sasl_mechanism" not in ssl_only


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"security_protocol": "TLS"}, "--kafka-security-protocol must be one of"),
        ({"sasl_mechanism": None}, "SASL_SSL needs --kafka-sasl-mechanism"),
        (
            {"sasl_mechanism": "GSSAPI"},
            "needs --kafka-sasl-mechanism, one of .* \\(not 'GSSAPI'\\)",
        ),
        ({"username": None}, "SASL_SSL needs --kafka-username and a password"),
        ({"password": None}, "SASL_SSL needs --kafka-username and a password"),
        (
            {"security_protocol": "PLAINTEXT", "sasl_mechanism": None},
            "--kafka-username, --kafka-password: only used with --kafka-security-protocol SASL",
        ),
        (
            {"security_protocol": "SASL_PLAINTEXT", "ca_file": "PEM"},
            "need --kafka-security-protocol SSL or SASL_SSL \\(it is SASL_PLAINTEXT\\)",
        ),
        ({"key_file": "PEM"}, "--kafka-key-file needs --kafka-cert-file"),
        ({"ca_file": "/no/such/ca.pem"}, "--kafka-ca-file /no/such/ca.pem: no such file"),
    ],
)
def test_kafka_settings_that_cannot_work_are_config_errors(
    options: dict[str, object], message: str, pem: Path
) -> None:
    options = {k: str(pem) if v == "PEM" else v for k, v in options.items()}
    with pytest.raises(ConfigError, match=message) as caught:
        sasl(**options)
    assert PASSWORD not in str(caught.value)


WHO = re.escape(
    "Kafka at 127.0.0.1:9095 refused the SASL credentials of user 'neardup' (SCRAM-SHA-256)"
)


@pytest.mark.parametrize(
    ("error", "stage", "certain", "message"),
    [
        (SaslAuthenticationFailedError("Authentication failed"), "sasl", True, WHO),
        (KafkaConnectionError("socket disconnected"), "sasl", False, WHO),
        (UnsupportedSaslMechanismError("does not support SCRAM-SHA-256"), "sasl", True, "support"),
        (IllegalSaslStateError(), "sasl", True, "does not take SASL on this listener"),
        (_wrapped(_cert_error()), "connect", True, "TLS certificate is not trusted"),
        (_wrapped(_alert()), "connect", True, "refused the TLS handshake"),
        (_wrapped(ssl.SSLEOFError(8, "EOF")), "connect", False, "ends every TLS handshake"),
    ],
)
def test_kafka_refusals_are_config_errors_or_suspicions_to_confirm(
    error: Exception, stage: str, certain: bool, message: str
) -> None:
    verdict = _refused(sasl(), "127.0.0.1:9095", error, stage)
    assert verdict is not None
    assert isinstance(verdict, ConfigError) is certain  # else confirmed by trying again
    assert re.search(message, str(verdict)), verdict
    assert PASSWORD not in str(verdict)


@pytest.mark.parametrize(
    ("error", "stage"),
    [
        (KafkaConnectionError("111 ECONNREFUSED"), "connect"),
        (KafkaConnectionError("socket disconnected"), "connect"),  # before ApiVersions
        (KafkaConnectionError("socket disconnected"), "metadata"),  # with SASL: not a hint
    ],
)
def test_kafka_failures_a_retry_may_cure_are_left_alone(error: Exception, stage: str) -> None:
    assert _refused(sasl(), "127.0.0.1:9095", error, stage) is None


def test_a_plaintext_client_dropped_at_its_first_request_is_a_suspicion() -> None:
    verdict = _refused(
        KafkaSettings("h:9094"), "h:9094", KafkaConnectionError("socket disconnected"), "metadata"
    )
    assert isinstance(verdict, str) and "does this listener want SASL" in verdict


def test_cause_follows_the_chain() -> None:
    cert = _cert_error()
    outer = _wrapped(cert)
    assert cause(outer, ssl.SSLCertVerificationError) is cert
    assert cause(outer, redis.ConnectionError) is outer
    assert cause(outer, KeyError) is None


# --------------------------------------------------------------------------- the CLI


def test_read_secret_takes_a_value_or_a_file(tmp_path: Path) -> None:
    path = tmp_path / "pw"
    path.write_text(PASSWORD + "\n")
    assert read_secret(None, str(path), "kafka-password") == Secret(PASSWORD)
    assert read_secret(PASSWORD, None, "kafka-password") == Secret(PASSWORD)
    assert read_secret(None, None, "kafka-password") is None
    assert read_secret("", "", "kafka-password") is None  # an empty NEARDUP_* is unset
    with pytest.raises(
        ConfigError,
        match="given twice, as --kafka-password \\(or NEARDUP_KAFKA_PASSWORD\\) and as ",
    ):
        read_secret(PASSWORD, str(path), "kafka-password")
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(ConfigError, match="is empty"):
        read_secret(None, str(tmp_path / "empty"), "redis-password")
    with pytest.raises(ConfigError, match="--redis-password-file /no/such: no such file"):
        read_secret(None, "/no/such", "redis-password")


def serve_args(*argv: str) -> argparse.Namespace:
    return parser().parse_args(["serve", *argv])


def test_security_options_come_from_the_command_line(pem: Path, tmp_path: Path) -> None:
    pw = tmp_path / "pw"
    pw.write_text(PASSWORD)
    args = serve_args(
        "--bootstrap-servers", "k:9095",
        "--kafka-security-protocol", "SASL_SSL",
        "--kafka-sasl-mechanism", "SCRAM-SHA-512",
        "--kafka-username", "neardup",
        "--kafka-password-file", str(pw),
        "--kafka-ca-file", str(pem),
        "--redis-url", "rediss://r:6380/0",
        "--redis-username", "nd",
        "--redis-password", "rpw",
        "--redis-ca-file", str(pem),
    )  # fmt: skip
    kafka = _kafka_settings(args)
    assert kafka == KafkaSettings(
        "k:9095",
        security_protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-512",
        username="neardup",
        password=Secret(PASSWORD),
        ca_file=str(pem),
    )
    assert _redis_settings(args) == RedisSettings(
        "rediss://r:6380/0", "nd", Secret("rpw"), ca_file=str(pem)
    )


def test_security_options_come_from_the_environment_and_the_config_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    config = tmp_path / "neardup.toml"
    config.write_text(
        'kafka_security_protocol = "SASL_PLAINTEXT"\n'
        'kafka-sasl-mechanism = "PLAIN"\n'
        'kafka_username = "from-file"\n'
        'redis_username = "from-file"\n'
    )
    monkeypatch.setenv("NEARDUP_CONFIG", str(config))  # what parser() reads
    monkeypatch.setenv("NEARDUP_KAFKA_PASSWORD", PASSWORD)
    monkeypatch.setenv("NEARDUP_REDIS_PASSWORD", "rpw")
    monkeypatch.setenv("NEARDUP_KAFKA_USERNAME", "from-env")  # the environment wins
    args = serve_args()
    kafka = _kafka_settings(args)
    assert (kafka.security_protocol, kafka.sasl_mechanism) == ("SASL_PLAINTEXT", "PLAIN")
    assert (kafka.username, kafka.password) == ("from-env", Secret(PASSWORD))
    redis_at = _redis_settings(args)
    assert (redis_at.username, redis_at.password) == ("from-file", Secret("rpw"))
    # and the command line wins over both
    assert _kafka_settings(serve_args("--kafka-username", "argv")).username == "argv"


def test_settings_pass_to_a_child_through_its_environment(
    monkeypatch: pytest.MonkeyPatch, pem: Path
) -> None:
    """bench starts serve processes: what they get in NEARDUP_* must give the same
    settings, even against the parent's own NEARDUP_* variables."""
    kafka = sasl(ca_file=str(pem))
    redis_at = RedisSettings("rediss://r:6380/0", "nd", Secret("rpw"), ca_file=str(pem))
    monkeypatch.setenv("NEARDUP_KAFKA_PASSWORD_FILE", "/parent/has/this")
    monkeypatch.setenv("NEARDUP_REDIS_CERT_FILE", "/parent/has/this")
    for name, value in {**kafka.env(), **redis_at.env()}.items():
        monkeypatch.setenv(name, value)
    args = serve_args()
    assert _kafka_settings(args) == kafka
    assert _redis_settings(args) == redis_at


def test_serve_with_settings_that_cannot_work_exits_2_before_connecting(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NEARDUP_KAFKA_PASSWORD", PASSWORD)
    code = main(["serve", "--metrics-port", "0", "--kafka-username", "neardup"])
    err = capsys.readouterr().err
    assert code == 2
    assert "neardup: error: --kafka-username, --kafka-password: only used with" in err
    assert PASSWORD not in err
    with pytest.raises(SystemExit) as exit_:  # the parser's error: --redis-url has a check
        main(["serve", "--metrics-port", "0", "--redis-url", f"http://u:{PASSWORD}@h/"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "--redis-url: must start with redis://" in err
    assert PASSWORD not in err


def test_an_unknown_host_is_a_configuration_error_not_a_wait() -> None:
    """A name no resolver knows (the .invalid domain never resolves) is a typo: retrying
    cannot cure it. A literal address needs no resolver at all."""
    with pytest.raises(ConfigError, match=r"Kafka at x: unknown host 'no-such-host\.invalid'"):
        resolve("no-such-host.invalid", 9092, "Kafka at x")
    resolve("127.0.0.1", 9092, "Kafka at 127.0.0.1:9092")
    with pytest.raises(ConfigError, match="is not a host name"):
        resolve("a" * 70 + ".example", 1, "Redis")


def test_bootstrap_servers_become_addresses_with_kafkas_default_port() -> None:
    assert kafka_addresses("a:1, [::1]:9093,b") == [("a", 1), ("::1", 9093), ("b", 9092)]
    with pytest.raises(ConfigError, match="--bootstrap-servers 'a:99999'"):
        kafka_addresses("a:99999")
