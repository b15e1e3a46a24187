"""Notifications through the CLI and the SDK (issue #32): the same operations as the API,
a clear message and a non-zero exit for what cannot work, and no secret on a command
line or in an answer."""

from __future__ import annotations

import json

import pytest
import trio

from conftest import cli, wait_until
from notify.receiver import receiver
from shardsched.core.errors import ConflictError, ValidationError
from shardsched.core.notify import Channel, Kind, Rule
from shardsched.sdk import Client


async def test_the_cli_manages_channels_and_rules_and_shows_deliveries(node, http) -> None:
    api = ("--api", str(http.base_url))
    with receiver() as rec:
        made = await cli(http, "notify", "channels", "set", "hook", "--webhook", rec.url,
                         "--secret-env", "HOOK_SECRET", "--header", "X-Team=data", *api,
                         env={"HOOK_SECRET": "from-env"})  # fmt: skip
        assert made.returncode == 0, made.stderr
        listed = await cli(http, "notify", "channels", "list", *api)
        assert "hook" in listed.stdout and "yes" in listed.stdout
        assert "from-env" not in listed.stdout
        rule = await cli(http, "notify", "rules", "add", "--on", "failed,dead_letter",
                         "--channel", "hook", "--label", "team=data", "--json", *api)  # fmt: skip
        assert rule.returncode == 0, rule.stderr
        rule_id = json.loads(rule.stdout)["id"]
        # as a table (no --json): one line naming the rule
        shown = await cli(
            http, "notify", "rules", "add", "--on", "missed", "--channel", "hook", *api
        )
        assert shown.returncode == 0 and shown.stdout.startswith("rule nr_"), shown.stderr
        other = shown.stdout.split()[1].rstrip(":")
        assert (await cli(http, "notify", "rules", "rm", other, *api)).returncode == 0
        table = await cli(http, "notify", "rules", "list", *api)
        assert rule_id in table.stdout and other not in table.stdout
        sent = await cli(http, "notify", "channels", "test", "hook", *api)
        assert sent.returncode == 0 and "test message" in sent.stdout, sent.stderr
        await wait_until(lambda: _any(rec.requests), timeout=30)
        assert rec.requests[0]["headers"]["X-Team"] == "data"
        assert rec.requests[0]["headers"]["X-Shardsched-Signature"].startswith("v1=")

        async def delivered() -> bool:
            shown = await cli(http, "notify", "deliveries", "--state", "delivered", *api)
            return "HTTP 200" in shown.stdout

        await wait_until(delivered, timeout=30)
        used = await cli(http, "notify", "channels", "rm", "hook", *api)
        assert used.returncode != 0 and rule_id in used.stderr
        # a DAG and a job named by name, as everywhere in the CLI; --on repeated adds up
        dag = {"name": "pipe", "schedule": {"type": "once", "at": "2099-01-01T00:00:00Z"},
               "tasks": [{"name": "t", "command": "true"}]}  # fmt: skip
        dag_id = (await http.post("/api/v1/dags", json=dag)).json()["dag_id"]
        scoped = await cli(http, "notify", "rules", "add", "--on", "failed", "--on",
                           "dead_letter", "--channel", "hook", "--dag", "pipe", "--json",
                           *api)  # fmt: skip
        assert scoped.returncode == 0, scoped.stderr
        made_rule = json.loads(scoped.stdout)
        assert made_rule["dag_id"] == dag_id and made_rule["events"] == ["failed", "dead_letter"]
        nowhere = await cli(http, "notify", "rules", "add", "--on", "failed", "--channel",
                            "hook", "--dag", "no-such-pipe", *api)  # fmt: skip
        assert nowhere.returncode != 0 and "not_found" in nowhere.stderr
        bad = await cli(http, "notify", "rules", "add", "--on", "exploded", "--channel", "hook",
                        *api)  # fmt: skip
        assert bad.returncode != 0 and "exploded" in bad.stderr
        unset = await cli(http, "notify", "channels", "set", "x", "--webhook", rec.url,
                          "--secret-env", "NOT_SET_ANYWHERE", *api)  # fmt: skip
        assert unset.returncode != 0 and "NOT_SET_ANYWHERE" in unset.stderr
        for made_id in (rule_id, made_rule["id"]):
            assert (await cli(http, "notify", "rules", "rm", made_id, *api)).returncode == 0
        assert (await cli(http, "notify", "channels", "rm", "hook", *api)).returncode == 0


async def _any(items: list) -> bool:
    return bool(items)


async def test_the_sdk_manages_notifications(redis_server, dep) -> None:
    def tour() -> None:
        with Client(redis_server.url, dep.namespace) as client:
            view = client.put_channel("ops", Channel(kind="webhook", url="http://127.0.0.1:1/"))
            assert view.name == "ops" and not view.signed
            rule = client.add_rule(Rule(events=[Kind.FAILED], channels=["ops"]))
            assert [r.id for r in client.list_rules().rules] == [rule.id]
            with pytest.raises(ValidationError):
                client.add_rule(Rule(events=[Kind.FAILED], channels=["nope"]))
            with pytest.raises(ConflictError):
                client.delete_channel("ops")
            msg_id = client.test_channel("ops")
            assert client.get_delivery(msg_id).state == "pending"
            assert [d.id for d in client.list_deliveries().deliveries] == [msg_id]
            client.delete_rule(rule.id)
            client.delete_channel("ops")
            assert client.list_channels().channels == []

    await trio.to_thread.run_sync(tour)
