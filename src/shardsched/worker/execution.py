"""Running one claimed run: an in-process handler (inline or as a task) or a command in a
subprocess, to an :class:`~shardsched.worker.runner.Outcome`. The job's own failure is an
outcome, never an exception of the worker."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable

import trio

from shardsched.core.ids import dag_run_of, job_of_run
from shardsched.core.instants import from_ms
from shardsched.runtime.trace_context import current_traceparent
from shardsched.worker import handlers
from shardsched.worker.holdings import Claimed
from shardsched.worker.runner import OUTPUT_LIMIT, LiveOutput, Outcome, run_command
from shardsched.worker.sandbox import CommandPolicy, Sandbox

log = logging.getLogger(__name__)
#: How often in-process handlers are checked against their timeout.
WATCHDOG_TICK_S = 0.1
#: What a command inherits of the worker's environment, besides what the operator passes
#: with ``--pass-env``: never the worker's Redis URL, credentials or cloud keys.
INHERITED_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TZ")


def inherited_env(pass_env: Iterable[str] = ()) -> dict[str, str]:
    """The allowlisted part of this process's environment a command starts with."""
    names = (*INHERITED_ENV, *pass_env)
    return {name: os.environ[name] for name in names if name in os.environ}


def run_env(claimed: Claimed) -> dict[str, str]:
    """What a command sees of its run, so its side effects can be idempotent."""
    env = {
        "SHARDSCHED_RUN_ID": claimed.run_id,
        "SHARDSCHED_JOB_ID": job_of_run(claimed.run_id),
        "SHARDSCHED_ATTEMPT": str(claimed.attempt),
        "SHARDSCHED_ARGS": claimed.args_json.decode(),
        "SHARDSCHED_SCHEDULED_FOR": from_ms(claimed.scheduled_for_ms)
        .isoformat()
        .replace("+00:00", "Z"),
    }
    if drid := dag_run_of(claimed.run_id):
        env["SHARDSCHED_DAG_RUN_ID"] = drid
    return env


def _context(claimed: Claimed) -> handlers.HandlerContext:
    return handlers.HandlerContext(
        claimed.run_id,
        job_of_run(claimed.run_id),
        claimed.attempt,
        claimed.scheduled_for_ms,
        claimed.args_json,
    )


class Executor:
    """Runs claimed runs; owns the handler deadlines its watchdog enforces.

    A command's environment is an allowlist (:data:`INHERITED_ENV`, the names in
    ``pass_env``), the sandbox's user variables, the job's own ``env`` map, then its run's
    ``SHARDSCHED_*`` variables (which nothing overrides). The ``policy`` says which
    commands run at all, the ``sandbox`` as whom and within which limits."""

    def __init__(
        self,
        pass_env: Iterable[str] = (),
        sandbox: Sandbox | None = None,
        policy: CommandPolicy | None = None,
        output_limit: int = OUTPUT_LIMIT,
    ) -> None:
        self._output_limit = output_limit  #: the tail of a command's output kept
        self._deadlines: dict[trio.CancelScope, float] = {}
        self._handler_started = trio.Event()
        self._inherited = inherited_env(pass_env)
        self._sandbox = sandbox or Sandbox()
        self._base_env = {**self._inherited, **self._sandbox.env}
        self._policy = policy or CommandPolicy()

    @staticmethod
    def is_inline(claimed: Claimed) -> bool:
        return claimed.spec is not None and handlers.is_inline(claimed.spec.command)

    @staticmethod
    def run_inline(claimed: Claimed) -> Outcome:
        """An inline handler, called right here with no task (see handlers)."""
        assert claimed.spec is not None
        fn = handlers.lookup(claimed.spec.command)
        assert fn is not None
        try:
            fn(_context(claimed))
        except Exception as exc:  # the job's own failure, not ours
            return Outcome(None, f"handler error: {exc!r}"[:500], b"")
        return Outcome(0, None, b"")

    async def run(self, claimed: Claimed, live: LiveOutput | None = None) -> Outcome:
        """Run it; a command's output collects in ``live`` as it runs. Whatever goes wrong
        on the way (a spec no spawn accepts, a tool gone, a bug of ours) fails this run
        with the reason; it never ends the worker, and so never the next worker either."""
        try:
            return await self._run(claimed, live)
        except Exception as exc:
            log.exception("run %s failed in the worker", claimed.run_id)
            return Outcome(None, f"worker error: {exc!r}"[:500], b"")

    async def _run(self, claimed: Claimed, live: LiveOutput | None) -> Outcome:
        spec = claimed.spec
        if spec is None:
            return Outcome(None, "job definition missing", b"")
        try:
            fn = handlers.lookup(spec.command)
        except LookupError as exc:
            return Outcome(None, str(exc), b"")
        if fn is None:
            if refused := self._policy.refusal(spec.command):
                return Outcome(None, refused, b"")
            env = {**self._base_env, **spec.env, **run_env(claimed)}
            if (parent := current_traceparent()) is not None:  # the execution's span
                env["TRACEPARENT"] = parent
            pool = self._sandbox.uids
            if pool is None:
                return await run_command(
                    spec.command,
                    spec.timeout_s,
                    env,
                    limit=self._output_limit,
                    kill_grace_s=spec.kill_grace_s,
                    prefix=self._sandbox.prefix,
                    live=live,
                )
            uid = pool.take()  # a uid no other run of this worker has now
            try:
                prefix, user = self._sandbox.for_uid(uid)
                return await run_command(
                    spec.command,
                    spec.timeout_s,
                    {**user, **env},
                    limit=self._output_limit,
                    kill_grace_s=spec.kill_grace_s,
                    prefix=prefix,
                    live=live,
                )
            finally:
                with trio.CancelScope(shield=True):
                    await pool.give(uid)
        # A deadline per cancel scope costs trio a heap operation each way, a large share
        # of an instant handler; the watchdog enforces timeouts to within its tick.
        try:
            with trio.CancelScope() as scope:
                self._deadlines[scope] = trio.current_time() + spec.timeout_s
                self._handler_started.set()
                try:
                    await handlers.call(fn, _context(claimed))
                finally:
                    del self._deadlines[scope]
        except Exception as exc:  # the job's own failure, not ours
            return Outcome(None, f"handler error: {exc!r}"[:500], b"")
        if scope.cancelled_caught:
            return Outcome(None, "timeout", b"")
        return Outcome(0, None, b"")

    async def watchdog(self) -> None:
        """Cancel in-process handlers past their timeout (to within WATCHDOG_TICK_S)."""
        while True:
            if not self._deadlines:  # none running: an idle worker does not tick
                await self._handler_started.wait()
                self._handler_started = trio.Event()
                continue
            await trio.sleep(WATCHDOG_TICK_S)
            now = trio.current_time()
            for scope, deadline in list(self._deadlines.items()):
                if deadline <= now:
                    scope.cancel()
