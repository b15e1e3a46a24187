"""The handlers of the notification routes (:mod:`.notify_routes`)."""

from __future__ import annotations

import os

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from shardsched.core.notify import Channel, Rule
from shardsched.core.notify_addresses import networks_from, url_refusal
from shardsched.core.notify_views import Removed, TestSent
from shardsched.ops import notify
from shardsched.ops.notify_alerts import AmPayload, take_alerts
from shardsched.router import http
from shardsched.router.base import ApiBase
from shardsched.router.guards import unbound
from shardsched.router.schemas import DeliveryQuery

_channel_decoder = msgspec.json.Decoder(Channel)
_rule_decoder = msgspec.json.Decoder(Rule)
_alerts_decoder = msgspec.json.Decoder(AmPayload)


def _opt(value: object) -> str | None:
    return None if value is msgspec.UNSET else str(value)


class NotifyHandlers(ApiBase):
    async def list_channels(self, request: Request) -> Response:
        unbound(request)
        return http.json_response(await self._run(notify.list_channels(self.dep)))

    async def put_channel(self, request: Request) -> Response:
        unbound(request)
        body = await http.decode(request, _channel_decoder)
        name = request.path_params["name"]
        why = url_refusal(body.url, networks_from(os.environ))
        if why is not None:
            raise http.ApiError(422, "validation_error", why, {"field": "$.url"})
        view, created = await self._run(notify.put_channel(self.dep, name, body))
        return http.json_response(view, 201 if created else 200)

    async def delete_channel(self, request: Request) -> Response:
        unbound(request)
        name = request.path_params["name"]
        await self._run(notify.delete_channel(self.dep, name))
        return http.json_response(Removed(removed=name))

    async def test_channel(self, request: Request) -> Response:
        unbound(request)
        msg_id = await self._run(notify.test_channel(self.dep, request.path_params["name"]))
        return http.json_response(TestSent(id=msg_id), 201)

    async def list_rules(self, request: Request) -> Response:
        unbound(request)
        return http.json_response(await self._run(notify.list_rules(self.dep)))

    async def create_rule(self, request: Request) -> Response:
        unbound(request)
        body = await http.decode(request, _rule_decoder)
        view, _ = await self._run(notify.put_rule(self.dep, body))
        return http.json_response(view, 201)

    async def put_rule(self, request: Request) -> Response:
        unbound(request)
        body = await http.decode(request, _rule_decoder)
        rule_id = request.path_params["rule_id"]
        view, created = await self._run(notify.put_rule(self.dep, body, rule_id))
        return http.json_response(view, 201 if created else 200)

    async def delete_rule(self, request: Request) -> Response:
        unbound(request)
        rule_id = request.path_params["rule_id"]
        await self._run(notify.delete_rule(self.dep, rule_id))
        return http.json_response(Removed(removed=rule_id))

    async def list_deliveries(self, request: Request) -> Response:
        unbound(request)
        q: DeliveryQuery = http.query(request, DeliveryQuery)
        op = notify.deliveries(self.dep, q.limit, _opt(q.channel), _opt(q.state))
        return http.json_response(await self._run(op))

    async def get_delivery(self, request: Request) -> Response:
        unbound(request)
        msg_id = request.path_params["msg_id"]
        return http.json_response(await self._run(notify.delivery(self.dep, msg_id)))

    async def take_alerts(self, request: Request) -> Response:
        body = await http.decode(request, _alerts_decoder)
        return http.json_response(await self._run(take_alerts(self.dep, body)))
