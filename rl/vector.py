"""BatchedVectorEnv: a few worker processes, each stepping a slice of the environments in a loop.

Why: a SyncVectorEnv steps every env on one core, and AsyncVectorEnv starts one process per env, whose
pipe round trips and oversubscription cost more than they save when envs are cheap and cores few.
Here W workers (default: one per core) each step a contiguous slice of the envs; one vector step is one
message to and from each worker.

Results equal SyncVectorEnv(env_fns, autoreset_mode=SAME_STEP)'s for the same seeds. Workers return
per-env results, not batched ones, and the main process batches the infos with the same ``_add_info``
SyncVectorEnv uses: batching per slice first would be inexact, because an info array takes the dtype
of the first env reporting the key, so a slice starting with an int would truncate a later 3.5 to 3
where the whole batch (first env: a float) keeps 3.5.
"""
from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import time
import traceback
from collections.abc import Sequence
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space, concatenate, create_empty_array


class WorkerError(RuntimeError):
    """A worker process raised, died or stopped answering; the message names the worker and its envs."""


def default_context() -> str:
    # forkserver: forking a process that already runs OpenMP threads (torch, numba) can abort
    return "spawn" if sys.platform == "darwin" else "forkserver"


def usable_cpus() -> int:
    """CPUs this process may run on (taskset and cpusets included), the default number of workers."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # macOS
        return os.cpu_count() or 2


def split_evenly(n: int, workers: int) -> list[tuple[int, int]]:
    """(first, one past the last) env of each of ``workers`` contiguous slices of ``n`` envs, as even as can be.
    BatchedVectorEnv's workers and the 'ray' mode's actors (rl/vector_ray.py) split the envs the same way."""
    edges = np.linspace(0, n, workers + 1).round().astype(int)
    return [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:])]


def _step_slice(envs: list, actions) -> list:
    """Step each env; a finished one is reset at once (same-step autoreset) and its last obs/info kept."""
    out = []
    for env, action in zip(envs, actions):
        obs, reward, terminated, truncated, info = env.step(action)
        final = None
        if terminated or truncated:
            final = {"final_obs": obs, "final_info": info}
            obs, info = env.reset()
        out.append((obs, reward, terminated, truncated, final, info))
    return out


def _reset_slice(envs: list, seeds: list, options: dict | None, mask) -> list:
    return [env.reset(seed=seed, options=options) if mask is None or mask[i] else None
            for i, (env, seed) in enumerate(zip(envs, seeds))]


def _call_slice(envs: list, name: str, args: tuple, kwargs: dict) -> list:
    results = []
    for env in envs:
        attr = env.get_wrapper_attr(name)
        results.append(attr(*args, **kwargs) if callable(attr) else attr)
    return results


def random_steps(envs: list, state: dict, steps: int, seed: int) -> int:
    """For BatchedVectorEnv.run_in_workers: step this slice's envs with random actions, ``steps`` vector
    steps (resetting finished envs); returns the env steps taken. Measures the envs' own throughput."""
    rng = np.random.default_rng(seed)
    for env in envs:
        env.reset()
    for _ in range(steps):
        for env in envs:
            _, _, terminated, truncated, _ = env.step(int(rng.integers(env.action_space.n)))
            if terminated or truncated:
                env.reset()
    return steps * len(envs)


BETWEEN_COMMANDS = "between_commands"
"""The key of a worker's state under which a "run" function may leave ``fn(envs)``: the worker calls it after
each answer when no next command is waiting yet, so that work the next command would do can run meanwhile."""


def _work(conn, env_fns: list) -> None:
    """Worker loop: build this slice's envs, answer each command with ('ok', result) or ('error', details)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the main process's to handle; it reaps us
    envs: list = []
    try:
        for fn in env_fns:
            envs.append(fn())
        first = envs[0]
        for i, env in enumerate(envs):
            if env.observation_space != first.observation_space or env.action_space != first.action_space:
                raise RuntimeError(f"env {i} of this slice has spaces {env.observation_space}, {env.action_space}; "
                                   f"the first has {first.observation_space}, {first.action_space}")
        conn.send(("ok", (first.observation_space, first.action_space, dict(first.metadata), first.render_mode)))
        state: dict = {}  # kept between "run" commands (e.g. a policy copy and its rollout collector)
        between_failure = None  # what the work between commands raised: the answer to the next command
        while True:
            command, arg = conn.recv()
            if between_failure is not None and command != "close":
                raise RuntimeError(f"the work between commands failed: {between_failure}")
            if command == "step":
                result = _step_slice(envs, arg)
            elif command == "reset":
                result = _reset_slice(envs, *arg)
            elif command == "call":
                result = _call_slice(envs, *arg)
            elif command == "run":
                fn, args = arg
                result = fn(envs, state, *args)
            elif command == "close":
                break
            else:
                raise ValueError(f"unknown command {command!r}")
            conn.send(("ok", result))
            # work a "run" function left for the wait until the next command (e.g. the learner's update)
            between = state.get(BETWEEN_COMMANDS)
            if between is not None and not conn.poll(0):
                try:
                    between(envs)
                except Exception as exc:  # nobody waits for an answer now: report it with the next command's
                    between_failure = f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"
    except (EOFError, BrokenPipeError):
        pass  # the main process went away: nothing left to answer
    except BaseException as exc:  # noqa: BLE001 - every failure goes back to the main process
        try:
            conn.send(("error", (type(exc).__name__, str(exc), traceback.format_exc())))
        except Exception:
            pass
    finally:
        for env in envs:
            try:
                env.close()
            except Exception:
                pass
        conn.close()


class BatchedVectorEnv(VectorEnv):
    """``num_workers`` processes, each stepping ``len(env_fns) / num_workers`` envs sequentially.

    Drop-in for ``SyncVectorEnv(env_fns, autoreset_mode=SAME_STEP)`` (same obs, rewards and infos for the
    same seeds). ``env_fns`` must pickle. A worker that raises, dies or does not answer within
    ``timeout`` seconds raises WorkerError naming it; the other workers are then stopped. Actions must
    be an array indexable by env (any Discrete/Box/MultiDiscrete action space).
    """

    def __init__(self, env_fns: Sequence, num_workers: int | None = None, timeout: float = 300.0,
                 context: str | None = None):
        self.closed = False
        self._procs: list = []
        self._conns: list = []
        n = len(env_fns)
        if n < 1:
            raise ValueError("BatchedVectorEnv needs at least one env factory")
        self._slices = split_evenly(n, max(1, min(num_workers or usable_cpus(), n)))
        self.num_envs = n
        self.timeout = float(timeout)
        ctx = multiprocessing.get_context(context or default_context())
        try:
            for w, (lo, hi) in enumerate(self._slices):
                parent, child = ctx.Pipe()
                # every concrete context has Process; typeshed's BaseContext does not declare it
                proc = ctx.Process(target=_work, args=(child, list(env_fns[lo:hi])),  # type: ignore[attr-defined]
                                   name=f"BatchedVectorEnv-worker-{w}", daemon=True)
                proc.start()
                child.close()  # only the worker holds it now, so its death shows here as EOF
                self._procs.append(proc)
                self._conns.append(parent)
            specs = [self._recv(w) for w in range(len(self._slices))]
        except BaseException:
            self.close()
            raise
        obs_space, act_space, metadata, render_mode = specs[0]
        for w, (o, a, _, _) in enumerate(specs[1:], start=1):
            if o != obs_space or a != act_space:
                self.close()
                raise RuntimeError(f"worker {w}'s envs have spaces {o}, {a}; worker 0's have {obs_space}, {act_space}")
        self.single_observation_space, self.single_action_space = obs_space, act_space
        self.observation_space = batch_space(obs_space, n)
        self.action_space = batch_space(act_space, n)
        self.metadata = {**metadata, "autoreset_mode": AutoresetMode.SAME_STEP}
        self.render_mode = render_mode
        self._env_obs: list = [None] * n

    # ---- messaging ------------------------------------------------------------------------------------
    def _where(self, w: int) -> str:
        lo, hi = self._slices[w]
        return f"BatchedVectorEnv worker {w} (envs {lo}..{hi - 1}, pid {self._procs[w].pid})"

    def _send(self, w: int, message: tuple) -> None:
        try:
            self._conns[w].send(message)
        except (BrokenPipeError, ConnectionResetError, OSError) as exc:
            self._fail(WorkerError(f"{self._where(w)} is gone (exit code {self._procs[w].exitcode}): "
                                   f"could not send {message[0]!r}: {exc}"))

    def _recv(self, w: int) -> Any:
        conn, proc = self._conns[w], self._procs[w]
        deadline = time.monotonic() + self.timeout
        # poll in short slices so a dead worker is noticed at once and a hung one after `timeout`
        while not conn.poll(min(1.0, max(0.0, deadline - time.monotonic()))):
            if not proc.is_alive() and not conn.poll(0):
                self._fail(WorkerError(f"{self._where(w)} died with exit code {proc.exitcode}"))
            if time.monotonic() >= deadline:
                self._fail(WorkerError(f"{self._where(w)} did not answer within {self.timeout:g} s"))
        try:
            status, payload = conn.recv()
        except (EOFError, ConnectionResetError, OSError):
            status, payload = "died", None
        if status == "died":
            proc.join(1.0)
            self._fail(WorkerError(f"{self._where(w)} died with exit code {proc.exitcode}"))
        if status == "error":
            name, text, tb = payload
            self._fail(WorkerError(f"{self._where(w)} raised {name}: {text}\n--- worker traceback ---\n{tb}"))
        return payload

    def _fail(self, error: WorkerError) -> None:
        self.close(terminate=True)  # the other workers' states are now unknown: stop them all
        raise error

    def _all(self, messages: list) -> list:
        """Send each worker its message (None: skip it), then collect the answers in worker order."""
        if self.closed:
            raise RuntimeError("this BatchedVectorEnv is closed")
        for w, m in enumerate(messages):
            if m is not None:
                self._send(w, m)
        return [self._recv(w) if m is not None else None for w, m in enumerate(messages)]

    # ---- gymnasium VectorEnv API ----------------------------------------------------------------------
    def reset(self, *, seed: int | list | None = None, options: dict | None = None):
        n = self.num_envs
        seeds: list[int | None]
        if seed is None:
            seeds = [None] * n
        elif isinstance(seed, (int, np.integer)):
            seeds = [seed + i for i in range(n)]
        else:
            seeds = list(seed)
        if len(seeds) != n:
            raise ValueError(f"reset got {len(seeds)} seeds for num_envs={n}")
        options = dict(options) if options is not None else None
        mask = options.pop("reset_mask", None) if options is not None else None
        if mask is not None and not (isinstance(mask, np.ndarray) and mask.shape == (n,)
                                     and mask.dtype == np.bool_ and mask.any()):
            raise ValueError(f"options['reset_mask'] must be a bool array of shape ({n},) with a True value")
        results = self._all([None if mask is not None and not mask[lo:hi].any()  # nothing to reset there
                             else ("reset", (seeds[lo:hi], options, None if mask is None else mask[lo:hi]))
                             for lo, hi in self._slices])
        infos: dict = {}
        for (lo, _), slice_results in zip(self._slices, results):
            for i, result in enumerate(slice_results or [], start=lo):
                if result is not None:
                    self._env_obs[i], info = result
                    infos = self._add_info(infos, info, i)
        return self._concat_obs(), infos

    def step(self, actions):
        actions = np.asarray(actions)
        results = self._all([("step", actions[lo:hi]) for lo, hi in self._slices])
        rewards = np.zeros(self.num_envs, dtype=np.float64)
        terminated = np.zeros(self.num_envs, dtype=np.bool_)
        truncated = np.zeros(self.num_envs, dtype=np.bool_)
        infos: dict = {}
        i = 0
        for slice_results in results:
            for obs, rewards[i], terminated[i], truncated[i], final, info in slice_results:
                self._env_obs[i] = obs
                if final is not None:
                    infos = self._add_info(infos, final, i)
                infos = self._add_info(infos, info, i)  # in SyncVectorEnv's order, so keys come out the same
                i += 1
        return self._concat_obs(), rewards, terminated, truncated, infos

    def _concat_obs(self):
        # a fresh array each time, as SyncVectorEnv(copy=True) returns a copy
        return concatenate(self.single_observation_space, self._env_obs,
                           create_empty_array(self.single_observation_space, self.num_envs))

    @property
    def worker_slices(self) -> list[tuple[int, int]]:
        """(first env, one past the last env) of each worker."""
        return list(self._slices)

    def run_in_workers(self, fn, jobs: Sequence[tuple]) -> list:
        """Call ``fn(envs, state, *jobs[w])`` in each worker w on its slice of envs and return the results in
        worker order. ``fn`` must be picklable (module level); ``state`` is a dict the worker keeps between
        calls (``state[BETWEEN_COMMANDS]``: work for the worker's idle time after each call). The envs are then
        the caller's to step: don't mix this with step() on the same workers."""
        if len(jobs) != len(self._slices):
            raise ValueError(f"run_in_workers got {len(jobs)} jobs for {len(self._slices)} workers")
        return self._all([("run", (fn, tuple(job))) for job in jobs])

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple:
        results = self._all([("call", (name, args, kwargs))] * len(self._slices))
        return tuple(x for r in results for x in r)

    def get_attr(self, name: str) -> tuple:
        return self.call(name)

    def close_extras(self, terminate: bool = False, **kwargs: Any) -> None:
        """Ask the workers to close their envs, then reap them; stragglers are terminated, then killed."""
        if not terminate:
            for conn, proc in zip(self._conns, self._procs):
                if proc.is_alive():
                    try:
                        conn.send(("close", None))
                    except (BrokenPipeError, OSError):
                        pass
        deadline = time.monotonic() + (0.0 if terminate else 5.0)
        for proc in self._procs:
            proc.join(max(0.0, deadline - time.monotonic()))
        for proc in self._procs:
            if proc.is_alive():
                proc.terminate()
                proc.join(2.0)
            if proc.is_alive():
                proc.kill()
                proc.join()
        for conn in self._conns:
            conn.close()

    def close(self, **kwargs: Any) -> None:
        if getattr(self, "closed", True):
            return
        self.closed = True  # first: a failure while closing must not loop back into close
        self.close_extras(**kwargs)

    def __del__(self):
        if not getattr(self, "closed", True):
            self.close(terminate=True)

    def __repr__(self) -> str:
        return f"BatchedVectorEnv(num_envs={self.num_envs}, workers={len(self._slices)})"
