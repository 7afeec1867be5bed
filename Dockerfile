# neardup detector image. Build from the repository root:
#   docker build -t neardup .
#   docker run --rm -e NEARDUP_BOOTSTRAP_SERVERS=host:9092 -e NEARDUP_REDIS_URL=redis://host:6379/0 neardup
# docker-compose.yml runs it next to Kafka and Redis.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# Only what the package build needs (keeps ops/.cache, .git and tests out of the image).
WORKDIR /src
COPY pyproject.toml README.md ./
COPY detector ./detector
RUN pip install . \
    && rm -rf /src \
    && useradd --system --uid 10001 --create-home --home-dir /app --shell /usr/sbin/nologin neardup

WORKDIR /app
USER neardup

ENTRYPOINT ["neardup"]
CMD ["serve"]
