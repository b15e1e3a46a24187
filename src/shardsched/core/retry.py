"""How long a failed attempt waits before the next: pure, so it is tested by itself."""

from __future__ import annotations

import random

from shardsched.core.models import Backoff, RetryPolicy


def retry_delay_s(policy: RetryPolicy, attempt: int, rng: random.Random | None = None) -> float:
    """The delay before attempt ``attempt + 1`` after attempt ``attempt`` failed.

    Fixed: base_s. Exponential: base_s * 2**(attempt - 1). Either is capped by max_s; with
    jitter the delay is drawn uniformly from [0, that] ("full jitter"), so a fleet of
    failing jobs does not retry in lockstep.
    """
    if policy.backoff == Backoff.FIXED:
        delay = policy.base_s
    else:
        delay = policy.base_s * 2 ** max(0, attempt - 1)
    delay = min(delay, policy.max_s)
    if policy.jitter:
        delay = (rng or random).uniform(0, delay)
    return delay


def verdict(
    succeeded: bool, attempt: int, policy: RetryPolicy, now_ms: int
) -> tuple[str, int | str]:
    """A finished attempt's terminal state, and when its next attempt is due ('' for none).

    A failure with attempts left is retried after the policy's backoff; the last failure
    is dead-lettered when the job had retries, plainly failed when it had none.
    """
    if succeeded:
        return "succeeded", ""
    if attempt < policy.max_attempts:
        return "failed", now_ms + round(retry_delay_s(policy, attempt) * 1000)
    return ("dead_letter" if policy.max_attempts > 1 else "failed"), ""
