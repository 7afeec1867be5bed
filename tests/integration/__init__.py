"""Integration tests: real Kafka and Redis (started by ops/stack.sh, or by CI)."""
