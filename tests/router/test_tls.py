"""TLS everywhere it travels, on real processes: a redis-server that speaks only TLS and
checks client certificates, a CA made here, the trio client, the SDK, a CLI process, and
the API over HTTPS. And credentials that never go through argv."""

from __future__ import annotations

import ssl
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import trio

from conftest import RedisServer, child_env, shardsched_cmd, wait_until
from shardsched import Client, JobSpec, OnceSchedule, ops
from shardsched.core.instants import from_ms
from shardsched.ops import listing
from shardsched.router.app import create_app
from shardsched.runtime.redis_server import free_cluster_port, free_port, redis_server_args
from shardsched.service import TlsFiles, serve_http
from shardsched.shard.manager import ShardManager
from shardsched.store.drive import drive_async
from shardsched.store.redis import Redis, RedisConnectionError, connect
from shardsched.worker.worker import Worker
from waits import start_redis


@dataclass
class Pki:
    ca: Path
    rogue_ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    node_cert: Path  #: names localhost and 127.0.0.1: cluster nodes are reported by IP
    node_key: Path


def openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_ca(name: str, d: Path) -> None:
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key",
            "-out", f"{name}.crt", "-days", "2", "-subj", f"/CN={name}", cwd=d)  # fmt: skip


def make_cert(name: str, san: str, d: Path) -> None:
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out",
            f"{name}.csr", "-subj", f"/CN={name}", cwd=d)  # fmt: skip
    (d / f"{name}.ext").write_text(f"subjectAltName={san}\n")
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", f"{name}.crt", "-days", "2", "-extfile",
            f"{name}.ext", cwd=d)  # fmt: skip


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    d = tmp_path_factory.mktemp("pki")
    make_ca("ca", d)
    make_ca("rogue", d)
    make_cert("server", "DNS:localhost", d)  # the name only: 127.0.0.1 must not verify
    make_cert("client", "DNS:client", d)
    make_cert("node", "DNS:localhost,IP:127.0.0.1", d)
    return Pki(
        d / "ca.crt",
        d / "rogue.crt",
        d / "server.crt",
        d / "server.key",
        d / "client.crt",
        d / "client.key",
        d / "node.crt",
        d / "node.key",
    )


@pytest.fixture(scope="module")
def tls_port(pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """A redis-server with TLS only (no plain port) that requires a client certificate."""
    data = tmp_path_factory.mktemp("tls-redis")
    port = free_port()
    args = redis_server_args(0, data)
    args += ["--tls-port", str(port), "--tls-cert-file", str(pki.server_cert)]
    args += ["--tls-key-file", str(pki.server_key), "--tls-ca-cert-file", str(pki.ca)]
    args += ["--tls-auth-clients", "yes"]
    proc = start_redis(args, data / "redis.log").proc
    yield port
    proc.terminate()
    proc.wait(timeout=10)


def tls_url(port: int, pki: Pki, host: str = "localhost", ca: Path | None = None) -> str:
    return (
        f"rediss://{host}:{port}/0?ssl_ca_certs={ca or pki.ca}"
        f"&ssl_certfile={pki.client_cert}&ssl_keyfile={pki.client_key}"
    )


async def test_node_and_worker_run_a_job_over_mutual_tls(tls_port: int, pki: Pki) -> None:
    redis = Redis(tls_url(tls_port, pki), size=8)
    try:
        assert await redis.execute("PING") == b"PONG"
        dep = await drive_async(ops.open_deployment("tls", 4), redis)
        async with trio.open_nursery() as nursery:
            await nursery.start(ShardManager(redis, dep, node_id="n", renew_every_s=0.5).run)
            await nursery.start(Worker(redis, dep, "w", concurrency=2).run)
            spec = JobSpec(name="t", schedule=OnceSchedule(at=from_ms(0)), command="echo over tls")
            job_id = (await drive_async(ops.create_job(dep, spec), redis)).job_id

            async def output() -> str | None:
                runs = (await drive_async(listing.runs_page(dep, job_id, 5), redis)).runs
                if runs and runs[0].state == "succeeded":
                    return (await drive_async(ops.get_output(dep, runs[0].run_id), redis)).output
                return None

            assert await wait_until(output, timeout=20) == "over tls\n"
            nursery.cancel_scope.cancel()
    finally:
        await redis.aclose()


@pytest.mark.parametrize(
    "case",
    ["wrong host name", "untrusted CA", "no client certificate", "plain text"],
)
async def test_tls_verifies_the_server_and_is_verified(tls_port: int, pki: Pki, case: str) -> None:
    url = {
        "wrong host name": tls_url(tls_port, pki, host="127.0.0.1"),
        "untrusted CA": tls_url(tls_port, pki, ca=pki.rogue_ca),
        "no client certificate": f"rediss://localhost:{tls_port}/0?ssl_ca_certs={pki.ca}",
        "plain text": f"redis://localhost:{tls_port}/0",
    }[case]
    want = {
        "wrong host name": "mismatch",
        "untrusted CA": "certificate verify failed",
        "no client certificate": "client certificate",
        "plain text": "rediss://",
    }[case]
    redis = Redis(url, retry_for=0.2, log_failures=False)
    try:
        with pytest.raises(RedisConnectionError) as refused:
            await redis.execute("PING")
        assert want in str(refused.value), str(refused.value)
    finally:
        await redis.aclose()


def test_the_sdk_speaks_tls(tls_port: int, pki: Pki) -> None:
    with Client(tls_url(tls_port, pki), namespace="tls-sdk") as client:
        spec = JobSpec(name="s", schedule=OnceSchedule(at=from_ms(4102444800000)), command="true")
        job_id = client.add_job(spec).job_id
        assert client.get_job(job_id).name == "s"


@pytest.mark.parametrize("opt_out", ["ssl_cert_reqs=none", "ssl_check_hostname=false"])
def test_the_sdk_refuses_to_turn_verification_off(tls_port: int, pki: Pki, opt_out: str) -> None:
    with pytest.raises(ValueError, match="unknown Redis URL option"):
        Client(f"{tls_url(tls_port, pki)}&{opt_out}", namespace="tls-sdk")


def test_the_sdk_checks_the_server_s_name(tls_port: int, pki: Pki) -> None:
    """The server's certificate names localhost, not 127.0.0.1: by IP it must not verify."""
    with pytest.raises(Exception, match=r"(?i)certificate|hostname|ip address"):
        Client(tls_url(tls_port, pki, host="127.0.0.1"), namespace="tls-sdk")


def test_a_cli_process_over_tls(tls_port: int, pki: Pki) -> None:
    out = subprocess.run(
        shardsched_cmd("status", "--json"),
        capture_output=True,
        text=True,
        env={**child_env(), "SHARDSCHED_REDIS_URL": tls_url(tls_port, pki)},
        timeout=60,
    )
    assert out.returncode in (0, 1) and '"shards"' in out.stdout, out.stderr
    bad = subprocess.run(
        shardsched_cmd("status", "--redis", f"rediss://localhost:{tls_port}/0?ssl_ca_certs=/nope"),
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=60,
    )
    assert bad.returncode != 0 and "TLS files" in bad.stderr, bad.stderr


async def test_the_api_over_https(nursery, redis, dep, pki: Pki) -> None:
    tls = TlsFiles(str(pki.server_cert), str(pki.server_key))
    binds = await nursery.start(
        lambda task_status: serve_http(
            create_app(redis, dep), "127.0.0.1:0", tls=tls, task_status=task_status
        )
    )
    assert binds[0].startswith("https://")
    port = binds[0].rsplit(":", 1)[1]
    async with httpx.AsyncClient(verify=ssl.create_default_context(cafile=pki.ca)) as client:
        reply = await client.get(f"https://localhost:{port}/healthz")
        assert reply.status_code == 200
        assert (await client.get(f"https://localhost:{port}/api/v1/jobs")).status_code == 401
    async with httpx.AsyncClient() as plain:
        with pytest.raises(httpx.HTTPError):
            await plain.get(f"http://localhost:{port}/healthz")


async def test_a_thousand_silent_tls_connections_do_not_stop_healthz(
    nursery, redis, dep, pki: Pki
) -> None:
    """A TLS handshake gets the read deadline: a thousand connections that never send a
    ClientHello neither block /healthz nor hold their slots past it."""
    tls = TlsFiles(str(pki.server_cert), str(pki.server_key))
    binds = await nursery.start(
        lambda task_status: serve_http(
            create_app(redis, dep), "127.0.0.1:0", tls=tls, read_timeout_s=2,
            task_status=task_status,
        )
    )  # fmt: skip
    port = int(binds[0].rsplit(":", 1)[1])
    silent = [await trio.open_tcp_stream("127.0.0.1", port) for _ in range(1000)]
    context = ssl.create_default_context(cafile=pki.ca)
    async with httpx.AsyncClient(verify=context, timeout=10) as client:
        started = trio.current_time()
        reply = await client.get(f"https://localhost:{port}/healthz")
        assert reply.status_code == 200
        assert trio.current_time() - started < 3, "healthz waited behind silent handshakes"
    with trio.fail_after(10):  # the server gives up on each after the read timeout
        for stream in silent:
            assert await stream.receive_some(100) == b""
    for stream in silent:
        await stream.aclose()


@pytest.mark.slow  # out of the default run, which stays near 8 min
def test_the_redis_password_comes_from_the_environment_or_a_file(tmp_path: Path) -> None:
    server = RedisServer(tmp_path / "redis")
    server.start()
    try:
        subprocess.run(
            ["redis-cli", "-p", str(server.port), "CONFIG", "SET", "requirepass", "s3cret"],
            check=True,
            capture_output=True,
        )
        url = f"redis://127.0.0.1:{server.port}/0"

        def status(*extra: str, **env: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                shardsched_cmd("status", "--json", *extra),
                capture_output=True,
                text=True,
                env={**child_env(), **env},
                timeout=60,
            )

        refused = status("--redis", url)
        assert refused.returncode != 0 and "password" in refused.stderr.lower()
        by_env = status("--redis", url, SHARDSCHED_REDIS_PASSWORD="s3cret")
        assert by_env.returncode in (0, 1) and '"shards"' in by_env.stdout, by_env.stderr
        (tmp_path / "pw").write_text("s3cret\n")
        by_file = status("--redis", url, "--redis-password-file", str(tmp_path / "pw"))
        assert by_file.returncode in (0, 1) and '"shards"' in by_file.stdout, by_file.stderr
        in_argv = status("--redis", f"redis://:s3cret@127.0.0.1:{server.port}/0")
        assert "where ps shows it" in in_argv.stderr
    finally:
        server.stop()


def redis_cli_tls(pki: Pki) -> list[str]:
    return ["redis-cli", "--tls", "--cacert", str(pki.ca), "--cert", str(pki.client_cert),
            "--key", str(pki.client_key)]  # fmt: skip


@pytest.fixture(scope="module")
def tls_cluster(pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[int]]:
    """Three Redis Cluster masters that speak TLS only, to clients and on the cluster bus."""
    ports = [free_cluster_port() for _ in range(3)]
    logs = []
    for port in ports:
        d = tmp_path_factory.mktemp(f"tls-node-{port}")
        args = redis_server_args(0, d)
        args += ["--cluster-enabled", "yes", "--cluster-config-file", str(d / "nodes.conf")]
        args += ["--cluster-node-timeout", "1000", "--tls-port", str(port), "--tls-cluster", "yes"]
        args += ["--tls-cert-file", str(pki.node_cert), "--tls-key-file", str(pki.node_key)]
        args += ["--tls-ca-cert-file", str(pki.ca), "--tls-auth-clients", "optional"]
        logs.append(start_redis(args, d / "redis.log"))
    procs = [log.proc for log in logs]
    try:
        create = [*redis_cli_tls(pki), "--cluster", "create"]
        create += [f"127.0.0.1:{p}" for p in ports] + ["--cluster-yes"]
        subprocess.run(create, check=True, capture_output=True, timeout=60)
        for log in logs:  # each node's log says when its cluster state turns ok
            log.wait_for_sync("Cluster state changed: ok", timeout=30)
        yield ports
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=10)


def cluster_url(ports: list[int], pki: Pki) -> str:
    hosts = ",".join(f"127.0.0.1:{p}" for p in ports)
    return (
        f"rediss+cluster://{hosts}?ssl_ca_certs={pki.ca}"
        f"&ssl_certfile={pki.client_cert}&ssl_keyfile={pki.client_key}"
    )


async def test_a_redis_cluster_over_tls(tls_cluster: list[int], pki: Pki) -> None:
    """A node and a worker on a TLS-only cluster run jobs on every master; the SDK too."""
    redis = connect(cluster_url(tls_cluster, pki), size=8)
    try:
        dep = await drive_async(ops.open_deployment("tlsc", 16), redis)
        async with trio.open_nursery() as nursery:
            await nursery.start(ShardManager(redis, dep, node_id="n", renew_every_s=0.5).run)
            await nursery.start(Worker(redis, dep, "w", concurrency=4).run)
            once = OnceSchedule(at=from_ms(0))
            specs = [JobSpec(name=f"c{i}", schedule=once, command="true") for i in range(12)]
            created = await drive_async(ops.create_jobs(dep, specs), redis)

            async def all_ran() -> bool:
                for c in created:
                    page = await drive_async(listing.runs_page(dep, c.job_id, 5), redis)
                    if not any(r.state == "succeeded" for r in page.runs):
                        return False
                return True

            await wait_until(all_ran, timeout=30)
            nursery.cancel_scope.cancel()
    finally:
        await redis.aclose()

    def sdk() -> None:
        with Client(cluster_url(tls_cluster, pki), namespace="tlsc") as client:
            assert client.get_job(created[0].job_id).name == "c0"

    await trio.to_thread.run_sync(sdk)


async def test_sentinels_and_their_servers_over_tls_with_an_acl_user(tmp_path, pki: Pki) -> None:  # type: ignore[no-untyped-def]
    """``rediss+sentinel://app:…@…/service?ssl_…``: sentinels and servers that speak only
    TLS, an ACL user for the servers; the trio client, the SDK (redis-py's Sentinel) and a
    CLI process find the primary, and the trio client follows a failover there."""
    from shardsched.runtime.redis_server import stop_process
    from shardsched.runtime.sentinel_group import ask_sentinel, start_sentinel_group

    group = await start_sentinel_group(
        tmp_path / "tls-ha", tls=(pki.node_cert, pki.node_key, pki.ca), user="app"
    )
    client = connect(group.url, size=2, retry_for=30)
    try:
        assert group.url.startswith("rediss+sentinel://app:")
        await client.execute("SET", "k", "v")
        assert (await client.execute("ACL", "WHOAMI")) == b"app"
        old = group.primary_port
        await ask_sentinel(group.sentinel_url(group.sentinel_ports[0]), "failover", "shardsched")
        with trio.fail_after(30):
            while client.url.port == old:
                try:
                    await client.execute("SET", "k", "w")
                except RedisConnectionError:
                    pass  # the sentinels had the old primary close its connections
                await trio.sleep(0.1)  # a client's steady writes, until it moves
        assert await client.execute("GET", "k") == b"w"
        sdk = await trio.to_thread.run_sync(Client, group.url, "tls-ha")
        try:
            assert sdk.deployment.namespace == "tls-ha"
        finally:
            sdk.close()
        done = await trio.run_process(
            shardsched_cmd("status", "--redis", group.url, "--namespace", "tls-ha"),
            capture_stdout=True, capture_stderr=True, check=False, env=child_env(),
        )  # fmt: skip
        assert b"Traceback" not in done.stderr, done.stderr.decode()
    finally:
        await client.aclose()
        for proc in group.procs.values():
            await stop_process(proc, grace=2)
