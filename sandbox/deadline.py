"""When a request to the sandbox has run out of time: counted in the code's own CPU time, within a wall cap.

A request gives the agent's code `timeout` seconds of CPU to answer (SandboxLimits.step_timeout_s: between
two yields, a mask, a shaping value). A timer inside the sandbox interrupts the code at `timeout` with an
error naming its line (sandbox.child.StepTimer); the host waits longer before it kills the process (the
grace below), so that the timer's report, not the kill, is what the model reads. So the figure the prompts
give the model is the one its code gets. On a loaded machine a process can wait for a core far longer than it
computes. That happens when the code tests of one round run side by side, on a CI machine, or with PPO's
workers. An honest step then missed a wall-clock deadline, and the model was told that its code loops.
So the deadline counts the CPU time the sandbox's processes spend:

- A request answered within PROBE_S costs nothing extra: nearly every request.
- Past PROBE_S, the host reads the process tree's CPU time once (from /proc). A host that looks much later
  was held up itself (a busy machine): the code is charged PROBE_S of the time before the look, not the stall.
- When the timeout and its grace have passed in wall time, the host reads it again. If the code has used
  less than that much CPU, the deadline moves on by what it has not used.
- Never past `timeout * MAX_WALL_FACTOR` of wall time: code that sleeps or blocks without computing is
  stopped there.
- A process that sends anything during the request (a print, part of a frame) is evidently running: the
  host does not move its deadline (sandbox.host; a print flood is stopped on time).

Where /proc cannot be read, the wall-clock deadline holds, as it did before.
"""
from __future__ import annotations

from collections.abc import Callable

PROBE_S = 0.25          # a request unanswered this long has its CPU time read
MAX_WALL_FACTOR = 5.0   # of the timeout: the wall-clock time a request may take at most, however starved
MIN_EXTENSION_S = 0.05  # a deadline moves on by at least this much (the CPU clock ticks in 10 ms)
# What the host allows past the timeout before it stops a request: a share of it, and at least twice PROBE_S,
# the CPU time the host may over-count (everything before its probe counts as computing). The sandbox's own
# timer, at the whole timeout, then reports first.
GRACE_SHARE = 0.25
MIN_GRACE_S = 2 * PROBE_S


class RequestDeadline:
    """The deadline of one request sent at `sent` (time.monotonic()); `cpu()` is the sandbox's CPU seconds so
    far, or None where they cannot be read."""

    def __init__(self, timeout: float, sent: float, cpu: Callable[[], float | None], timer: bool = True):
        """`timer`: the sandbox's timer runs (a call, a mask, a shaping value), so the host allows it a grace
        to report; not for a load, whose top level it does not interrupt."""
        self.timeout, self.sent, self._cpu = timeout, sent, cpu
        # what the host allows, the sandbox's timer report included
        self.limit = timeout + max(GRACE_SHARE * timeout, MIN_GRACE_S) if timer else timeout
        self.deadline = sent + self.limit
        self.hard = sent + timeout * MAX_WALL_FACTOR
        self._probe: tuple[float, float | None] | None = None  # (when, CPU seconds then)
        self.starved_to_the_cap = False  # the request used little CPU and was stopped at the wall cap

    def read_until(self) -> float:
        """How long a read may wait before `keep_waiting` is asked."""
        if self._probe is None:
            return min(self.deadline, self.sent + PROBE_S)
        return self.deadline

    def keep_waiting(self, now: float) -> bool:
        """`read_until()` passed without an answer: whether to wait on (until the new `read_until()`)."""
        if self._probe is None:
            self._probe = (now, self._cpu())
            if now < self.deadline:
                return True
            if self._probe[1] is None or now >= self.hard:
                return False
            # a probe past the deadline: the host itself was held up (a busy machine, the GIL, a collection), and
            # the answer may be waiting unread. The code's CPU time decides from here, as at any later look.
            self.deadline = min(self.hard, now + MIN_EXTENSION_S)
            return True
        if now < self.deadline:
            return True
        when, then = self._probe
        if then is None:
            return False
        cpu = self._cpu()
        if cpu is None:
            return False
        # the CPU time spent before the probe is taken to be the wall time before it, up to PROBE_S: a probe later
        # than that means the host was held up, and the code is not charged for the host's own delay (a stalled
        # host killed eight quick code tests at once with "no answer within 2.5 s")
        used = cpu - then + min(when - self.sent, PROBE_S)
        if used >= self.limit:
            return False
        if now >= self.hard:
            self.starved_to_the_cap = True
            return False
        self.deadline = min(self.hard, now + max(MIN_EXTENSION_S, self.limit - used))
        return True
