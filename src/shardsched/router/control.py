"""Handlers of the runs across jobs: the failure inbox, what is under way now, and an
operator's control over runs under way (cancel a run, cancel a DAG run)."""

from __future__ import annotations

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from shardsched.core.errors import DagRunNotFound, RunNotFound, ValidationError
from shardsched.core.ids import dag_run_id_of
from shardsched.core.instants import to_ms
from shardsched.core.labels import parse_label_filter
from shardsched.core.models import RunState
from shardsched.core.params import CancelRequest, RetryRequest
from shardsched.ops import bulk_retry, control, listing
from shardsched.ops.active import Active, Filters, active_page
from shardsched.ops.recent import annotate
from shardsched.router import http
from shardsched.router.base import ApiBase
from shardsched.router.guards import who
from shardsched.router.schemas import FailureQuery, opt

_cancel_decoder = msgspec.json.Decoder(CancelRequest)
_retry_decoder = msgspec.json.Decoder(RetryRequest)
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
        page = await self._run(op)
        await self._run(annotate(self.dep, page.runs, tails=True))
        return http.json_response(page)

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
        page = await self._run(op)
        await self._run(annotate(self.dep, page.runs, tails=False))
        return http.json_response(page)

    async def cancel_run(self, request: Request) -> Response:
        rid = await self._run_id(request)
        body = await http.optional_body(request, _cancel_decoder) or CancelRequest()
        op = control.cancel_run(self.dep, rid, who(request).name, body.reason)
        return http.json_response(await self._run(op))

    async def cancel_dag_run(self, request: Request) -> Response:
        drid = dag_run_id_of(request.path_params["dag_run_id"])
        await self._visible(request, drid, DagRunNotFound(drid))
        body = await http.optional_body(request, _cancel_decoder) or CancelRequest()
        op = control.cancel_dag_run(self.dep, drid, who(request).name, body.reason)
        return http.json_response(await self._run(op))

    async def retry_runs(self, request: Request) -> Response:
        """Retry dead-lettered runs, named or by the failure inbox's filter; a team's token
        retries only its own (others are refused as unknown)."""
        body: RetryRequest = await http.decode(request, _retry_decoder)
        principal = who(request)
        if body.run_ids is None:
            since = None if body.since is None else to_ms(body.since)
            until = None if body.until is None else to_ms(body.until)
            op = bulk_retry.selected(self.dep, since, until, body.name_prefix, principal.prefixes)
            run_ids: list[str] = await self._run(op)
        else:
            run_ids = []
            for rid in body.run_ids:
                await self._run_visible(request, rid)
                run_ids.append(rid)
        op = bulk_retry.retry_many(self.dep, run_ids, principal.name, body.dry_run)
        return http.json_response(await self._run(op), 200 if body.dry_run else 201)

    async def _run_visible(self, request: Request, rid: str) -> None:
        await self._visible(request, rid, RunNotFound(rid))
