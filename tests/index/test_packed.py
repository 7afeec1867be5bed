"""cluster.packed_hmget: the protocol redis-py would have packed, without its per-argument
cost."""

from __future__ import annotations

from redis.connection import PythonRespSerializer

from detector.index.redis.cluster import packed_hmget


def test_a_packed_hmget_is_what_redis_py_packs() -> None:
    packer = PythonRespSerializer(
        1_000_000, lambda v: v if isinstance(v, bytes) else str(v).encode()
    )
    for key, fields in (("nd:{a/3}:bh:v384:2:1f", [0, 9, 10, 1023]), (b"k\xc3\xa9", [5])):
        want = b"".join(packer.pack("HMGET", key, *fields))
        assert packed_hmget(key, fields) == want
