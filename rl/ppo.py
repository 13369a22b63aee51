"""Single-file PPO (in the style of cleanrl) whose action head holds coded actions next to primitives.

Read top to bottom: settings, the agent network, SMDP-GAE, rollout collection, the PPO update, the loop.

Coded actions are options: one policy decision may run many primitive steps. The environment reports
how many (``info["primitive_steps"]``) and returns the reward already discounted inside the option, so
the advantage estimator discounts each transition by ``gamma ** primitive_steps`` (semi-Markov PPO).
Every primitive step counts toward ``total_steps``: sample efficiency is measured in environment steps,
never in policy decisions.

This file is the algorithm only. ``rl.training.train`` builds the environments (rl/env_factory.py) in a
vector mode (rl/vector_modes.py), runs ``train_loop`` and saves the policy (rl/policy_io.py); rl/cli.py is
the command line:  ``python -m rl.ppo --task collect_wood --total-steps 200000``
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn

from rl.options import CodedStats, info_column, infos_of_this_step, next_action_mask, share_allowance
from rl.run_log import RunLogger, curve_row


# ---- Settings -------------------------------------------------------------------------------------
def setting(default: Any, doc: str) -> Any:
    """A settings field whose documentation is data: rl/cli.py's --help and rl/config.py's schema read it."""
    return field(default=default, metadata={"doc": doc})


@dataclass
class PPOSettings:
    """PPO hyper-parameters and run options. Defaults follow cleanrl's ppo.py."""

    seed: int = setting(1, "seed of torch, numpy and of the training worlds (always below the evaluation seed range)")
    total_steps: int = setting(200_000, "budget in primitive environment steps (coded-action steps included)")
    learning_rate: float = setting(2.5e-4, "Adam learning rate")
    anneal_lr: bool = setting(True, "decay the learning rate linearly to 0 over the step budget")
    num_envs: int = setting(4, "parallel environments")
    num_steps: int = setting(128, "policy decisions per environment per rollout")
    gamma: float = setting(0.99, "discount per primitive step (an option of k steps is discounted by gamma**k)")
    gae_lambda: float = setting(0.95, "GAE lambda, applied once per decision")
    num_minibatches: int = setting(4, "minibatches per update epoch")
    update_epochs: int = setting(4, "optimisation epochs over each rollout")
    norm_adv: bool = setting(True, "normalise advantages within each minibatch")
    clip_coef: float = setting(0.2, "surrogate clipping coefficient")
    clip_vloss: bool = setting(True, "clip the value loss as in the PPO paper")
    ent_coef: float = setting(0.01, "entropy bonus coefficient")
    vf_coef: float = setting(0.5, "value loss coefficient")
    max_grad_norm: float = setting(0.5, "global gradient-norm clip")
    target_kl: float | None = setting(
        None, "stop the update epochs early once the approximate KL exceeds this (None: never)")
    hidden_size: int = setting(64, "width of the MLP layers (and of the CNN's last layer)")
    vector_mode: str = setting("sync", (
        "'sync' steps the environments in this process, 'batched' in one worker process per CPU core (each "
        "stepping its share of the envs in a loop), 'async' in one worker process each, 'actors' in one worker "
        "per core that also runs a copy of the policy and collects its share of each rollout (one message per "
        "rollout instead of one per step); 'auto' is 'actors' for Crafter with 2 or more envs and 'sync' "
        "otherwise (a CartPole step costs less than a pipe round trip). 'sync' and 'batched' give identical "
        "runs for a seed; 'actors' is reproducible on one machine, but each worker samples its own "
        "actions, so its runs change with the number of workers (by default, the CPU cores)"))
    torch_threads: int = setting(
        1, "torch CPU threads of the learner (1 leaves the other cores to environment workers)")
    device: str = setting("auto", "'auto' (cuda when present), 'cpu' or 'cuda'")
    run_dir: str | None = setting(None, "folder for metrics, TensorBoard events, the curve PNG and policy.pt "
                                        "(None: runs/ppo/<name>-<time>)")
    progress: str = setting("auto", "'auto' (rich bar on a terminal, log lines otherwise), 'bar', 'log' or 'none'")
    log_every: int = setting(10, "print a log line every this many updates (log mode)")
    window: int = setting(50, "episodes in the moving window of the learning curve")


# ---- Agent ----------------------------------------------------------------------------------------
def layer_init(layer: nn.Module, std: float = math.sqrt(2), bias: float = 0.0) -> nn.Module:
    nn.init.orthogonal_(layer.weight, std)  # type: ignore[arg-type]
    nn.init.constant_(layer.bias, bias)  # type: ignore[arg-type]
    return layer


MASKED_LOGIT = -1e8  # finite, so a fully-masked row never produces NaN


class Agent(nn.Module):
    """Actor-critic. An MLP for flat (symbolic) observations, a small CNN for HxWxC images."""

    def __init__(self, obs_shape: tuple[int, ...], n_actions: int, hidden: int = 64):
        super().__init__()
        self.obs_shape = tuple(obs_shape)
        self.n_actions = n_actions
        self.is_image = len(self.obs_shape) == 3
        self.encoder: nn.Module
        if self.is_image:
            h, w, c = self.obs_shape
            self.encoder = nn.Sequential(
                layer_init(nn.Conv2d(c, 32, 5, stride=2)), nn.ReLU(),
                layer_init(nn.Conv2d(32, 64, 3, stride=2)), nn.ReLU(),
                layer_init(nn.Conv2d(64, 64, 3, stride=2)), nn.ReLU(),
                nn.Flatten(),
            )
            with torch.no_grad():
                n_flat = self.encoder(torch.zeros(1, c, h, w)).shape[1]
            self.encoder.append(layer_init(nn.Linear(n_flat, max(hidden, 256))))
            self.encoder.append(nn.ReLU())
            feat = max(hidden, 256)
            self.actor = layer_init(nn.Linear(feat, n_actions), std=0.01)
            self.critic = layer_init(nn.Linear(feat, 1), std=1.0)
        else:
            n_in = int(np.prod(self.obs_shape))
            self.encoder = nn.Identity()

            def trunk() -> nn.Sequential:
                return nn.Sequential(
                    layer_init(nn.Linear(n_in, hidden)), nn.Tanh(),
                    layer_init(nn.Linear(hidden, hidden)), nn.Tanh(),
                )

            # separate actor and critic trunks, as cleanrl does for vector observations
            self.actor = nn.Sequential(trunk(), layer_init(nn.Linear(hidden, n_actions), std=0.01))
            self.critic = nn.Sequential(trunk(), layer_init(nn.Linear(hidden, 1), std=1.0))

    def _features(self, obs: torch.Tensor) -> torch.Tensor:
        if self.is_image:
            return self.encoder(obs.permute(0, 3, 1, 2).float() / 255.0)
        return obs.reshape(obs.shape[0], -1).float()

    def get_value(self, obs: torch.Tensor) -> torch.Tensor:
        return self.critic(self._features(obs)).squeeze(-1)

    def get_action_and_value(self, obs: torch.Tensor, mask: torch.Tensor | None = None,
                             action: torch.Tensor | None = None, deterministic: bool = False):
        feats = self._features(obs)
        logits = self.actor(feats)
        if mask is not None:
            logits = torch.where(mask, logits, torch.full_like(logits, MASKED_LOGIT))
        # plain tensor ops instead of torch.distributions.Categorical: its argument checks cost more than
        # the network itself at the small batches of the rollout loop
        logp_all = torch.log_softmax(logits, dim=-1)
        if action is None:
            action = logits.argmax(-1) if deterministic else torch.multinomial(logp_all.exp(), 1).squeeze(-1)
        logprob = logp_all.gather(-1, action.unsqueeze(-1)).squeeze(-1)
        entropy = -(logp_all.exp() * logp_all).sum(-1)  # masked entries: 0 * finite = 0, never NaN
        return action, logprob, entropy, self.critic(feats).squeeze(-1)


# ---- Semi-Markov GAE ------------------------------------------------------------------------------
def smdp_gae(rewards: torch.Tensor, values: torch.Tensor, ends: torch.Tensor, steps: torch.Tensor,
             next_value: torch.Tensor, gamma: float, lam: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimation over transitions of variable duration.

    All tensors are (T, N). ``rewards[t]`` is already the discounted sum inside the option,
    ``steps[t]`` the primitive steps it took (k), ``ends[t]`` 1 when transition t ended its episode
    (then ``values[t + 1]`` belongs to the next episode and is ignored). ``next_value`` is V of the
    observation after the last transition.

        delta_t = r_t + gamma**k_t * V(s_{t+1}) * (1 - end_t) - V(s_t)
        A_t     = delta_t + gamma**k_t * lam * (1 - end_t) * A_{t+1}

    Why lambda per decision and not lam**k: the value function is only queried at decision points, so
    the lambda-return mixes n-decision returns; gamma**k alone carries the elapsed time. With k = 1
    everywhere this is exactly the standard GAE.
    """
    T = rewards.shape[0]
    advantages = torch.zeros_like(rewards)
    last = torch.zeros_like(next_value)
    for t in reversed(range(T)):
        v_next = next_value if t == T - 1 else values[t + 1]
        discount = gamma ** steps[t] * (1.0 - ends[t])
        delta = rewards[t] + discount * v_next - values[t]
        last = delta + discount * lam * last
        advantages[t] = last
    return advantages, advantages + values


# ---- Rollout collection ---------------------------------------------------------------------------
def _keep_threads(n: int) -> None:
    """Re-assert the learner's thread count: libraries in the env (numba's OpenMP pool, used by Crafter's
    world generation) can reset the process-wide OpenMP thread count, which made updates ~10x slower."""
    if torch.get_num_threads() != max(1, n):
        torch.set_num_threads(max(1, n))


@dataclass
class CollectorSpec:
    """What a collector knows of the run (plain data: the 'actors' mode sends it to its workers)."""

    obs_shape: tuple[int, ...]
    n_actions: int
    n_primitive: int
    coded_names: tuple[str, ...]
    hidden_size: int
    num_steps: int
    gamma: float
    seed: int


@dataclass
class Rollout:
    """(T, N, ...) tensors of one rollout; the masks are kept so that the update sees the same ones."""

    obs: Any
    masks: Any
    actions: Any
    logprobs: Any
    values: Any
    rewards: Any
    steps: Any
    ends: Any

    @classmethod
    def zeros(cls, spec: CollectorSpec, n_envs: int, obs_dtype: torch.dtype, device: torch.device) -> Rollout:
        def z(*shape, dtype=torch.float32):
            return torch.zeros((spec.num_steps, n_envs, *shape), dtype=dtype, device=device)

        return cls(obs=z(*spec.obs_shape, dtype=obs_dtype), masks=z(spec.n_actions, dtype=torch.bool),
                   actions=z(dtype=torch.long), logprobs=z(), values=z(), rewards=z(), steps=z(), ends=z())

    def map(self, fn: Callable[[Any], Any]) -> Rollout:
        return Rollout(**{f.name: fn(getattr(self, f.name)) for f in fields(self)})


@dataclass
class Segment:
    """One collector's part of a rollout: its first t_used decisions, V of the observation after them, stats."""

    rollout: Rollout
    next_value: Any
    steps_used: int
    episodes: list  # (primitive steps into this rollout, return, length, success)
    coded: CodedStats


Collect = Callable[[Agent, int], list[Segment]]  # (policy, primitive steps left) -> the rollout's segments


class Collector:
    """Steps a vector env with the policy for one rollout (``num_steps`` decisions per env, or fewer once
    ``budget`` primitive steps are spent); keeps the current observation and running episodes between
    rollouts. Called, it is a ``Collect`` of one segment."""

    def __init__(self, envs: gym.vector.VectorEnv, spec: CollectorSpec, device: torch.device,
                 seed: int | list[int], threads: int = 1):
        self.envs, self.spec, self.device, self.seed, self.threads = envs, spec, device, seed, threads
        self.N = N = envs.num_envs
        self.obs_dtype = torch.uint8 if envs.single_observation_space.dtype == np.uint8 else torch.float32
        self.buf = Rollout.zeros(spec, N, self.obs_dtype, device)
        self.ep_ret, self.ep_len = np.zeros(N), np.zeros(N, dtype=np.int64)
        # envs stepped in this process share one step allowance, so that a long coded call in the budget's
        # last step cannot overrun it (rl.options.StepAllowance)
        self.allowance = share_allowance(envs) if spec.n_actions > spec.n_primitive else None
        self.next_obs: torch.Tensor | None = None

    def __call__(self, agent: Agent, budget: int) -> list[Segment]:
        return [self.collect(agent, budget)]

    def collect(self, agent: Agent, budget: int) -> Segment:
        spec, buf, N, device = self.spec, self.buf, self.N, self.device
        if self.next_obs is None:  # the first rollout resets the envs (world generation is training time)
            obs_np, infos = self.envs.reset(seed=self.seed)  # type: ignore[arg-type]  # a list: one per env
            self.next_obs = torch.as_tensor(obs_np, device=device).to(self.obs_dtype)
            self.next_mask = torch.as_tensor(next_action_mask(infos, N, spec.n_actions), device=device)
        coded = CodedStats(spec.coded_names)
        episodes: list = []
        used, t_used = 0, 0
        for t in range(spec.num_steps):
            _keep_threads(self.threads)
            buf.obs[t] = self.next_obs
            buf.masks[t] = self.next_mask
            with torch.no_grad():
                action, logprob, _, value = agent.get_action_and_value(self.next_obs, self.next_mask)
            buf.values[t], buf.actions[t], buf.logprobs[t] = value, action, logprob
            act_np = action.cpu().numpy()

            if self.allowance is not None:
                self.allowance.begin(budget - used, N)
            obs_np, reward, term, trunc, infos = self.envs.step(act_np)
            done = np.logical_or(term, trunc)
            step_info = infos_of_this_step(infos, done, N)
            k = info_column(step_info, "primitive_steps", N, 1.0)
            raw_reward = info_column(step_info, "option_reward", N, np.nan)
            raw_reward = np.where(np.isnan(raw_reward), reward, raw_reward)
            reward = np.asarray(reward, dtype=np.float64)

            # a truncated episode is not a real end: bootstrap with V(final obs) (as SB3 does)
            cut = np.logical_and(trunc, np.logical_not(term))
            if cut.any():
                final = np.stack([infos["final_obs"][i] for i in np.flatnonzero(cut)])
                with torch.no_grad():
                    v_final = agent.get_value(torch.as_tensor(final, device=device).to(self.obs_dtype)).cpu().numpy()
                reward[cut] += (spec.gamma ** k[cut]) * v_final

            buf.rewards[t] = torch.as_tensor(reward, dtype=torch.float32, device=device)
            buf.steps[t] = torch.as_tensor(k, dtype=torch.float32, device=device)
            buf.ends[t] = torch.as_tensor(done, dtype=torch.float32, device=device)
            self.next_obs = torch.as_tensor(obs_np, device=device).to(self.obs_dtype)
            self.next_mask = torch.as_tensor(next_action_mask(infos, N, spec.n_actions), device=device)

            used += int(k.sum())
            self.ep_ret += raw_reward
            self.ep_len += k.astype(np.int64)
            coded.count_step(act_np, spec.n_primitive, step_info, N)
            if done.any():
                success = info_column(step_info, "success", N, np.nan)
                for i in np.flatnonzero(done):
                    episodes.append((used, float(self.ep_ret[i]), int(self.ep_len[i]), float(success[i])))
                    self.ep_ret[i], self.ep_len[i] = 0.0, 0
            t_used = t + 1
            if used >= budget:
                break
        _keep_threads(self.threads)
        with torch.no_grad():
            next_value = agent.get_value(self.next_obs)
        return Segment(buf.map(lambda x: x[:t_used]), next_value, steps_used=used, episodes=episodes, coded=coded)


# ---- PPO update -----------------------------------------------------------------------------------
@dataclass
class Batch:
    """A rollout flattened over (time, env), with its advantages and returns."""

    obs: torch.Tensor
    masks: torch.Tensor
    actions: torch.Tensor
    logprobs: torch.Tensor
    values: torch.Tensor
    advantages: torch.Tensor
    returns: torch.Tensor

    @classmethod
    def of(cls, segments: list[Segment], gamma: float, lam: float) -> Batch:
        # advantages per segment: each collector stopped after its own number of decisions
        with torch.no_grad():
            gae = [smdp_gae(seg.rollout.rewards, seg.rollout.values, seg.rollout.ends, seg.rollout.steps,
                            seg.next_value, gamma, lam) for seg in segments]

        def flat(name: str) -> torch.Tensor:
            return torch.cat([getattr(seg.rollout, name).flatten(0, 1) for seg in segments])

        return cls(obs=flat("obs"), masks=flat("masks"), actions=flat("actions"), logprobs=flat("logprobs"),
                   values=flat("values"), advantages=torch.cat([adv.flatten(0, 1) for adv, _ in gae]),
                   returns=torch.cat([ret.flatten(0, 1) for _, ret in gae]))


def ppo_update(agent: Agent, optimizer: torch.optim.Optimizer, s: PPOSettings, b: Batch) -> dict[str, float]:
    """``update_epochs`` passes of clipped-surrogate minibatch steps over the batch; the last losses."""
    batch = b.obs.shape[0]
    mb_size = max(1, batch // s.num_minibatches)
    clipfracs, approx_kl = [], torch.tensor(0.0)
    pg_loss = v_loss = entropy_loss = torch.tensor(0.0)
    for _epoch in range(s.update_epochs):
        perm = torch.randperm(batch, device=b.obs.device)
        for lo in range(0, batch, mb_size):
            mb = perm[lo:lo + mb_size]
            _, newlogprob, entropy, newvalue = agent.get_action_and_value(b.obs[mb], b.masks[mb], b.actions[mb])
            logratio = newlogprob - b.logprobs[mb]
            ratio = logratio.exp()
            with torch.no_grad():
                approx_kl = ((ratio - 1) - logratio).mean()  # the low-variance k3 estimator
                clipfracs.append(((ratio - 1.0).abs() > s.clip_coef).float().mean().item())
            mb_adv = b.advantages[mb]
            if s.norm_adv and mb.numel() > 1:
                mb_adv = (mb_adv - mb_adv.mean()) / (mb_adv.std() + 1e-8)
            pg_loss = torch.max(-mb_adv * ratio,
                                -mb_adv * torch.clamp(ratio, 1 - s.clip_coef, 1 + s.clip_coef)).mean()
            if s.clip_vloss:
                v_unclipped = (newvalue - b.returns[mb]) ** 2
                v_clipped = b.values[mb] + torch.clamp(newvalue - b.values[mb], -s.clip_coef, s.clip_coef)
                v_loss = 0.5 * torch.max(v_unclipped, (v_clipped - b.returns[mb]) ** 2).mean()
            else:
                v_loss = 0.5 * ((newvalue - b.returns[mb]) ** 2).mean()
            entropy_loss = entropy.mean()
            loss = pg_loss - s.ent_coef * entropy_loss + v_loss * s.vf_coef
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(agent.parameters(), s.max_grad_norm)
            optimizer.step()
        if s.target_kl is not None and approx_kl > s.target_kl:
            break
    return {"policy_loss": pg_loss.item(), "value_loss": v_loss.item(), "entropy": entropy_loss.item(),
            "approx_kl": approx_kl.item(), "clipfrac": float(np.mean(clipfracs)) if clipfracs else 0.0}


# ---- Training loop --------------------------------------------------------------------------------
def train_loop(s: PPOSettings, spec: CollectorSpec, collect: Collect, device: torch.device,
               run_name: str) -> tuple[Agent, dict[str, Any]]:
    """Collect, estimate advantages, update, log; until ``total_steps`` primitive steps are spent. ``collect``
    gathers each rollout: a Collector in this process, or rl.vector_modes.ActorPool in worker processes.
    Returns the agent and the run's numbers (rl.training.TrainResult's fields, all but the policy's path)."""
    agent = Agent(spec.obs_shape, spec.n_actions, s.hidden_size).to(device)
    optimizer = torch.optim.Adam(agent.parameters(), lr=s.learning_rate, eps=1e-5)
    log = RunLogger(s, run_name, total=s.total_steps)
    start = time.time()  # the clock includes the first reset (world generation), as SB3's learn() does

    episodes: list[tuple[int, float, int, float]] = []  # (global_step, return, length, success)
    coded = CodedStats(spec.coded_names)
    global_step, update = 0, 0

    while global_step < s.total_steps:
        update += 1
        if s.anneal_lr:
            optimizer.param_groups[0]["lr"] = s.learning_rate * max(0.0, 1.0 - global_step / s.total_steps)

        segments = collect(agent, s.total_steps - global_step)  # stops once the budget is spent, even mid-rollout
        _keep_threads(s.torch_threads)
        for seg in segments:
            episodes.extend((global_step + at, ret, length, succ) for at, ret, length, succ in seg.episodes)
            coded.merge(seg.coded)
        global_step += sum(seg.steps_used for seg in segments)

        stats = ppo_update(agent, optimizer, s, Batch.of(segments, s.gamma, s.gae_lambda))
        row = curve_row(episodes, s.window, global_step, update, time.time() - start)
        row.update(stats, lr=optimizer.param_groups[0]["lr"])
        log.record(row)

    wall = time.time() - start
    log.close()
    return agent, dict(steps_used=global_step, wall_time_s=wall, updates=update, episodes=len(episodes),
                       coded_action_counts=coded.call_counts(), coded_action_failures=coded.failures,
                       coded_action_errors=coded.errors, **log.summary())


if __name__ == "__main__":
    # `python -m rl.ppo` stays the command line's name. The command line (rl/cli.py) sits above this module
    # and imports it, so it is started here by name, as a script, rather than imported into the algorithm.
    import runpy

    runpy.run_module("rl.cli", run_name="__main__", alter_sys=True)
