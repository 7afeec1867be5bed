"""A round trip's commands as one RESP buffer on one connection.

redis-py's pipeline packs every argument in Python (an isinstance chain and an encode
each): a text lookup names 28 buckets, a vector lookup 548, and a commit's shard scripts
carry a dozen arguments a document, so packing cost more than Redis took to answer. The
native packer (detector._native.resp_commands) writes the whole buffer at once, from the
arguments redis-py's Encoder takes (bytes, str, int, float); the replies are read and
parsed by the client itself (`parse_response`: hiredis, and the same response callbacks a
pipeline applies), so callers see what a pipeline would have given them. Without the
native module the pipeline does it: the reference, which tests hold the packer to.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import redis

from ...kernels import native_module

_native = native_module()
PACK = getattr(_native, "resp_commands", None)


def execute(client: redis.Redis, commands: Sequence[Sequence[Any]]) -> list[Any]:
    """The replies to `commands`, in order, as a pipeline (transaction=False) gives them:
    the first error reply is raised once every reply is read."""
    c: Any = client  # redis-py's connection calls are untyped
    if PACK is None:
        pipe = c.pipeline(transaction=False)
        for command in commands:
            pipe.execute_command(*command)
        return list(pipe.execute())
    if not commands:
        return []
    packed = PACK(commands)
    pool = c.connection_pool
    conn = pool.get_connection()
    try:
        conn.send_packed_command([packed])
        replies: list[Any] = []
        error: redis.ResponseError | None = None
        for command in commands:
            try:
                replies.append(c.parse_response(conn, command[0]))
            except redis.ResponseError as exc:
                replies.append(exc)
                error = error or exc
    except BaseException:
        # the replies still owed would be read as the next round trip's
        conn.disconnect()
        raise
    finally:
        pool.release(conn)
    if error is not None:
        raise error
    return replies


def error_code(exc: redis.ResponseError) -> str:
    """An error reply's code, its first word (WRONGTYPE, NOREPLICAS, ...), as the server
    sent it: redis-py's pipeline (the path without the packer) puts in front where in the
    pipeline the reply came."""
    words = str(exc).rpartition(" of pipeline caused error: ")[2].split(maxsplit=1)
    return words[0] if words else ""
