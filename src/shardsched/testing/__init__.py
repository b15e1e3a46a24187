"""A virtual-clock test kit: what jobs fire, skip and shift over any span and through any
outage, decided by the real scheduling core, with no Redis and no waiting.

    from shardsched.testing import VirtualClock, simulate

    clock = VirtualClock([spec], start=datetime(2026, 3, 28, tzinfo=UTC))
    clock.skip_time(timedelta(days=2))        # the ticks decided on the way
    clock.outage(timedelta(hours=3))          # the scheduler down: decided at its end
    ticks = simulate(jobs, start, timedelta(days=90), outages=[(when, timedelta(hours=2))])

With pytest, the ``virtual_clock`` fixture makes clocks (``virtual_clock(jobs, start)``).
See docs/testing.md.
"""

from shardsched.testing.clock import Simulation, Tick, VirtualClock, simulate

__all__ = ["Simulation", "Tick", "VirtualClock", "simulate"]
