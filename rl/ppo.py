"""Single-file PPO (in the style of cleanrl) whose action head holds coded actions next to primitives.

Read top to bottom: settings, the agent network and its acting, SMDP-GAE, rollout collection, the PPO
update, the loop.

Coded actions are options: one policy decision may run many primitive steps. The environment reports
how many (``info["primitive_steps"]``) and returns the reward already discounted inside the option, so
the advantage estimator discounts each transition by ``gamma ** primitive_steps`` (semi-Markov PPO).
Every primitive step counts toward ``total_steps``: sample efficiency is measured in environment steps,
never in policy decisions.

This file is the algorithm only. ``rl.training.train`` builds the environments (rl/env_factory.py) in a
vector mode (rl/vector_modes.py), runs ``train_loop`` and saves the policy (rl/policy_io.py); rl/cli.py is
the command line:  ``python -m rl.ppo --task collect_wood --total-steps 200000``

How a rollout acts (``CollectorSpec.make_policy``; here ``AgentPolicy``, through
``Agent.get_action_and_value``) and how a minibatch learns (``train_loop``'s ``make_step``; here
``AutogradStep``) are parameters. rl.training passes faster equivalents (rl/ppo_fast.py), which tests
hold to these; this file never imports them.
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any, Protocol

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn

from rl.options import CodedStats, info_column, infos_of_this_step, next_action_mask, share_allowance
from rl.run_log import RunLogger, curve_row, episode_outcome, outcome_counts
from rl.stats import wilson_interval

# ---- Settings -------------------------------------------------------------------------------------
STOP_MIN_EPISODES = 20  # episodes of the moving window before a training may be stopped for its rate


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
    stop_below: float | None = setting(None, (
        "stop early, leaving the rest of the budget unspent, when past half the budget the moving window's "
        f"success rate is below this rate beyond doubt (its 95% upper bound, over at least {STOP_MIN_EPISODES} "
        "episodes): a training that cannot reach the code it would replace (None: never)"))
    coded_prior: float = setting(0.0, (
        "share of the untrained policy's choices that go to the coded actions together, evenly among them "
        "(0: the usual near-uniform start over every action). With 0.9 the policy starts by calling the code "
        "and learns where to deviate from it, instead of first learning to call it"))
    prior_action: int | None = setting(None, (
        "index among the coded actions (0: the first) that alone gets the coded_prior share, the other actions "
        "sharing the rest evenly: the policy starts as that code (the one a sub-action was moved from) and "
        "learns where to leave it (None: the share is spread evenly over the coded actions)"))
    vector_mode: str = setting("sync", (
        "'sync' steps the environments in this process, 'batched' in one worker process per CPU core (each "
        "stepping its share of the envs in a loop), 'async' in one worker process each, 'actors' in one worker "
        "per core that also runs a copy of the policy and collects its share of each rollout (one message per "
        "rollout instead of one per step); 'auto' is 'actors' for Crafter with 2 or more envs and 'sync' "
        "otherwise (a CartPole step costs less than a pipe round trip). 'sync' and 'batched' give identical "
        "runs for a seed; 'actors' is reproducible on one machine, but each worker samples its own "
        "actions, so its runs change with the number of workers (by default, the CPU cores); 'ray' is 'actors' "
        "with Ray actors on a cluster (one per CPU of the cluster; the same seed and number of workers give "
        "the same run as 'actors'; docs/scaling.md)"))
    num_workers: int | None = setting(None, (
        "worker processes of the 'batched', 'actors' and 'ray' modes (None: one per CPU core, or per CPU of the "
        "Ray cluster; at most one per env). 'actors' samples each worker's actions from its own stream, so a "
        "fixed number gives the same run on any machine"))
    torch_threads: int = setting(
        1, "torch CPU threads of the learner (more did not speed up the small updates measurably on 2 cores)")
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

    def start_with_share(self, first: int, share: float, favoured: int | None = None) -> None:
        """Set the actor's output biases so that the untrained policy gives ``share`` of its probability to the
        actions from index ``first`` on (the coded actions), evenly, and the rest evenly to those before; with
        ``favoured`` (an index among the coded actions), that one action gets ``share`` and every other action
        an even part of the rest. The output weights start near zero (std 0.01), so the biases decide the first
        rollouts' choices."""
        n_late = self.n_actions - first
        if not 0.0 < share < 1.0 or n_late <= 0 or first <= 0:
            return
        if favoured is not None and not 0 <= favoured < n_late:
            raise ValueError(f"prior_action {favoured} is not one of the {n_late} coded actions (0..{n_late - 1})")
        out = self.actor[-1] if isinstance(self.actor, nn.Sequential) else self.actor
        bias = out.bias
        assert isinstance(bias, torch.Tensor)  # the actor's output is an nn.Linear, with a bias
        with torch.no_grad():
            if favoured is None:
                bias[:first] = math.log((1.0 - share) / first)
                bias[first:] = math.log(share / n_late)
            else:
                bias[:] = math.log((1.0 - share) / (self.n_actions - 1))
                bias[first + favoured] = math.log(share)

    def _features(self, obs: torch.Tensor) -> torch.Tensor:
        if self.is_image:
            return self.encoder(obs.permute(0, 3, 1, 2).float() / 255.0)
        return obs.reshape(obs.shape[0], -1).float()

    def get_value(self, obs: torch.Tensor) -> torch.Tensor:
        return self.critic(self._features(obs)).squeeze(-1)

    def get_action_and_value(self, obs: torch.Tensor, mask: torch.Tensor | None = None,
                             action: torch.Tensor | None = None, deterministic: bool = False,
                             generator: torch.Generator | None = None):
        feats = self._features(obs)
        logits = self.actor(feats)
        if mask is not None:
            logits = torch.where(mask, logits, torch.full_like(logits, MASKED_LOGIT))
        # plain tensor ops instead of torch.distributions.Categorical: its argument checks cost more than
        # the network itself at the small batches of the rollout loop
        logp_all = torch.log_softmax(logits, dim=-1)
        if action is None:
            action = (logits.argmax(-1) if deterministic
                      else torch.multinomial(logp_all.exp(), 1, generator=generator).squeeze(-1))
        logprob = logp_all.gather(-1, action.unsqueeze(-1)).squeeze(-1)
        entropy = -(logp_all.exp() * logp_all).sum(-1)  # masked entries: 0 * finite = 0, never NaN
        return action, logprob, entropy, self.critic(feats).squeeze(-1)


class Policy(Protocol):
    """The policy as a rollout acts with it: the envs' numpy arrays in, numpy arrays out."""

    def act(self, obs: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(actions, their log-probabilities, values) for a batch of observations and action masks."""
        ...

    def value(self, obs: np.ndarray) -> np.ndarray: ...


MakePolicy = Callable[[Agent, np.random.Generator], Policy]  # (agent, sampling stream) -> one rollout's policy


class AgentPolicy:
    """Acting through ``Agent.get_action_and_value``, as cleanrl does. A collector makes one per rollout; its
    actions are drawn by a torch generator seeded from the collector's ``rng``, so that a collector's action
    stream depends only on its seed, in an actor worker as in the learner's process."""

    def __init__(self, agent: Agent, rng: np.random.Generator):
        self.agent = agent
        self.device = next(agent.parameters()).device
        self.generator = torch.Generator(self.device).manual_seed(int(rng.integers(2**63)))

    @torch.no_grad()
    def act(self, obs: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        action, logprob, _, value = self.agent.get_action_and_value(
            torch.as_tensor(obs, device=self.device), torch.as_tensor(mask, device=self.device),
            generator=self.generator)
        return action.cpu().numpy(), logprob.cpu().numpy(), value.cpu().numpy()

    @torch.no_grad()
    def value(self, obs: np.ndarray) -> np.ndarray:
        return self.agent.get_value(torch.as_tensor(obs, device=self.device)).cpu().numpy()


# ---- Semi-Markov GAE ------------------------------------------------------------------------------
def smdp_gae(rewards: np.ndarray, values: np.ndarray, ends: np.ndarray, steps: np.ndarray,
             next_value: np.ndarray, gamma: float, lam: float) -> tuple[np.ndarray, np.ndarray]:
    """Generalised advantage estimation over transitions of variable duration.

    All arrays are (T, N). ``rewards[t]`` is already the discounted sum inside the option,
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
    advantages = np.zeros_like(rewards)
    last = np.zeros_like(next_value)
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
    """What a collector knows of the run (picklable: the 'actors' mode sends it to its workers)."""

    obs_shape: tuple[int, ...]
    n_actions: int
    n_primitive: int
    coded_names: tuple[str, ...]
    hidden_size: int
    num_steps: int
    gamma: float
    seed: int
    # how the collectors act: part of the spec because the spec is what reaches the 'actors' workers
    make_policy: MakePolicy = AgentPolicy


@dataclass
class Rollout:
    """(T, N, ...) numpy arrays of one rollout; the masks are kept so that the update sees the same ones.
    Numpy, not torch: a worker sends it back as plain arrays, and the learner moves it to its device once."""

    obs: Any
    masks: Any
    actions: Any
    logprobs: Any
    values: Any
    rewards: Any
    steps: Any
    ends: Any

    @classmethod
    def zeros(cls, spec: CollectorSpec, n_envs: int, obs_dtype: Any) -> Rollout:
        def z(*shape, dtype=np.float32):
            return np.zeros((spec.num_steps, n_envs, *shape), dtype=dtype)

        return cls(obs=z(*spec.obs_shape, dtype=obs_dtype), masks=z(spec.n_actions, dtype=np.bool_),
                   actions=z(dtype=np.int64), logprobs=z(), values=z(), rewards=z(), steps=z(), ends=z())

    def map(self, fn: Callable[[Any], Any]) -> Rollout:
        return Rollout(**{f.name: fn(getattr(self, f.name)) for f in fields(self)})


@dataclass
class Segment:
    """One collector's part of a rollout: its first t_used decisions, V of the observation after them, stats."""

    rollout: Rollout
    next_value: Any
    steps_used: int
    episodes: list  # (primitive steps into this rollout, return, length, success, outcome: rl.run_log.episode_outcome)
    coded: CodedStats


Collect = Callable[[Agent, int], list[Segment]]  # (policy, primitive steps left) -> the rollout's segments


class Collector:
    """Steps a vector env with the policy for one rollout (``num_steps`` decisions per env, or fewer once
    ``budget`` primitive steps are spent); keeps the current observation and running episodes between
    rollouts. ``seed`` seeds its envs (one int: env i gets seed + i); its action sampling is seeded by the
    run's seed and its first env's, so each collector of a run draws its own stream. Called, it is a
    ``Collect`` of one segment."""

    def __init__(self, envs: gym.vector.VectorEnv, spec: CollectorSpec, seed: int | list[int], threads: int = 1):
        self.envs, self.spec, self.seed, self.threads = envs, spec, seed, threads
        first_env_seed = seed if isinstance(seed, int) else seed[0]
        self.rng = np.random.default_rng([spec.seed, first_env_seed])
        self.N = N = envs.num_envs
        self.obs_dtype = np.uint8 if envs.single_observation_space.dtype == np.uint8 else np.float32
        self.buf = Rollout.zeros(spec, N, self.obs_dtype)
        self.ep_ret, self.ep_len = np.zeros(N), np.zeros(N, dtype=np.int64)
        # envs stepped in this process share one step allowance, so that a long coded call in the budget's
        # last step cannot overrun it (rl.options.StepAllowance)
        self.allowance = share_allowance(envs) if spec.n_actions > spec.n_primitive else None
        self.next_obs: np.ndarray | None = None

    def __call__(self, agent: Agent, budget: int) -> list[Segment]:
        return [self.collect(agent, budget)]

    def collect(self, agent: Agent, budget: int) -> Segment:
        spec, buf, N = self.spec, self.buf, self.N
        if self.next_obs is None:  # the first rollout resets the envs (world generation is training time)
            obs_np, infos = self.envs.reset(seed=self.seed)  # type: ignore[arg-type]  # a list: one per env
            self.next_obs = np.asarray(obs_np, dtype=self.obs_dtype)
            self.next_mask = next_action_mask(infos, N, spec.n_actions)
        policy = spec.make_policy(agent, self.rng)  # one per rollout: the weights do not change during it
        coded = CodedStats(spec.coded_names)
        episodes: list = []
        used, t_used = 0, 0
        for t in range(spec.num_steps):
            if agent.is_image:
                _keep_threads(self.threads)
            buf.obs[t] = self.next_obs
            buf.masks[t] = self.next_mask
            act_np, buf.logprobs[t], buf.values[t] = policy.act(self.next_obs, self.next_mask)
            buf.actions[t] = act_np

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
                final = np.stack([infos["final_obs"][i] for i in np.flatnonzero(cut)]).astype(self.obs_dtype)
                reward[cut] += (spec.gamma ** k[cut]) * policy.value(final)

            buf.rewards[t], buf.steps[t], buf.ends[t] = reward, k, done
            self.next_obs = np.asarray(obs_np, dtype=self.obs_dtype)
            self.next_mask = next_action_mask(infos, N, spec.n_actions)

            used += int(k.sum())
            self.ep_ret += raw_reward
            self.ep_len += k.astype(np.int64)
            coded.count_step(act_np, spec.n_primitive, step_info, N)
            if done.any():
                success = info_column(step_info, "success", N, np.nan)
                causes = step_info.get("death_cause")  # there only when an env's player died on this step
                for i in np.flatnonzero(done):
                    cause = causes[i] if causes is not None and step_info["_death_cause"][i] else None
                    episodes.append((used, float(self.ep_ret[i]), int(self.ep_len[i]), float(success[i]),
                                     episode_outcome(success[i], bool(term[i]), cause)))
                    self.ep_ret[i], self.ep_len[i] = 0.0, 0
            t_used = t + 1
            if used >= budget:
                break
        next_value = policy.value(self.next_obs)
        # copies: the buffer is refilled by the next rollout while the learner may still hold this one
        return Segment(buf.map(lambda x: x[:t_used].copy()), next_value, steps_used=used, episodes=episodes,
                       coded=coded)


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
    def of(cls, segments: list[Segment], gamma: float, lam: float, device: torch.device) -> Batch:
        # advantages per segment (each collector stopped after its own number of decisions), in numpy:
        # the recursion is a loop over time, and numpy's per-operation cost is a fraction of torch's
        gae = [smdp_gae(seg.rollout.rewards, seg.rollout.values, seg.rollout.ends, seg.rollout.steps,
                        seg.next_value, gamma, lam) for seg in segments]

        def flat(arrays: list[np.ndarray]) -> torch.Tensor:
            return torch.as_tensor(np.concatenate([a.reshape(-1, *a.shape[2:]) for a in arrays])).to(device)

        def field(name: str) -> torch.Tensor:
            return flat([getattr(seg.rollout, name) for seg in segments])

        return cls(obs=field("obs"), masks=field("masks"), actions=field("actions"), logprobs=field("logprobs"),
                   values=field("values"), advantages=flat([adv for adv, _ in gae]),
                   returns=flat([ret for _, ret in gae]))


def normalised_advantages(adv: torch.Tensor, s: PPOSettings) -> torch.Tensor:
    if s.norm_adv and adv.numel() > 1:
        std, mean = torch.std_mean(adv)
        return (adv - mean) / (std + 1e-8)
    return adv


def minibatch_stats(pg_loss, v_loss, entropy, logratio, ratio, s: PPOSettings) -> torch.Tensor:
    """(policy loss, value loss, entropy, approx KL, clip fraction) of one minibatch, as one tensor."""
    with torch.no_grad():
        approx_kl = ((ratio - 1) - logratio).mean()  # the low-variance k3 estimator
        clipfrac = ((ratio - 1.0).abs() > s.clip_coef).float().mean()
        return torch.stack([pg_loss, v_loss, entropy, approx_kl, clipfrac])


class Step(Protocol):
    """One minibatch's PPO step: leaves the clipped gradient in the agent's ``.grad`` (the optimizer steps)."""

    def prepare(self, b: Batch) -> Batch:
        """The batch as this step reads it, once per update."""
        ...

    def __call__(self, mb: Batch) -> torch.Tensor:
        """Backpropagate one minibatch; its ``minibatch_stats``."""
        ...


MakeStep = Callable[[Agent, PPOSettings], Step]  # built once per update


class AutogradStep:
    """One minibatch's clipped-surrogate loss, backpropagated by autograd (cleanrl's loss, any agent)."""

    def __init__(self, agent: Agent, s: PPOSettings):
        self.agent, self.s = agent, s

    def prepare(self, b: Batch) -> Batch:
        return b

    def __call__(self, mb: Batch) -> torch.Tensor:
        agent, s = self.agent, self.s
        _, newlogprob, entropy, newvalue = agent.get_action_and_value(mb.obs, mb.masks, mb.actions)
        logratio = newlogprob - mb.logprobs
        ratio = logratio.exp()
        mb_adv = normalised_advantages(mb.advantages, s)
        pg_loss = torch.max(-mb_adv * ratio, -mb_adv * torch.clamp(ratio, 1 - s.clip_coef, 1 + s.clip_coef)).mean()
        if s.clip_vloss:
            v_clipped = mb.values + torch.clamp(newvalue - mb.values, -s.clip_coef, s.clip_coef)
            v_loss = 0.5 * torch.max((newvalue - mb.returns) ** 2, (v_clipped - mb.returns) ** 2).mean()
        else:
            v_loss = 0.5 * ((newvalue - mb.returns) ** 2).mean()
        entropy_loss = entropy.mean()
        loss = pg_loss - s.ent_coef * entropy_loss + v_loss * s.vf_coef
        agent.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(agent.parameters(), s.max_grad_norm)
        return minibatch_stats(pg_loss.detach(), v_loss.detach(), entropy_loss.detach(), logratio.detach(),
                                ratio.detach(), s)


def ppo_update(agent: Agent, optimizer: torch.optim.Optimizer, s: PPOSettings, b: Batch,
               make_step: MakeStep = AutogradStep) -> dict[str, float]:
    """``update_epochs`` passes of clipped-surrogate minibatch steps (``make_step``'s) over the batch; the last
    losses.

    At these batch sizes the update's time goes to the number of tensor operations more than to their
    arithmetic: the batch is shuffled once per epoch (minibatches are then slices), and the logged
    statistics stay tensors until the end (one read per epoch, for the KL stop)."""
    batch = b.obs.shape[0]
    mb_size = max(1, batch // s.num_minibatches)
    step = make_step(agent, s)
    b = step.prepare(b)  # once per update (a faster step may narrow the observations here)
    stats: list[torch.Tensor] = []  # per minibatch: policy loss, value loss, entropy, approx KL, clip fraction
    for _epoch in range(s.update_epochs):
        perm = torch.randperm(batch, device=b.obs.device)
        e = Batch(**{f.name: torch.index_select(getattr(b, f.name), 0, perm) for f in fields(b)})
        for lo in range(0, batch, mb_size):
            mb = slice(lo, lo + mb_size)
            stats.append(step(Batch(**{f.name: getattr(e, f.name)[mb] for f in fields(e)})))
            optimizer.step()
        if s.target_kl is not None and stats[-1][3].item() > s.target_kl:
            break
    if not stats:
        return {"policy_loss": 0.0, "value_loss": 0.0, "entropy": 0.0, "approx_kl": 0.0, "clipfrac": 0.0}
    table = torch.stack(stats)
    pg, v, ent, kl, _ = table[-1].tolist()
    return {"policy_loss": pg, "value_loss": v, "entropy": ent, "approx_kl": kl, "clipfrac": table[:, 4].mean().item()}


def make_optimizer(agent: Agent, lr: float) -> torch.optim.Optimizer:
    """Adam (eps 1e-5, as cleanrl), in torch's fused form where this build has it: one kernel for all
    parameters instead of a handful of small ops per tensor, which was a tenth of the update's time."""
    try:
        return torch.optim.Adam(agent.parameters(), lr=lr, eps=1e-5, fused=True)
    except (RuntimeError, TypeError):  # a torch without fused Adam for this device
        return torch.optim.Adam(agent.parameters(), lr=lr, eps=1e-5)


# ---- Training loop --------------------------------------------------------------------------------
def train_loop(s: PPOSettings, spec: CollectorSpec, collect: Collect, device: torch.device, run_name: str,
               make_step: MakeStep = AutogradStep) -> tuple[Agent, dict[str, Any]]:
    """Collect, estimate advantages, update, log; until ``total_steps`` primitive steps are spent. ``collect``
    gathers each rollout (acting with ``spec.make_policy``): a Collector in this process, or
    rl.vector_modes.ActorPool in worker processes. ``make_step`` builds each update's minibatch step.
    Returns the agent and the run's numbers (rl.training.TrainResult's fields, all but the policy's path)."""
    agent = Agent(spec.obs_shape, spec.n_actions, s.hidden_size).to(device)
    agent.start_with_share(spec.n_primitive, s.coded_prior, s.prior_action)
    optimizer = make_optimizer(agent, s.learning_rate)
    log = RunLogger(s, run_name, total=s.total_steps)
    start = time.time()  # the clock includes the first reset (world generation), as SB3's learn() does

    episodes: list[tuple[int, float, int, float, str]] = []  # (global_step, return, length, success, outcome)
    coded = CodedStats(spec.coded_names)
    global_step, update = 0, 0
    collect_s = update_s = 0.0  # where the time goes: rollouts (envs + acting) and updates (learning)
    stopped: str | None = None  # why the training stopped before its budget (cannot_reach)

    while global_step < s.total_steps:
        update += 1
        if s.anneal_lr:
            optimizer.param_groups[0]["lr"] = s.learning_rate * max(0.0, 1.0 - global_step / s.total_steps)

        t0 = time.perf_counter()
        segments = collect(agent, s.total_steps - global_step)  # stops once the budget is spent, even mid-rollout
        t1 = time.perf_counter()
        _keep_threads(s.torch_threads)
        for seg in segments:
            episodes.extend((global_step + at, ret, length, succ, end) for at, ret, length, succ, end in seg.episodes)
            coded.merge(seg.coded)
        global_step += sum(seg.steps_used for seg in segments)

        stats = ppo_update(agent, optimizer, s, Batch.of(segments, s.gamma, s.gae_lambda, device), make_step)
        collect_s, update_s = collect_s + t1 - t0, update_s + time.perf_counter() - t1
        row = curve_row(episodes, s.window, global_step, update, time.time() - start)
        row.update(stats, lr=optimizer.param_groups[0]["lr"])
        log.record(row)
        stopped = cannot_reach(s, episodes, global_step)
        if stopped:
            break

    wall = time.time() - start
    log.close()
    return agent, dict(steps_used=global_step, wall_time_s=wall, collect_time_s=collect_s, update_time_s=update_s,
                       updates=update, episodes=len(episodes),
                       episode_outcomes=outcome_counts(e[4] for e in episodes),
                       recent_episode_outcomes=outcome_counts(e[4] for e in episodes[-s.window:]),
                       coded_action_counts=coded.call_counts(), coded_action_failures=coded.failures,
                       coded_action_errors=coded.errors, stopped_early=stopped, **log.summary())


def cannot_reach(s: PPOSettings, episodes: list, global_step: int) -> str | None:
    """Why the training stops now (``s.stop_below``), or None: past half the budget and with some of it left,
    the moving window's success is below the rate to reach even at its 95% Wilson upper bound."""
    recent = [e[3] for e in episodes[-s.window:] if not math.isnan(e[3])]
    if s.stop_below is None or not s.total_steps // 2 <= global_step < s.total_steps or \
            len(recent) < STOP_MIN_EPISODES:
        return None
    wins = int(sum(x >= 0.5 for x in recent))
    high = wilson_interval(wins, len(recent))[1]
    if high >= s.stop_below:
        return None
    return (f"stopped at step {global_step:,} of {s.total_steps:,}: {wins} of the last {len(recent)} episodes "
            f"succeeded (at most {high:.0%} at 95%), below the {s.stop_below:.0%} to reach")


if __name__ == "__main__":
    # `python -m rl.ppo` stays the command line's name. The command line (rl/cli.py) sits above this module
    # and imports it, so it is started here by name, as a script, rather than imported into the algorithm.
    import runpy

    runpy.run_module("rl.cli", run_name="__main__", alter_sys=True)
