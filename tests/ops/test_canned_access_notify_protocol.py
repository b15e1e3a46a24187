"""Who asks and who is told, on canned replies (tests/canned.py), no server: who a bearer
token is and what a team's token sees, notification rules, messages and test sends, and
the seed's worker protocol (heartbeat, claim, renew, complete). Each pins what the
operation asks Redis and what it makes of each answer, refusals and error replies
included. The deployment and its runs: test_canned_deployment_and_runs.py; jobs and DAGs:
test_canned_dags_and_jobs.py; history and lists: test_canned_history_and_lists.py."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

import msgspec
import pytest

from canned import DAG, DEP, JOB, NOW_MS, NOW_S, SPEC, TIME, Canned, in_turn
from shardsched.core.access import ANONYMOUS, Principal, Scope, TokenRecord, token_hash
from shardsched.core.errors import (
    ConflictError,
    JobNotFound,
    NotFoundError,
    RunNotFound,
    ValidationError,
)
from shardsched.core.instants import from_ms
from shardsched.core.models import RetryPolicy
from shardsched.ops.access import teams, tokens
from shardsched.ops.deployment import protocol
from shardsched.ops.notify import manage
from shardsched.store.calls import ScriptReplyError

G = DEP.globals
RID = f"{JOB}:{NOW_MS}:1"
TEAM = Principal("team-a", frozenset({Scope.WRITE}), ("team-a-",))


# --- tokens and teams --------------------------------------------------------------------


def test_a_bearer_token_is_looked_up_by_its_hash_never_by_its_secret() -> None:
    record = TokenRecord(name="team-a", scopes=[Scope.WRITE], prefixes=["team-a-"],
                         created_at=5, created_by="me")  # fmt: skip
    canned = Canned(HGET=msgspec.json.encode(record))
    who = canned.drive(tokens.authenticate(DEP, "sst_secret"))
    (hget,) = canned.asked("HGET")
    assert hget.args == ("HGET", G.tokens, "h:" + token_hash("sst_secret"))
    assert (who.name, who.prefixes, who.may(Scope.WRITE), who.may(Scope.ADMIN)) == (
        "team-a", ("team-a-",), True, False,
    )  # fmt: skip
    assert Canned(HGET=None).drive(tokens.authenticate(DEP, "sst_revoked")) is None


def test_forget_token_says_whether_a_token_went_and_never_raises() -> None:
    canned = Canned(revoke_token=1)
    assert canned.drive(tokens.forget_token(DEP, "ci", "ops")) is True
    (call,) = canned.asked("revoke_token")
    assert call.keys == (G.tokens, G.tokenlog) and call.args == ("ci", "ops")
    assert Canned(revoke_token=0).drive(tokens.forget_token(DEP, "ghost", "ops")) is False


def test_has_tokens_counts_the_tokens_hash() -> None:
    assert Canned(HLEN=0).drive(tokens.has_tokens(DEP)) is False
    assert Canned(HLEN=3).drive(tokens.has_tokens(DEP)) is True


def test_the_token_log_is_read_newest_first_with_who_and_what() -> None:
    entries = [
        (f"{NOW_MS}-0".encode(), [b"a", b"revoked", b"by", b"ops", b"n", b"ci"]),
        (b"1700000000000-0", [b"a", b"created", b"by", b"me", b"n", b"ci", b"x", b"read"]),
    ]
    canned = Canned(XREVRANGE=entries)
    log = canned.drive(tokens.token_log(DEP, limit=2))
    assert canned.asked("XREVRANGE")[0].args == ("XREVRANGE", G.tokenlog, "+", "-", "COUNT", 2)
    assert [(a.action, a.by, a.name, a.detail) for a in log.acts] == [
        ("revoked", "ops", "ci", None), ("created", "me", "ci", "read"),
    ]  # fmt: skip
    assert log.acts[0].at == datetime.fromtimestamp(NOW_S, UTC)  # the entry id's time


def test_the_owner_of_a_dag_tasks_run_is_its_dag_read_by_name() -> None:
    canned = Canned(HGET=b'{"name":"etl","tasks":[]}')
    assert canned.drive(teams.owner_name(DEP, f"{DAG}.load:{NOW_MS}:2")) == "etl"
    (hget,) = canned.asked("HGET")
    assert hget.args == ("HGET", DEP.keys_for(DAG).job(DAG), "spec")
    assert Canned(HGET=None).drive(teams.owner_name(DEP, JOB)) is None
    assert Canned(HGET=b"[a later shape").drive(teams.owner_name(DEP, JOB)) is None


def test_a_teams_token_meets_another_teams_id_as_the_very_404_of_an_unknown_one() -> None:
    missing = JobNotFound(JOB)
    for spec in (b'{"name":"team-b-nightly"}', None):
        with pytest.raises(JobNotFound) as caught:
            Canned(HGET=spec).drive(teams.require_visible(DEP, TEAM, RID, missing))
        assert caught.value is missing
    own = Canned(HGET=b'{"name":"team-a-nightly"}')
    own.drive(teams.require_visible(DEP, TEAM, RID, missing))
    assert own.asked("HGET")[0].args[1] == DEP.keys_for(JOB).job(JOB)  # the run's job
    unbound = Canned()
    unbound.drive(teams.require_visible(DEP, ANONYMOUS, RID, missing))
    assert unbound.calls == [], "an unbound token costs no round trip"


def test_a_teams_put_may_take_a_free_id_or_its_own_but_not_another_teams() -> None:
    missing = JobNotFound(JOB)
    Canned(HGET=None).drive(teams.require_free_or_own(DEP, TEAM, JOB, missing))
    Canned(HGET=b'{"name":"team-a-x"}').drive(teams.require_free_or_own(DEP, TEAM, JOB, missing))
    with pytest.raises(JobNotFound):
        Canned(HGET=b'{"name":"team-b-x"}').drive(
            teams.require_free_or_own(DEP, TEAM, JOB, missing)
        )
    assert Canned().drive(teams.require_free_or_own(DEP, ANONYMOUS, JOB, missing)) is None


# --- notifications -----------------------------------------------------------------------


def test_rules_are_listed_by_id_passing_over_one_a_later_version_wrote() -> None:
    rule = b'{"events":["failed"],"channels":["ops"],"group_s":30}'
    canned = Canned(HGETALL=[b"nr_b", rule, b"nr_a", b'{"events": 5}', b"nr_c", rule])
    listed = canned.drive(manage.list_rules(DEP))
    assert canned.asked("HGETALL")[0].args == ("HGETALL", G.notify.rules)
    assert [(r.id, r.channels, r.group_s) for r in listed.rules] == [
        ("nr_b", ["ops"], 30.0), ("nr_c", ["ops"], 30.0),
    ]  # fmt: skip


def message(channel: bytes, state: bytes, **more: bytes) -> list[bytes]:
    """A message hash as HGETALL answers it (lua/notify_compose.lua's fields)."""
    body = msgspec.json.encode({"title": "3 runs failed", "total": 3})
    fields = {b"ch": channel, b"rule": b"nr_1", b"st": state, b"c": str(NOW_MS).encode()}
    fields |= {k.encode(): v for k, v in more.items()} | {b"body": body}
    return [part for pair in fields.items() for part in pair]


def test_deliveries_read_every_message_and_its_attempts_in_one_more_round() -> None:
    held = {"m3": message(b"ops", b"retrying", next=str(NOW_MS + 5000).encode()),
            "m1": message(b"pager", b"failed")}  # fmt: skip
    tried = [f"{NOW_MS}|retry|120|HTTP 503|busy".encode()]
    answers = {
        "ZRANGE": [b"m3", b"m2", b"m1"],  # m2's hash expired: passed over
        "HGETALL": lambda call: held.get(call.args[1].rsplit(":", 1)[1], []),
        "LRANGE": tried,
    }
    canned = Canned(**answers)
    ops_only = canned.drive(manage.deliveries(DEP, channel="ops"))
    assert canned.asked("ZRANGE")[0].args == ("ZRANGE", G.notify.messages, 0, 2000, "REV")
    assert canned.round_trips == 2 and len(canned.asked("HGETALL")) == 3
    (d,) = ops_only.deliveries
    assert (d.id, d.state, d.title, d.total, d.body) == ("m3", "retrying", "3 runs failed", 3, None)
    assert d.next_attempt_at == from_ms(NOW_MS + 5000)
    assert [(a.outcome, a.took_ms, a.answer) for a in d.attempts] == [
        ("retry", 120, "HTTP 503|busy")
    ]
    failed = Canned(**answers).drive(manage.deliveries(DEP, state="failed"))
    assert [d.id for d in failed.deliveries] == ["m1"]
    assert [d.id for d in Canned(**answers).drive(manage.deliveries(DEP, 1)).deliveries] == ["m3"]
    refused = Canned()
    with pytest.raises(ValidationError):
        refused.drive(manage.deliveries(DEP, limit=0))
    assert refused.calls == []


def test_one_delivery_carries_its_body_and_an_unknown_one_is_not_found() -> None:
    canned = Canned(HGETALL=message(b"ops", b"delivered"), LRANGE=[])
    d = canned.drive(manage.delivery(DEP, "m3"))
    assert (d.channel, d.state, d.attempts, d.next_attempt_at) == ("ops", "delivered", [], None)
    assert d.body == {"title": "3 runs failed", "total": 3}
    assert canned.asked("LRANGE")[0].args == ("LRANGE", G.notify.attempts("m3"), 0, -1)
    with pytest.raises(NotFoundError):
        Canned(HGETALL=[], LRANGE=[]).drive(manage.delivery(DEP, "m9"))
    odd = Canned()
    with pytest.raises(NotFoundError):
        odd.drive(manage.delivery(DEP, "../m3"))
    assert odd.calls == [], "an id that cannot be a message's is not looked up"


def test_a_test_message_is_composed_by_the_dispatchers_own_script() -> None:
    canned = Canned(HEXISTS=1, notify_compose=1)
    msg_id = canned.drive(manage.test_channel(DEP, "ops"))
    (compose,) = canned.asked("notify_compose")
    assert msg_id.startswith("test-") and compose.keys == (G.notify.outbox, G.notify.messages,
                                                           G.notify.due)  # fmt: skip
    _group, base, sent, channel, rule, body, *matches = compose.args
    assert (base, sent, channel, rule, matches) == (G.notify.base, msg_id, "ops", "", [])
    assert msgspec.json.decode(body)["test"] is True
    unknown = Canned(HEXISTS=0)
    with pytest.raises(NotFoundError):
        unknown.drive(manage.test_channel(DEP, "ops"))
    assert not unknown.asked("notify_compose")
    with pytest.raises(ScriptReplyError):
        Canned(HEXISTS=1, notify_compose=Exception("ERR user_script:9: bad")).drive(
            manage.test_channel(DEP, "ops")
        )


# --- the seed's worker protocol ----------------------------------------------------------


def test_a_heartbeat_registers_the_worker_for_30_s_and_answers_the_servers_clock() -> None:
    canned = Canned(heartbeat=[NOW_MS])
    beat = canned.drive(protocol.heartbeat(DEP, "w-1", protocol.HeartbeatRequest(4, 3)))
    (call,) = canned.asked("heartbeat")
    member, ttl, info, answer = call.args
    assert call.keys == (G.workers, G.worker_info) and (member, ttl, answer) == ("w-1", 30_000, "0")
    assert msgspec.json.decode(info)["capacity_free"] == 3
    assert beat.at == datetime.fromtimestamp(NOW_S, UTC)
    refused = Canned()
    with pytest.raises(ValidationError, match="worker id"):
        refused.drive(protocol.heartbeat(DEP, "w:1", protocol.HeartbeatRequest()))
    assert refused.calls == []


def claimed(rid: str, spec: bytes = b"") -> list[bytes]:
    """One run of a claim reply (lua/claim.lua: 9 fields; '' scheduled and attempt: the id's)."""
    lease = str(NOW_MS + 15_000).encode()
    return [b"17-0", rid.encode(), spec, b"", b"", b"7001", lease, str(NOW_MS).encode(), b""]


def test_a_claim_walks_the_shards_in_turn_until_it_has_max_runs() -> None:
    first, second = f"{JOB}:{NOW_MS - 60_000}:2", f"{DAG}.load:{NOW_MS}:1"
    spec = msgspec.json.encode(msgspec.structs.replace(SPEC, timeout_s=60.0, lease_s=15.0))
    canned = Canned(claim=in_turn([], claimed(first, spec), claimed(second)))
    got = canned.drive(protocol.claim(DEP, protocol.ClaimRequest("w-1", max_runs=2)))
    calls = canned.asked("claim")
    shards = [c.args[5] for c in calls]
    assert shards == [(shards[0] + i) % DEP.n_shards for i in range(3)]
    assert [c.args[3] for c in calls] == [2, 2, 1]  # asks only for what is still wanted
    a, b = got.runs
    assert (a.run_id, a.attempt, a.token, a.command, a.timeout_s) == (first, 2, 7001, "true", 60.0)
    assert a.scheduled_for == from_ms(NOW_MS - 60_000) and a.lease_expires_at == from_ms(
        NOW_MS + 15_000
    )
    assert (b.command, b.lease_s) == ("", 30.0)  # its spec gone: nothing to run, a default lease


def test_a_claim_with_nothing_ready_asks_every_shard_once() -> None:
    canned = Canned(claim=[])
    assert canned.drive(protocol.claim(DEP, protocol.ClaimRequest("w-1", 5))).runs == []
    assert sorted(c.args[5] for c in canned.asked("claim")) == list(range(DEP.n_shards))


def test_a_renewal_extends_the_lease_only_for_the_holder() -> None:
    req = protocol.RenewRequest("w-1", "17-0", 7001)
    canned = Canned(renew_runs=[NOW_MS, 1, NOW_MS + 30_000])
    renewed = canned.drive(protocol.renew(DEP, RID, req))
    (call,) = canned.asked("renew_runs")
    assert call.keys == (DEP.keys_for(RID).ready,) and call.args[3:] == ("17-0", RID, 7001)
    assert renewed.lease_expires_at == from_ms(NOW_MS + 30_000)
    for code, why in ((-2, "does not hold"), (-3, "cancelled: stop it")):
        with pytest.raises(ConflictError, match=why):
            Canned(renew_runs=[NOW_MS, code, 0]).drive(protocol.renew(DEP, RID, req))


def done(status_: Literal["success", "failure"] = "failure") -> protocol.CompleteRequest:
    return protocol.CompleteRequest("w-1", "17-0", 7001, status_, exit_code=2, output="boom")


def test_a_failure_a_seed_worker_reports_is_retried_on_the_jobs_policy() -> None:
    policy = RetryPolicy(max_attempts=3, jitter=False)
    spec = msgspec.json.encode(msgspec.structs.replace(SPEC, retry_policy=policy))
    canned = Canned(HGET=spec, TIME=TIME, complete=[NOW_MS, 0, 1])
    result = canned.drive(protocol.complete(DEP, RID, done()))
    (call,) = canned.asked("complete")
    entry, rid, token, state, code, _reason, out, _began, retry_at, _total = call.args[7:]
    assert (entry, rid, token, state, code, out) == ("17-0", RID, 7001, "failed", 2, b"boom")
    assert retry_at == NOW_MS + 30_000  # the first backoff, from the server's clock
    assert result.state == "failed" and not canned.asked("RPUSH")
    gone = Canned(HGET=None, TIME=TIME, complete=[NOW_MS, 0, 1])
    assert gone.drive(protocol.complete(DEP, RID, done())).state == "failed"
    assert gone.asked("complete")[0].args[15] == "", "no policy left: no retry"


def test_a_completion_that_released_dag_tasks_wakes_a_worker_of_that_shard() -> None:
    canned = Canned(HGET=None, TIME=TIME, complete=[NOW_MS, 1, 1], RPUSH=1, LTRIM=b"OK")
    assert canned.drive(protocol.complete(DEP, RID, done("success"))).state == "succeeded"
    (push,) = canned.asked("RPUSH")
    assert push.args == ("RPUSH", G.ready_tokens_of(""), DEP.keys_for(RID).shard)


@pytest.mark.parametrize(("code", "error"), [(-1, RunNotFound), (-2, ConflictError)])
def test_a_completion_the_script_refuses_is_not_applied(code: int, error: type) -> None:
    canned = Canned(HGET=None, TIME=TIME, complete=[NOW_MS, 0, code])
    with pytest.raises(error):
        canned.drive(protocol.complete(DEP, RID, done()))
    assert not canned.asked("RPUSH")


def test_a_completion_of_what_is_not_a_run_id_asks_nothing() -> None:
    canned = Canned()
    with pytest.raises(RunNotFound):
        canned.drive(protocol.complete(DEP, "not-a-run", done()))
    assert canned.calls == []
