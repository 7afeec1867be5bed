# neardup's detector image, from Debian 12 alone (its python3 3.11 is our minimum; its
# cargo-web and rustc-web build the native kernels). From the repository's root:
#   docker build --network host -t neardup .        (ops/docker.sh build does it, with the
#                                                     Kafka and Redis images)
#   docker run --rm --network host neardup detect tests/data/sample.jsonl.gz
#   docker run -d --network host neardup serve --bootstrap-servers 127.0.0.1:9092 ...
# docker-compose.yml runs it next to Kafka and Redis, on the host's network.

# The builder makes the wheel with its native kernels (native/, PyO3) and the runtime's
# virtualenv. Debian 12's rustc (1.63) is too old for PyO3 0.27; its rustc-web (1.85 in
# bookworm, newer in bookworm-security), packaged for the browsers, is a Rust that any Debian
# 12 machine installs with apt, with no toolchain fetched from elsewhere.
FROM debian:bookworm-slim AS builder
# EXTRA_CA_CERTS: PEM certificates pip and cargo should trust besides Debian's, where a proxy
# intercepts TLS (ops/docker.sh passes the building machine's own additions), one file a
# certificate (Java's keystore takes the first of a file only); builder stage only.
ARG EXTRA_CA_CERTS=""
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        ca-certificates python3 python3-venv gcc libc6-dev cargo-web rustc-web \
    && rm -rf /var/lib/apt/lists/* \
    && printf '%s\n' "$EXTRA_CA_CERTS" | awk '/BEGIN CERT/ { n++ } n { print > ("/usr/local/share/ca-certificates/build-extra-" n ".crt") }' \
    && update-ca-certificates
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_CERT=/etc/ssl/certs/ca-certificates.crt \
    CARGO_HOME=/tmp/cargo
WORKDIR /src
# Only what the package build needs (.dockerignore keeps ops/.cache, .git and tests out).
COPY pyproject.toml README.md ./
COPY native ./native
COPY detector ./detector
# setuptools-rust goes on without the kernels when cargo fails: the image must not.
RUN python3 -m venv /opt/build \
    && /opt/build/bin/pip wheel -q --no-deps --wheel-dir /wheels . \
    && { /opt/build/bin/python -m zipfile -l /wheels/neardup-*.whl | grep -q "detector/_native" \
         || { echo "the wheel lacks the native kernels (detector/_native)" >&2; exit 1; }; }
# The runtime's virtualenv, whole: the wheel and its dependencies, then no pip.
RUN python3 -m venv /opt/neardup \
    && /opt/neardup/bin/pip install -q /wheels/neardup-*.whl \
    && /opt/neardup/bin/pip uninstall -q -y pip setuptools

# The runtime: python3 and the virtualenv; no compiler, no pip, no network needed.
FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --create-home --home-dir /app --shell /usr/sbin/nologin neardup
COPY --from=builder /opt/neardup /opt/neardup
# NEARDUP_METRICS_PORT_FILE: serve writes the metrics port it took there, which the
# HEALTHCHECK reads (on the host's network, detectors take ports of a range:
# --metrics-port-count in docker-compose.yml).
ENV PATH=/opt/neardup/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    NEARDUP_KERNELS=native \
    NEARDUP_METRICS_PORT_FILE=/tmp/neardup-metrics-port
WORKDIR /app
USER neardup
# The Unicode tables, cached now in ~/.cache/neardup, so that no start scans the code points.
RUN python -c "from detector.engine import Engine; Engine()"
# /healthz (= /readyz): a member of its group with its partitions, not waiting for a server.
HEALTHCHECK --interval=10s --timeout=5s --start-period=60s --retries=6 \
    CMD ["python", "-c", "import urllib.request as u; p = open('/tmp/neardup-metrics-port').read().strip(); u.urlopen(f'http://127.0.0.1:{p}/healthz', timeout=4)"]
ENTRYPOINT ["neardup"]
CMD ["serve"]
