"""Handlers of the runs across jobs: the failure inbox, what is under way now, and an
operator's control over runs under way (cancel a run, cancel a DAG run)."""

from __future__ import annotations

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from shardsched.core.errors import DagRunNotFound, ValidationError
from shardsched.core.labels import parse_label_filter
from shardsched.core.models import RunState
from shardsched.core.params import CancelRequest
from shardsched.ops import control, listing
from shardsched.ops.active import Active, Filters, active_page
from shardsched.router import http
from shardsched.router.base import ApiBase
from shardsched.router.guards import who
from shardsched.router.schemas import FailureQuery, opt

_cancel_decoder = msgspec.json.Decoder(CancelRequest)
_UNDER_WAY = frozenset({"running", "queued", "scheduled", "waiting", "retrying"})


class ControlHandlers(ApiBase):
    async def list_failures(self, request: Request) -> Response:
        q: FailureQuery = http.query(request, FailureQuery)
        if q.state in _UNDER_WAY:
            return await self._under_way(request, q)
        try:
            states = frozenset(RunState(s) for s in q.state.split(","))
        except ValueError:
            raise http.validation(f"no such run state in {q.state!r}", "$.state") from None
        for name in ("job", "queue", "worker", "label"):
            if getattr(q, name) is not msgspec.UNSET:
                raise http.validation(
                    f"?{name}= filters runs under way (state running, queued, waiting or"
                    " retrying); the failure inbox filters by name_prefix",
                    f"$.{name}",
                )
        op = listing.failures_page(
            self.dep,
            q.limit,
            *http.cursor(q),
            states,
            http.ms(q.since),
            http.ms(q.until),
            opt(q.name_prefix),
            who(request).prefixes,
        )
        return http.json_response(await self._run(op))

    async def _under_way(self, request: Request, q: FailureQuery) -> Response:
        try:
            labels = {} if q.label is msgspec.UNSET else parse_label_filter(q.label)
        except ValidationError as exc:
            raise http.validation(exc.message, exc.field) from None
        within = who(request).prefixes
        if q.name_prefix is not msgspec.UNSET:
            within = tuple(p for p in within if q.name_prefix.startswith(p)) or (
                () if within else (q.name_prefix,)
            )
            if not within:  # a team's token asked for a prefix outside its own
                return http.json_response({"runs": [], "next_cursor": None})
        filters = Filters(opt(q.job), opt(q.queue), opt(q.worker), labels, within)
        op = active_page(self.dep, Active.parse(q.state), q.limit, *http.cursor(q), filters)
        return http.json_response(await self._run(op))

    async def cancel_run(self, request: Request) -> Response:
        rid = await self._run_id(request)
        body = await http.optional_body(request, _cancel_decoder) or CancelRequest()
        op = control.cancel_run(self.dep, rid, who(request).name, body.reason)
        return http.json_response(await self._run(op))

    async def cancel_dag_run(self, request: Request) -> Response:
        drid = request.path_params["dag_run_id"]
        await self._visible(request, drid, DagRunNotFound(drid))
        body = await http.optional_body(request, _cancel_decoder) or CancelRequest()
        op = control.cancel_dag_run(self.dep, drid, who(request).name, body.reason)
        return http.json_response(await self._run(op))
