"""Create expectations: Jobs we created that the cache has not shown yet (client-go's expectations).

A reconcile that runs before the Job informer has caught up with our own creates would see those
Jobs missing and POST them again (a 409 at best, and one wasted request per Job). So the
reconciler remembers, per JobSet, the Jobs it created and when (monotonic seconds), and leaves
them out of the plan's creates until the cache shows them. An expectation lapses after
``EXPECTATION_TTL`` seconds: a create the cache never shows (a Job deleted before we saw it, a
watch that lost the event) is then planned again, and a deterministic name makes a repeat
harmless.

Pure: the remembered creates are a mapping (Job name -> monotonic time of the create) that each
function takes and returns anew; the clock is passed in.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from controller.runtime.store import Obj

# Job name -> monotonic time of our create.
Expected = Mapping[str, float]

# How long a create we made may be missing from the cache before we stop trusting it.
EXPECTATION_TTL = 30.0


def expect(expected: Expected, names: Iterable[str], now: float) -> dict[str, float]:
    """``expected`` plus ``names``, created at ``now`` (a repeated create restarts its clock)."""
    return {**expected, **dict.fromkeys(names, now)}


def observe(expected: Expected, seen: Iterable[str]) -> dict[str, float]:
    """``expected`` without the Jobs the cache now shows: those are no longer expectations."""
    shown = set(seen)
    return {name: at for name, at in expected.items() if name not in shown}


def live(expected: Expected, now: float) -> dict[str, float]:
    """The expectations younger than ``EXPECTATION_TTL`` at ``now``; older ones have lapsed."""
    return {name: at for name, at in expected.items() if now - at < EXPECTATION_TTL}


def creates_to_send(creates: Sequence[Obj], expected: Expected, now: float) -> list[Obj]:
    """The planned creates, minus Jobs still expected (created by us, not yet in the cache)."""
    pending = live(expected, now)
    return [job for job in creates if job["metadata"]["name"] not in pending]
