# neardup detector image. Build from the repository root:
#   docker build -t neardup .
#   docker run --rm -e NEARDUP_BOOTSTRAP_SERVERS=host:9092 -e NEARDUP_REDIS_URL=redis://host:6379/0 neardup
# docker-compose.yml runs it next to Kafka and Redis.

# The builder has the Rust toolchain (copied from the official Rust image): it makes a
# wheel with the native kernels (native/).
FROM rust:1-slim AS rust
FROM python:3.11-slim AS builder
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    CARGO_HOME=/usr/local/cargo \
    RUSTUP_HOME=/usr/local/rustup \
    PATH=/usr/local/cargo/bin:$PATH
COPY --from=rust /usr/local/cargo /usr/local/cargo
COPY --from=rust /usr/local/rustup /usr/local/rustup
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# Only what the package build needs (keeps ops/.cache, .git and tests out of the image).
COPY pyproject.toml README.md ./
COPY native ./native
COPY detector ./detector
RUN pip wheel --no-deps --wheel-dir /wheels . \
    && python -m zipfile -l /wheels/neardup-*.whl | grep -q "detector/_native" \
    || { echo "the wheel lacks the native kernels" >&2; exit 1; }

# The runtime has no compiler: the wheel, its dependencies, and the Unicode tables
# cached at build time, so that no start scans the code points.
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    NEARDUP_KERNELS=native
COPY --from=builder /wheels /wheels
RUN pip install /wheels/neardup-*.whl \
    && rm -rf /wheels \
    && useradd --system --uid 10001 --create-home --home-dir /app --shell /usr/sbin/nologin neardup

WORKDIR /app
USER neardup
RUN python -c "from detector.engine import Engine; Engine()"

ENTRYPOINT ["neardup"]
CMD ["serve"]
