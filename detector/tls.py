"""TLS files and TLS failures: certificates and keys are checked when a command starts,
and a handshake that no retry can cure is told apart from a server that is away."""

from __future__ import annotations

import os

from .errors import ConfigError, cause


def readable_file(path: str, option: str) -> str:
    """A file an option names (a CA, a certificate, a key, a password): it must exist and
    be readable now, so that a typo fails at start-up and not at the first reconnect."""
    if not os.path.isfile(path):
        raise ConfigError(f"--{option} {path}: no such file")
    if not os.access(path, os.R_OK):
        raise ConfigError(f"--{option} {path}: not readable by this user")
    return path


def check_tls_files(ca: str | None, cert: str | None, key: str | None, prefix: str) -> None:
    """Load the PEM files (--PREFIX-ca-file, -cert-file, -key-file) as the client will,
    now: a missing file, one that holds no certificate, or a key that is encrypted or not
    the certificate's, fails at start-up under its option's name rather than as a TLS
    error at every connection attempt."""
    if key and not cert:
        raise ConfigError(f"--{prefix}-key-file needs --{prefix}-cert-file (the certificate)")
    for name, path in (("ca", ca), ("cert", cert), ("key", key)):
        if path:
            readable_file(path, f"{prefix}-{name}-file")
    import ssl  # here, not at the top: `neardup detect` reads no certificate

    context = ssl.create_default_context()
    if ca:
        try:
            context.load_verify_locations(cafile=ca)
        except ssl.SSLError as exc:
            raise ConfigError(
                f"--{prefix}-ca-file {ca}: no PEM CA certificate in it ({exc.reason or exc})"
            ) from None
    if cert:
        try:  # the password callback keeps OpenSSL from prompting on the terminal
            context.load_cert_chain(cert, key, password=lambda: "")
        except ssl.SSLError as exc:
            files = f"--{prefix}-cert-file {cert}" + (
                f" with --{prefix}-key-file {key}" if key else ""
            )
            why = exc.reason or "not a PEM certificate with its private key, unencrypted"
            raise ConfigError(f"{files}: cannot be loaded ({why})") from None


def tls_refusal(exc: BaseException, where: str, prefix: str) -> ConfigError | None:
    """The ConfigError for a TLS failure that no retry cures: the server's certificate is
    not trusted, or the server refused the handshake (our client certificate)."""
    import ssl

    if cert := cause(exc, ssl.SSLCertVerificationError):
        return ConfigError(
            f"{where}: its TLS certificate is not trusted ({cert.verify_message}); "
            f"give the CA that signed it with --{prefix}-ca-file"
        )
    tls = cause(exc, ssl.SSLError)
    if tls is not None and "ALERT" in (getattr(tls, "reason", None) or ""):
        return ConfigError(
            f"{where} refused the TLS handshake ({tls.reason}): check "
            f"--{prefix}-cert-file and --{prefix}-key-file"
        )
    return None
