"""The API's operations side: health, readiness, status, metrics, the cluster view, API
tokens, and the internal worker protocol."""

from __future__ import annotations

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from shardsched.core.access import TokenRequest
from shardsched.core.concurrency import KEY, KeyList, KeyView, LimitRequest
from shardsched.ops import access, audit, concurrency, protocol, tokens
from shardsched.ops.cluster import ClusterView, cluster_view, list_workers
from shardsched.ops.lag_history import lag_history
from shardsched.ops.status import status_view
from shardsched.router import http
from shardsched.router.base import ApiBase
from shardsched.router.guards import as_worker, unbound, who
from shardsched.router.openapi import openapi_document
from shardsched.router.schemas import AuditQuery, Health, LagQuery, Readiness, TokenLogQuery
from shardsched.router.server import STOPPING_KEY
from shardsched.runtime.metrics import refresh_cluster

_heartbeat_decoder = msgspec.json.Decoder(protocol.HeartbeatRequest)
_claim_decoder = msgspec.json.Decoder(protocol.ClaimRequest)
_renew_decoder = msgspec.json.Decoder(protocol.RenewRequest)
_complete_decoder = msgspec.json.Decoder(protocol.CompleteRequest)
_token_decoder = msgspec.json.Decoder(TokenRequest)
_limits_decoder = msgspec.json.Decoder(LimitRequest)


def _key(request: Request) -> str:
    """The concurrency key a path names (a 422 for one that cannot be a key)."""
    key: str = request.path_params["key"]
    if not KEY.match(key):
        raise http.validation(
            "not a concurrency key: letters, digits and ._:@=+- (no spaces, slashes or "
            "braces), at most 128, starting with a letter or digit",
            "key",
        )
    return key


class AdminHandlers(ApiBase):
    """Handlers of the operations, token and worker-protocol routes."""

    async def cluster(self, request: Request) -> Response:
        unbound(request)
        return http.json_response(await self._run(cluster_view(self.dep)))

    async def workers(self, request: Request) -> Response:
        unbound(request)
        return http.json_response(await self._run(list_workers(self.dep)))

    async def worker_heartbeat(self, request: Request) -> Response:
        worker_id = request.path_params["worker_id"]
        as_worker(request, worker_id)
        body = await http.decode(request, _heartbeat_decoder)
        return http.json_response(await self._run(protocol.heartbeat(self.dep, worker_id, body)))

    async def worker_claim(self, request: Request) -> Response:
        body = await http.decode(request, _claim_decoder)
        as_worker(request, body.worker_id)
        return http.json_response(await self._run(protocol.claim(self.dep, body)))

    async def worker_renew(self, request: Request) -> Response:
        body = await http.decode(request, _renew_decoder)
        as_worker(request, body.worker_id)
        rid = request.path_params["run_id"]
        return http.json_response(await self._run(protocol.renew(self.dep, rid, body)))

    async def worker_complete(self, request: Request) -> Response:
        body = await http.decode(request, _complete_decoder)
        as_worker(request, body.worker_id)
        rid = request.path_params["run_id"]
        return http.json_response(await self._run(protocol.complete(self.dep, rid, body)))

    async def healthz(self, request: Request) -> Response:
        return http.json_response(Health(status="ok"))

    async def readyz(self, request: Request) -> Response:
        """Ready when every shard is owned by a live node and this process is not stopping
        (a load balancer then sends it nothing new while it drains); says which and by
        whom."""
        view: ClusterView = await self._run(cluster_view(self.dep))
        live = {n.node_id for n in view.nodes}
        unowned = [s.shard for s in view.shards if s.owner not in live]
        body = Readiness(
            ready=not unowned,
            shards=len(view.shards),
            owned=len(view.shards) - len(unowned),
            unowned=unowned,
            owners={str(s.shard): s.owner for s in view.shards if s.owner in live},
        )
        stopping = request.scope.get("state", {}).get(STOPPING_KEY)
        if stopping is not None and stopping.is_set():
            body.ready, body.stopping = False, True
        return http.json_response(body, 200 if body.ready else 503)

    async def status(self, request: Request) -> Response:
        unbound(request)
        return http.json_response(await self._run(status_view(self.dep)))

    async def lag_history(self, request: Request) -> Response:
        q: LagQuery = http.query(request, LagQuery)
        op = lag_history(self.dep, http.ms(q.since), http.ms(q.until))
        return http.json_response(await self._run(op))

    async def prometheus(self, request: Request) -> Response:
        """This process's series, and the cluster's state read from Redis now."""
        try:
            refresh_cluster(self.metrics, await self._run(status_view(self.dep)))
        except http.ApiError:
            pass  # Redis unreachable: still export what this process counted
        body, content_type = self.metrics.render()
        return Response(body, media_type=content_type)

    async def openapi(self, request: Request) -> Response:
        return http.json_response(openapi_document())

    async def audit(self, request: Request) -> Response:
        """The audit over the whole deployment (the ledger and the timers; heavy on a big
        one: it reads every job's history)."""
        unbound(request)
        q: AuditQuery = http.query(request, AuditQuery)
        op = audit.audit(
            self.dep,
            q.settle_s,
            q.late_after_s,
            stranded_after_s=q.stranded_after_s,
            reference=q.reference,
        )
        return http.json_response(await self._run(op))

    async def internal_openapi(self, request: Request) -> Response:
        """The worker protocol's routes, apart from the public API's."""
        return http.json_response(openapi_document(internal=True))

    async def create_token(self, request: Request) -> Response:
        unbound(request)
        body = await http.decode(request, _token_decoder)
        op = tokens.create_token(self.dep, body, who(request).name)
        return http.json_response(await self._run(op), 201)

    async def list_tokens(self, request: Request) -> Response:
        unbound(request)
        return http.json_response(await self._run(tokens.list_tokens(self.dep)))

    async def revoke_token(self, request: Request) -> Response:
        unbound(request)
        name = request.path_params["name"]
        op = tokens.revoke_token(self.dep, name, who(request).name)
        return http.json_response(await self._run(op))

    async def token_log(self, request: Request) -> Response:
        unbound(request)
        q: TokenLogQuery = http.query(request, TokenLogQuery)
        return http.json_response(await self._run(tokens.token_log(self.dep, q.limit)))

    async def list_concurrency_keys(self, request: Request) -> Response:
        """Every key for an unbound token; a team's token sees its own keys alone."""
        listed: KeyList = await self._run(concurrency.list_keys(self.dep))
        caller = who(request)
        listed.keys = [k for k in listed.keys if access.visible_key(caller, k.key)]
        return http.json_response(listed)

    async def get_concurrency_key(self, request: Request) -> Response:
        key = _key(request)
        if not access.visible_key(who(request), key):  # another team's: as an unused key
            return http.json_response(KeyView(key=key))
        return http.json_response(await self._run(concurrency.get_key(self.dep, key)))

    async def set_concurrency_limits(self, request: Request) -> Response:
        unbound(request)
        key = _key(request)
        body = await http.decode(request, _limits_decoder)
        op = concurrency.set_limits(self.dep, key, body, who(request).name)
        return http.json_response(await self._run(op))

    async def clear_concurrency_limits(self, request: Request) -> Response:
        unbound(request)
        op = concurrency.clear_limits(self.dep, _key(request), who(request).name)
        return http.json_response(await self._run(op))
