"""``shardsched dev``: everything in one command on an embedded redis-server (:mod:`.run`),
the servers it and the tests start (:mod:`.embedded`), and how it keeps its children
alive (:mod:`.supervisor`)."""

from shardsched.dev.embedded import (
    cluster_node_args,
    free_cluster_port,
    free_port,
    redis_server_args,
    spawn,
    start_cluster,
    stop_process,
    wait_for_redis,
)
from shardsched.dev.run import REDIS_URL_FILE, TOKEN_FILE, main, run_dev, write_private

__all__ = [
    "REDIS_URL_FILE",
    "TOKEN_FILE",
    "cluster_node_args",
    "free_cluster_port",
    "free_port",
    "main",
    "redis_server_args",
    "run_dev",
    "spawn",
    "start_cluster",
    "stop_process",
    "wait_for_redis",
    "write_private",
]
