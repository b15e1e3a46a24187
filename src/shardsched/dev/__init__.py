"""``shardsched dev``: everything in one command on an embedded redis-server (:mod:`.run`)
and how it keeps its children alive (:mod:`.supervisor`). The redis-servers it starts
come from :mod:`shardsched.runtime.redis_server`, as the benchmarks' and the tests' do."""

from shardsched.dev.run import REDIS_URL_FILE, TOKEN_FILE, main, run_dev, write_private
from shardsched.runtime.redis_server import (
    cluster_node_args,
    free_cluster_port,
    free_port,
    redis_server_args,
    spawn,
    start_cluster,
    stop_process,
    wait_for_redis,
)

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
