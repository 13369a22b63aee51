"""The 'ray' vector mode: PPO's envs held by Ray actors on a cluster, each with a copy of the policy.

It is the 'actors' mode (rl/vector_modes.py) with Ray actors in place of BatchedVectorEnv's worker
processes: the envs are split into the same contiguous slices (rl.vector.split_evenly), one per actor,
and ``rl.vector_modes.ActorPool`` drives them with the same jobs and the same function, ``collect_slice``,
which collects an actor's slice of each rollout with rl.ppo's Collector. So the step accounting is the
same (each actor gets its share of the budget left) and so is the reproducibility rule: the same seed and
the same number of workers give the same training, in either mode.

The learner stays in the driver. Per rollout, the weights go out once (one object in Ray's store, read by
every actor) and each actor's segment (numpy arrays) comes back; nothing else travels, and nothing
assumes a shared filesystem: an actor builds its envs (and their sandbox processes) on its own node from
the picklable factories. One actor per CPU of the cluster by default, spread over the nodes.
"""
from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from gymnasium.vector.utils import batch_space

from rl import ray_cluster
from rl.vector import BETWEEN_COMMANDS, WorkerError, split_evenly

ACTOR_TIMEOUT_S = 300.0  # as BatchedVectorEnv: a whole rollout, or building the envs, per answer


class EnvSlice:
    """One Ray actor's envs (made a Ray actor class by RayVectorEnv): built on its node, kept with a ``state``
    dict between calls, as a BatchedVectorEnv worker keeps them."""

    def __init__(self, env_fns: list):
        try:  # one thread for world generation's numba code: the actor owns one CPU (rl.env_factory explains)
            import numba

            numba.set_num_threads(1)
        except (ImportError, ValueError):
            pass
        self.envs = [fn() for fn in env_fns]
        self.state: dict = {}

    def describe(self) -> tuple[Any, Any, str]:
        first = self.envs[0]
        for i, env in enumerate(self.envs):
            if env.observation_space != first.observation_space or env.action_space != first.action_space:
                raise RuntimeError(f"env {i} of this slice has spaces {env.observation_space}, {env.action_space}; "
                                   f"the first has {first.observation_space}, {first.action_space}")
        return first.observation_space, first.action_space, ray_cluster.node_id()

    def run(self, fn, *args: Any) -> Any:
        return fn(self.envs, self.state, *args)

    def between(self) -> None:
        """The work a run function left for the wait before the next call (rl.vector.BETWEEN_COMMANDS)."""
        work = self.state.get(BETWEEN_COMMANDS)
        if work is not None:
            work(self.envs)

    def close(self) -> None:
        for env in self.envs:
            try:
                env.close()
            except Exception:
                pass


class RayVectorEnv:
    """``num_workers`` Ray actors (default: the cluster's CPUs, at most one per env), each holding a slice of
    the envs. Offers what ActorPool and rl.training use of a vector env: ``num_envs``, the single spaces,
    ``worker_slices``, ``run_in_workers`` and ``close``. An actor that raises, dies or does not answer
    within ``timeout`` seconds raises rl.vector.WorkerError naming it, and every actor is stopped."""

    def __init__(self, env_fns: Sequence, num_workers: int | None = None, timeout: float = ACTOR_TIMEOUT_S):
        self.closed = True
        n = len(env_fns)
        if n < 1:
            raise ValueError("RayVectorEnv needs at least one env factory")
        ray = self._ray = ray_cluster.connect()
        workers = max(1, min(num_workers or ray_cluster.cluster_cpus(ray), n))
        self._slices = split_evenly(n, workers)
        self.num_envs = n
        self.timeout = float(timeout)
        actor_class = ray.remote(num_cpus=1, max_restarts=0)(EnvSlice)
        self._actors: list = []
        self._between: list = []  # each actor's work between calls, queued after its last call
        try:
            for lo, hi in self._slices:
                self._actors.append(actor_class.options(scheduling_strategy="SPREAD", **ray_cluster.sandbox_options())
                                    .remote(list(env_fns[lo:hi])))
        except BaseException:
            for actor in self._actors:  # the ones already made must not outlive this failure
                ray.kill(actor)
            raise
        self.nodes = [""] * workers
        self.closed = False
        specs = self._get([a.describe.remote() for a in self._actors], "building its envs")
        obs_space, act_space, _ = specs[0]
        for w, (o, a, _) in enumerate(specs[1:], start=1):
            if o != obs_space or a != act_space:
                self.close()
                raise RuntimeError(f"Ray actor {w}'s envs have spaces {o}, {a}; "
                                   f"actor 0's have {obs_space}, {act_space}")
        self.nodes = [node for _, _, node in specs]
        self.single_observation_space, self.single_action_space = obs_space, act_space
        self.observation_space = batch_space(obs_space, n)
        self.action_space = batch_space(act_space, n)
        self.metadata: dict = {}

    @property
    def worker_slices(self) -> list[tuple[int, int]]:
        """(first env, one past the last env) of each actor."""
        return list(self._slices)

    def run_in_workers(self, fn, jobs: Sequence[tuple]) -> list:
        """``fn(envs, state, *jobs[w])`` in each actor w, results in actor order. An argument that is the same
        object in every job (the policy's weights) is put into Ray's store once and read by every actor."""
        if self.closed:
            raise RuntimeError("this RayVectorEnv is closed")
        if len(jobs) != len(self._slices):
            raise ValueError(f"run_in_workers got {len(jobs)} jobs for {len(self._slices)} workers")
        shared = {i for i in range(len(jobs[0])) if len(jobs) > 1 and all(job[i] is jobs[0][i] for job in jobs)}
        refs = {i: self._ray.put(jobs[0][i]) for i in shared}
        calls = [actor.run.remote(fn, *[refs[i] if i in refs else arg for i, arg in enumerate(job)])
                 for actor, job in zip(self._actors, jobs)]
        if self._between:  # queued before these calls on each actor: its failure is reported now
            self._get(self._between, "working between calls")
        results = self._get(calls, f"running {getattr(fn, '__name__', fn)}")
        # each actor works on what the call left for later (the next worlds) while the caller goes on
        self._between = [actor.between.remote() for actor in self._actors]
        return results

    def _where(self, w: int) -> str:
        lo, hi = self._slices[w]
        node = f", node {self.nodes[w][:12]}" if self.nodes[w] else ""
        return f"Ray actor {w} of the 'ray' vector mode (envs {lo}..{hi - 1}{node})"

    def _get(self, refs: list, doing: str) -> list:
        """Each actor's answer in order, within the timeout; a failure stops every actor and names the one."""
        from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError

        deadline = time.monotonic() + self.timeout
        results = []
        for w, ref in enumerate(refs):
            try:
                results.append(self._ray.get(ref, timeout=max(0.0, deadline - time.monotonic())))
            except GetTimeoutError:
                self.close()
                raise WorkerError(f"{self._where(w)} did not answer within {self.timeout:g} s ({doing})") from None
            except RayActorError as exc:
                self.close()
                raise WorkerError(f"{self._where(w)} died ({doing}): {str(exc).strip()[:500]}") from None
            except RayTaskError as exc:
                self.close()
                cause = getattr(exc, "cause", None) or exc
                raise WorkerError(f"{self._where(w)} raised {type(cause).__name__}: {cause} ({doing})\n"
                                  f"--- actor traceback ---\n{exc}") from None
        return results

    def close(self, **kwargs: Any) -> None:
        """Close the actors' envs (their sandbox processes), then end the actors."""
        if self.closed:
            return
        self.closed = True
        try:  # the last work between calls: collected, so that an error of it is not reported as unhandled
            self._ray.get(self._between, timeout=10.0)
        except Exception:
            pass
        try:
            self._ray.wait([a.close.remote() for a in self._actors], num_returns=len(self._actors), timeout=10.0)
        except Exception:
            pass
        for actor in self._actors:
            try:
                self._ray.kill(actor)
            except Exception:
                pass

    def __del__(self):
        if not getattr(self, "closed", True):
            self.close()

    def __repr__(self) -> str:
        return f"RayVectorEnv(num_envs={self.num_envs}, workers={len(self._slices)})"
