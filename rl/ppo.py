"""Single-file PPO (in the style of cleanrl) whose action head holds coded actions next to primitives.

Read top to bottom: settings, networks, SMDP-GAE, rollout storage, the training loop, the CLI.

Coded actions are options: one policy decision may run many primitive steps. The environment reports
how many (``info["primitive_steps"]``) and returns the reward already discounted inside the option, so
the advantage estimator discounts each transition by ``gamma ** primitive_steps`` (semi-Markov PPO).
Every primitive step counts toward ``total_steps``: sample efficiency is measured in environment steps,
never in policy decisions.

Standalone:  ``python -m rl.ppo --task collect_wood --total-steps 200000``
"""
from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import json
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn

from rl.run_log import RunLogger


# --------------------------------------------------------------------------------------------------
# Settings
# --------------------------------------------------------------------------------------------------
@dataclass
class PPOSettings:
    """PPO hyper-parameters and run options. Defaults follow cleanrl's ppo.py."""

    seed: int = 1
    """seed of torch, numpy and of the training worlds (always below the evaluation seed range)"""
    total_steps: int = 200_000
    """budget in primitive environment steps (coded-action steps included)"""
    learning_rate: float = 2.5e-4
    """Adam learning rate"""
    anneal_lr: bool = True
    """decay the learning rate linearly to 0 over the step budget"""
    num_envs: int = 4
    """parallel environments"""
    num_steps: int = 128
    """policy decisions per environment per rollout"""
    gamma: float = 0.99
    """discount per primitive step (an option of k steps is discounted by gamma**k)"""
    gae_lambda: float = 0.95
    """GAE lambda, applied once per decision"""
    num_minibatches: int = 4
    """minibatches per update epoch"""
    update_epochs: int = 4
    """optimisation epochs over each rollout"""
    norm_adv: bool = True
    """normalise advantages within each minibatch"""
    clip_coef: float = 0.2
    """surrogate clipping coefficient"""
    clip_vloss: bool = True
    """clip the value loss as in the PPO paper"""
    ent_coef: float = 0.01
    """entropy bonus coefficient"""
    vf_coef: float = 0.5
    """value loss coefficient"""
    max_grad_norm: float = 0.5
    """global gradient-norm clip"""
    target_kl: float | None = None
    """stop the update epochs early once the approximate KL exceeds this (None: never)"""
    hidden_size: int = 64
    """width of the MLP layers (and of the CNN's last layer)"""
    vector_mode: str = "sync"
    """'sync' steps the environments in this process, 'batched' in one worker process per CPU core (each
    stepping its share of the envs in a loop), 'async' in one worker process each, 'actors' in one worker
    per core that also runs a copy of the policy and collects its share of each rollout (one message per
    rollout instead of one per step); 'auto' is 'actors' for Crafter with 2 or more envs and 'sync'
    otherwise (a CartPole step costs less than a pipe round trip). 'sync' and 'batched' give identical
    runs for a seed; 'actors' is reproducible on one machine, but each worker samples its own
    actions, so its runs change with the number of workers (by default, the CPU cores)"""
    torch_threads: int = 1
    """torch CPU threads of the learner (1 leaves the other cores to environment workers)"""
    device: str = "auto"
    """'auto' (cuda when present), 'cpu' or 'cuda'"""
    run_dir: str | None = None
    """folder for metrics, TensorBoard events, the curve PNG and policy.pt (None: runs/ppo/<name>-<time>)"""
    progress: str = "auto"
    """'auto' (rich bar on a terminal, log lines otherwise), 'bar', 'log' or 'none'"""
    log_every: int = 10
    """print a log line every this many updates (log mode)"""
    window: int = 50
    """episodes in the moving window of the learning curve"""

    @property
    def batch_size(self) -> int:
        return self.num_envs * self.num_steps

    @property
    def minibatch_size(self) -> int:
        return max(1, self.batch_size // self.num_minibatches)


def settings_docs() -> dict[str, str]:
    """Field name -> the docstring written under it (used for --help and the tool schema)."""
    tree = ast.parse(inspect.getsource(PPOSettings))
    docs: dict[str, str] = {}
    body = tree.body[0].body
    for node, nxt in zip(body, body[1:]):
        if isinstance(node, ast.AnnAssign) and isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant):
            docs[node.target.id] = str(nxt.value.value)
    return docs


# --------------------------------------------------------------------------------------------------
# Networks
# --------------------------------------------------------------------------------------------------
def layer_init(layer: nn.Module, std: float = math.sqrt(2), bias: float = 0.0) -> nn.Module:
    nn.init.orthogonal_(layer.weight, std)
    nn.init.constant_(layer.bias, bias)
    return layer


MASKED_LOGIT = -1e8  # finite, so a fully-masked row never produces NaN


class Agent(nn.Module):
    """Actor-critic. An MLP for flat (symbolic) observations, a small CNN for HxWxC images."""

    def __init__(self, obs_shape: tuple[int, ...], n_actions: int, hidden: int = 64):
        super().__init__()
        self.obs_shape = tuple(obs_shape)
        self.n_actions = n_actions
        self.is_image = len(self.obs_shape) == 3
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


# --------------------------------------------------------------------------------------------------
# Semi-Markov GAE
# --------------------------------------------------------------------------------------------------
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


# --------------------------------------------------------------------------------------------------
# Rollout storage
# --------------------------------------------------------------------------------------------------
class Rollout:
    """Pre-allocated (T, N, ...) tensors for one rollout; masks are kept so the update sees the same ones."""

    def __init__(self, T: int, N: int, obs_shape: tuple[int, ...], obs_dtype: torch.dtype,
                 n_actions: int, device: torch.device):
        def z(*shape, dtype=torch.float32):
            return torch.zeros(shape, dtype=dtype, device=device)

        self.obs = z(T, N, *obs_shape, dtype=obs_dtype)
        self.masks = z(T, N, n_actions, dtype=torch.bool)
        self.actions = z(T, N, dtype=torch.long)
        self.logprobs = z(T, N)
        self.rewards = z(T, N)
        self.ends = z(T, N)
        self.steps = z(T, N)
        self.values = z(T, N)


# --------------------------------------------------------------------------------------------------
# Rollout collection: in this process, or in actor workers that hold a copy of the policy
# --------------------------------------------------------------------------------------------------
@dataclass
class CollectorSpec:
    obs_shape: tuple[int, ...]
    n_actions: int
    n_primitive: int
    coded_names: tuple[str, ...]
    hidden_size: int
    num_steps: int
    gamma: float
    seed: int


@dataclass
class Segment:
    """One collector's part of a rollout: (t_used, n) tensors, V of the observation after them, and stats."""

    obs: Any
    masks: Any
    actions: Any
    logprobs: Any
    values: Any
    rewards: Any
    steps: Any
    ends: Any
    next_value: Any
    steps_used: int
    episodes: list  # (primitive steps into this rollout, return, length, success)
    coded_calls: np.ndarray
    coded_fail: dict
    coded_errors: list

    TENSORS = ("obs", "masks", "actions", "logprobs", "values", "rewards", "steps", "ends", "next_value")

    def to_numpy(self) -> "Segment":
        """Plain array copies: compact to pickle (a tensor view would carry its whole buffer)."""
        return dataclasses.replace(self, **{k: getattr(self, k).cpu().numpy().copy() for k in self.TENSORS})

    def to_device(self, device: torch.device) -> "Segment":
        return dataclasses.replace(self, **{k: torch.as_tensor(getattr(self, k), device=device)
                                            for k in self.TENSORS})


class Collector:
    """Steps a vector env with the policy for one rollout (``num_steps`` decisions per env, or fewer once
    ``budget`` primitive steps are spent); keeps the current observation and running episodes between
    rollouts."""

    def __init__(self, envs: gym.vector.VectorEnv, spec: CollectorSpec, device: torch.device, threads: int = 1):
        self.envs, self.spec, self.device, self.threads = envs, spec, device, threads
        self.N = envs.num_envs
        obs_space = envs.single_observation_space
        self.obs_dtype = torch.uint8 if obs_space.dtype == np.uint8 else torch.float32
        self.buf = Rollout(spec.num_steps, self.N, obs_space.shape, self.obs_dtype, spec.n_actions, device)
        self.ep_ret, self.ep_len = np.zeros(self.N), np.zeros(self.N, dtype=np.int64)
        # Envs stepped in this process share one allowance, so a long coded call in the budget's last step
        # cannot overrun it (rl.options.StepAllowance). Envs in other processes ('batched') cannot share it.
        self.allowance = None
        if spec.n_actions > spec.n_primitive and isinstance(envs, gym.vector.SyncVectorEnv):
            from rl.options import StepAllowance

            allowance = StepAllowance()
            try:
                envs.call("share_allowance", allowance)
                self.allowance = allowance
            except AttributeError:  # envs that run their own options (no CodedActionsWrapper) keep their limits
                pass

    def reset(self, seed) -> None:
        obs_np, infos = self.envs.reset(seed=seed)
        self.next_obs = torch.as_tensor(obs_np, device=self.device).to(self.obs_dtype)
        self.next_mask = torch.as_tensor(_mask(infos, self.N, self.spec.n_actions), device=self.device)

    def collect(self, agent: "Agent", budget: int) -> Segment:
        spec, buf, N, device = self.spec, self.buf, self.N, self.device
        n_coded = spec.n_actions - spec.n_primitive
        calls = np.zeros(max(n_coded, 1), dtype=np.int64)
        fail = dict.fromkeys(spec.coded_names, 0)
        errors: list[str] = []
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
            step_info = infos
            if done.any():
                # same-step autoreset: this step's own info of a finished env sits in final_info
                step_info = _merge_final(infos, done, N)
            k = _column(step_info, "primitive_steps", N, 1.0)
            raw_reward = _column(step_info, "option_reward", N, np.nan)
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
            self.next_mask = torch.as_tensor(_mask(infos, N, spec.n_actions), device=device)

            used += int(k.sum())
            self.ep_ret += raw_reward
            self.ep_len += k.astype(np.int64)
            if n_coded:
                np.add.at(calls, act_np[act_np >= spec.n_primitive] - spec.n_primitive, 1)
                _collect_coded_errors(step_info, N, fail, errors)
            if done.any():
                success = _column(step_info, "success", N, np.nan)
                for i in np.flatnonzero(done):
                    episodes.append((used, float(self.ep_ret[i]), int(self.ep_len[i]), float(success[i])))
                    self.ep_ret[i], self.ep_len[i] = 0.0, 0
            t_used = t + 1
            if used >= budget:
                break
        _keep_threads(self.threads)
        with torch.no_grad():
            next_value = agent.get_value(self.next_obs)
        return Segment(obs=buf.obs[:t_used], masks=buf.masks[:t_used], actions=buf.actions[:t_used],
                       logprobs=buf.logprobs[:t_used], values=buf.values[:t_used], rewards=buf.rewards[:t_used],
                       steps=buf.steps[:t_used], ends=buf.ends[:t_used], next_value=next_value, steps_used=used,
                       episodes=episodes, coded_calls=calls, coded_fail=fail, coded_errors=errors)


def _actor_collect(envs: list, state: dict, spec: CollectorSpec, seeds: list, weights: dict,
                   budget: int) -> Segment:
    """Runs inside a BatchedVectorEnv worker: collect this worker's slice of the rollout with its own copy
    of the policy (always on the CPU), so the whole rollout costs one message per worker, not one per step."""
    if "collector" not in state:
        torch.set_num_threads(1)
        torch.manual_seed(spec.seed * 7919 + seeds[0])  # each worker samples its own action stream
        local = gym.vector.SyncVectorEnv([lambda e=e: e for e in envs],
                                         autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
        state["agent"] = Agent(spec.obs_shape, spec.n_actions, spec.hidden_size)
        state["collector"] = Collector(local, spec, torch.device("cpu"))
        state["collector"].reset(seed=seeds)
    state["agent"].load_state_dict({k: torch.from_numpy(v) for k, v in weights.items()})
    return state["collector"].collect(state["agent"], budget).to_numpy()


class ActorPool:
    """The 'actors' vector mode: BatchedVectorEnv's workers each hold a copy of the policy and collect
    their envs' part of every rollout; the learner sends the weights once per rollout."""

    def __init__(self, envs, spec: CollectorSpec, device: torch.device):
        self.envs, self.spec, self.device = envs, spec, device
        self.slices = envs.worker_slices

    def __call__(self, agent: "Agent", budget: int) -> list[Segment]:
        weights = {k: v.detach().cpu().numpy() for k, v in agent.state_dict().items()}
        n = self.envs.num_envs
        # each worker gets its share of the budget left, so the rollout stops near it as in-process would
        jobs = [(self.spec, list(range(self.spec.seed + lo, self.spec.seed + hi)), weights,
                 max(1, math.ceil(budget * (hi - lo) / n))) for lo, hi in self.slices]
        return [seg.to_device(self.device) for seg in self.envs.run_in_workers(_actor_collect, jobs)]


# --------------------------------------------------------------------------------------------------
# Training
# --------------------------------------------------------------------------------------------------
@dataclass
class TrainResult:
    steps_used: int
    """primitive environment steps spent in training"""
    wall_time_s: float
    updates: int
    episodes: int
    curve: list[dict[str, float]]
    """one row per update: step, success_rate, mean_return, mean_length (moving window)"""
    coded_action_counts: dict[str, int]
    coded_action_failures: dict[str, int]
    coded_action_errors: list[str]
    policy_path: str
    run_dir: str
    final_train_success_rate: float | None
    final_mean_return: float | None


def _resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError("device='cuda' was asked for but no CUDA GPU is available; use 'auto' or 'cpu'")
    return torch.device(name)


def _column(infos: dict, key: str, n: int, default: float, dtype=np.float64) -> np.ndarray:
    """One info field as an (n,) array, with ``default`` where an env did not report it."""
    out = np.full(n, default, dtype=dtype)
    if key in infos:
        present = infos.get("_" + key, np.ones(n, dtype=bool))
        out[present] = np.asarray(infos[key])[present]
    return out


VECTOR_MODES = ("auto", "sync", "batched", "async", "actors")


def resolve_vector_mode(mode: str, env_source, num_envs: int) -> str:
    """'auto' -> 'actors' for Crafter with >= 2 envs (a Crafter rollout costs far more than sending the
    policy's weights), 'sync' otherwise."""
    if mode not in VECTOR_MODES:
        raise ValueError(f"vector_mode must be one of {', '.join(map(repr, VECTOR_MODES))}, got {mode!r}")
    if mode == "auto":
        return "actors" if env_source.config is not None and num_envs >= 2 else "sync"
    return mode


def make_vector_env(env_fns: list, mode: str) -> gym.vector.VectorEnv:
    if mode not in VECTOR_MODES[1:]:
        raise ValueError(f"vector_mode must be 'sync', 'batched', 'async' or 'actors' here, got {mode!r}")
    kwargs = dict(autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    if mode in ("batched", "actors"):
        from rl.vector import BatchedVectorEnv

        return BatchedVectorEnv(env_fns)  # always same-step autoreset
    if mode == "async":
        from rl.vector import default_context

        return gym.vector.AsyncVectorEnv(env_fns, context=default_context(), **kwargs)
    return gym.vector.SyncVectorEnv(env_fns, **kwargs)


def train(settings: PPOSettings, source: Any, run_name: str | None = None) -> TrainResult:
    """Train PPO. ``source`` is an ``rl.config.RLConfig`` (Crafter) or a gymnasium env id (e.g. CartPole-v1)."""
    from rl.env_factory import EnvSource

    env_source = EnvSource.from_any(source)
    s = settings
    if s.total_steps < 1 or s.num_envs < 1 or s.num_steps < 1:
        raise ValueError("total_steps, num_envs and num_steps must all be >= 1")
    torch.manual_seed(s.seed)
    np.random.seed(s.seed)
    torch.set_num_threads(max(1, s.torch_threads))
    device = _resolve_device(s.device)

    mode = resolve_vector_mode(s.vector_mode, env_source, s.num_envs)
    envs = make_vector_env(env_source.env_fns(s.num_envs, s.seed, s.gamma), mode)
    try:
        return _train_loop(s, env_source, envs, device, run_name or env_source.name, actors=mode == "actors")
    finally:
        envs.close()


def _train_loop(s: PPOSettings, env_source, envs, device: torch.device, run_name: str,
                actors: bool = False) -> TrainResult:
    if not isinstance(envs.single_action_space, gym.spaces.Discrete):
        raise ValueError(f"PPO here needs a Discrete action space, got {envs.single_action_space}")
    obs_space = envs.single_observation_space
    n_actions = int(envs.single_action_space.n)
    coded_names = env_source.coded_action_names()
    n_primitive = n_actions - len(coded_names)

    agent = Agent(obs_space.shape, n_actions, s.hidden_size).to(device)
    optimizer = torch.optim.Adam(agent.parameters(), lr=s.learning_rate, eps=1e-5)
    log = RunLogger(s, run_name, total=s.total_steps)
    spec = CollectorSpec(obs_shape=tuple(obs_space.shape), n_actions=n_actions, n_primitive=n_primitive,
                         coded_names=tuple(coded_names), hidden_size=s.hidden_size, num_steps=s.num_steps, gamma=s.gamma, seed=s.seed)
    start = time.time()  # the clock includes the first reset (world generation), as SB3's learn() does
    if actors:
        collect = ActorPool(envs, spec, device)
    else:
        collector = Collector(envs, spec, device, threads=s.torch_threads)
        collector.reset(seed=s.seed)
        collect = lambda policy, budget: [collector.collect(policy, budget)]  # noqa: E731

    episodes: list[tuple[int, float, int, float]] = []  # (global_step, return, length, success)
    coded_counts = np.zeros(max(len(coded_names), 1), dtype=np.int64)
    coded_fail = dict.fromkeys(coded_names, 0)
    coded_errors: list[str] = []
    global_step, update = 0, 0

    while global_step < s.total_steps:
        update += 1
        if s.anneal_lr:
            optimizer.param_groups[0]["lr"] = s.learning_rate * max(0.0, 1.0 - global_step / s.total_steps)

        # ---- collect: stop as soon as the budget is spent, even mid-rollout -------------------------
        segments = collect(agent, s.total_steps - global_step)
        _keep_threads(s.torch_threads)
        for seg in segments:
            episodes.extend((global_step + at, ret, length, succ) for at, ret, length, succ in seg.episodes)
            coded_counts += seg.coded_calls
            for name, n in seg.coded_fail.items():
                coded_fail[name] += n
            coded_errors.extend(e for e in seg.coded_errors if e not in coded_errors and len(coded_errors) < 20)
        global_step += sum(seg.steps_used for seg in segments)

        # ---- advantages (per segment: each collector stopped after its own number of decisions) -------
        with torch.no_grad():
            gae = [smdp_gae(seg.rewards, seg.values, seg.ends, seg.steps, seg.next_value, s.gamma, s.gae_lambda)
                   for seg in segments]

        # ---- optimise -----------------------------------------------------------------------------
        def flat(name: str, *shape: int) -> torch.Tensor:
            return torch.cat([getattr(seg, name).reshape(-1, *shape) for seg in segments])

        b_obs, b_masks = flat("obs", *obs_space.shape), flat("masks", n_actions)
        b_actions, b_logprobs, b_values = flat("actions"), flat("logprobs"), flat("values")
        b_adv = torch.cat([adv.reshape(-1) for adv, _ in gae])
        b_returns = torch.cat([ret.reshape(-1) for _, ret in gae])
        batch = b_obs.shape[0]
        mb_size = max(1, batch // s.num_minibatches)
        stats = _update(agent, optimizer, s, batch, mb_size, b_obs, b_masks, b_actions, b_logprobs,
                        b_adv, b_returns, b_values)

        row = _curve_row(episodes, s.window, global_step, update, time.time() - start)
        row.update(stats, lr=optimizer.param_groups[0]["lr"])
        log.record(row)

    wall = time.time() - start
    policy_path = save_policy(Path(log.run_dir) / "policy.pt", agent, env_source, s, n_primitive, coded_names)
    log.close()
    curve = log.rows
    last = curve[-1] if curve else {}
    return TrainResult(
        steps_used=global_step, wall_time_s=wall, updates=update, episodes=len(episodes),
        curve=[{k: r[k] for k in ("step", "success_rate", "mean_return", "mean_length")} for r in curve],
        coded_action_counts={n: int(c) for n, c in zip(coded_names, coded_counts)},
        coded_action_failures=coded_fail, coded_action_errors=coded_errors,
        policy_path=str(policy_path), run_dir=str(log.run_dir),
        final_train_success_rate=_nan_to_none(last.get("success_rate")),
        final_mean_return=_nan_to_none(last.get("mean_return")),
    )


def _update(agent, optimizer, s: PPOSettings, batch, mb_size, b_obs, b_masks, b_actions, b_logprobs,
            b_adv, b_returns, b_values) -> dict[str, float]:
    clipfracs, approx_kl = [], torch.tensor(0.0)
    pg_loss = v_loss = entropy_loss = torch.tensor(0.0)
    for _epoch in range(s.update_epochs):
        perm = torch.randperm(batch, device=b_obs.device)
        for lo in range(0, batch, mb_size):
            mb = perm[lo:lo + mb_size]
            _, newlogprob, entropy, newvalue = agent.get_action_and_value(b_obs[mb], b_masks[mb], b_actions[mb])
            logratio = newlogprob - b_logprobs[mb]
            ratio = logratio.exp()
            with torch.no_grad():
                approx_kl = ((ratio - 1) - logratio).mean()  # the low-variance k3 estimator
                clipfracs.append(((ratio - 1.0).abs() > s.clip_coef).float().mean().item())
            mb_adv = b_adv[mb]
            if s.norm_adv and mb.numel() > 1:
                mb_adv = (mb_adv - mb_adv.mean()) / (mb_adv.std() + 1e-8)
            pg_loss = torch.max(-mb_adv * ratio,
                                -mb_adv * torch.clamp(ratio, 1 - s.clip_coef, 1 + s.clip_coef)).mean()
            if s.clip_vloss:
                v_unclipped = (newvalue - b_returns[mb]) ** 2
                v_clipped = b_values[mb] + torch.clamp(newvalue - b_values[mb], -s.clip_coef, s.clip_coef)
                v_loss = 0.5 * torch.max(v_unclipped, (v_clipped - b_returns[mb]) ** 2).mean()
            else:
                v_loss = 0.5 * ((newvalue - b_returns[mb]) ** 2).mean()
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


def _keep_threads(n: int) -> None:
    """Re-assert the learner's thread count: libraries in the env (numba's OpenMP pool, used by Crafter's
    world generation) can reset the process-wide OpenMP thread count, which made updates ~10x slower."""
    if torch.get_num_threads() != max(1, n):
        torch.set_num_threads(max(1, n))


def _mask(infos: dict, n: int, n_actions: int) -> np.ndarray:
    """Next-step action mask; envs that publish none allow every action."""
    out = np.ones((n, n_actions), dtype=bool)
    if "action_mask" in infos:
        present = infos.get("_action_mask", np.ones(n, dtype=bool))
        out[present] = np.asarray(infos["action_mask"], dtype=bool)[present]
    return out


def _merge_final(infos: dict, done: np.ndarray, n: int) -> dict:
    """Infos of this step for every env: ``final_info`` rows for finished envs, top-level rows otherwise."""
    final = infos.get("final_info", {})
    merged: dict[str, Any] = {}
    for key in set(infos) | set(final):
        if key.startswith("_") or key in ("final_info", "final_obs"):
            continue
        top, fin = infos.get(key), final.get(key)
        if isinstance(top, dict) or isinstance(fin, dict):
            continue
        arr = None
        present = np.zeros(n, dtype=bool)
        for src, rows in ((infos, ~done), (final, done)):
            if key not in src:
                continue
            val = np.asarray(src[key])
            has = np.asarray(src.get("_" + key, np.ones(n, dtype=bool))) & rows
            if arr is None:
                arr = np.zeros_like(val)
            arr[has] = val[has]
            present |= has
        merged[key], merged["_" + key] = arr, present
    return merged


def _collect_coded_errors(step_info: dict, n: int, fails: dict[str, int], errors: list[str]) -> None:
    if "coded_error" not in step_info:
        return
    present = step_info.get("_coded_error", np.ones(n, dtype=bool))
    for i in np.flatnonzero(present):
        err, name = step_info["coded_error"][i], step_info.get("coded_call", [None] * n)[i]
        if err and name in fails:
            fails[name] += 1
            msg = f"{name}: {err}"
            if msg not in errors and len(errors) < 20:  # keep distinct messages, bounded
                errors.append(msg)


def _curve_row(episodes, window: int, step: int, update: int, elapsed: float) -> dict[str, float]:
    recent = episodes[-window:]
    succ = [e[3] for e in recent if not math.isnan(e[3])]
    return {
        "step": step, "update": update, "episodes": len(episodes),
        "success_rate": float(np.mean(succ)) if succ else float("nan"),
        "mean_return": float(np.mean([e[1] for e in recent])) if recent else float("nan"),
        "mean_length": float(np.mean([e[2] for e in recent])) if recent else float("nan"),
        "sps": step / max(elapsed, 1e-9),
    }


def _nan_to_none(x):
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


# --------------------------------------------------------------------------------------------------
# Saving and loading
# --------------------------------------------------------------------------------------------------
POLICY_FORMAT = "rlgpt-ppo-policy-v1"


def save_policy(path: Path, agent: Agent, env_source, s: PPOSettings, n_primitive: int,
                coded_names: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({
        "format": POLICY_FORMAT,
        "state_dict": {k: v.cpu() for k, v in agent.state_dict().items()},
        "obs_shape": list(agent.obs_shape),
        "n_actions": agent.n_actions,
        "n_primitive": n_primitive,
        "hidden_size": s.hidden_size,
        "coded_action_names": coded_names,
        "coded_action_sources": env_source.coded_action_sources(),
        "env": env_source.to_json(),
        "settings": dataclasses.asdict(s),
    }, path)
    return path


def load_policy(path: str | Path, device: str = "cpu") -> tuple[Agent, dict]:
    """Load a saved policy; returns the agent (eval mode) and the saved metadata."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no saved policy at {path} (train_ppo writes <run_dir>/policy.pt)")
    data = torch.load(path, map_location=device, weights_only=False)
    if not isinstance(data, dict) or data.get("format") != POLICY_FORMAT:
        raise ValueError(f"{path} is not a policy saved by rl.ppo (expected format {POLICY_FORMAT})")
    agent = Agent(tuple(data["obs_shape"]), int(data["n_actions"]), int(data["hidden_size"]))
    agent.load_state_dict(data["state_dict"])
    agent.eval()
    return agent.to(device), data


# --------------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------------
def _parse_bool(text: str) -> bool:
    if text.lower() in ("1", "true", "yes", "on"):
        return True
    if text.lower() in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true/false, got {text!r}")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m rl.ppo", description=__doc__.split("\n")[0])
    p.add_argument("--task", default="collect_wood", help="Crafter task name (see envs.tasks)")
    p.add_argument("--env-id", default=None, help="train on a gymnasium env id instead (e.g. CartPole-v1)")
    p.add_argument("--obs", default="symbolic", choices=["symbolic", "pixels"], help="Crafter observation kind")
    p.add_argument("--coded", nargs="*", default=[], metavar="FILE",
                   help="Python files of coded actions to append to the action head")
    p.add_argument("--max-episode-steps", type=int, default=None, help="Crafter episode limit (default: the task's)")
    p.add_argument("--eval-episodes", type=int, default=20, help="held-out episodes evaluated after training")
    docs = settings_docs()
    for f in dataclasses.fields(PPOSettings):
        flag = "--" + f.name.replace("_", "-")
        default = f.default
        kind = {"bool": _parse_bool, "int": int, "float": float, "str": str}.get(str(f.type).split(" |")[0])
        if f.type in ("float | None",):
            kind = float
        if f.type in ("str | None",):
            kind = str
        p.add_argument(flag, type=kind or str, default=default, help=f"{docs.get(f.name, '')} (default {default})")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    settings = PPOSettings(**{f.name: getattr(args, f.name) for f in dataclasses.fields(PPOSettings)})
    try:
        if args.env_id:
            source: Any = args.env_id
        else:
            from rl.config import RLConfig, config_error_message

            sources = [Path(f).read_text() for f in args.coded]
            try:
                source = RLConfig(task=args.task, obs_kind=args.obs, coded_actions=sources,
                                  max_episode_steps=args.max_episode_steps, eval_episodes=args.eval_episodes)
            except Exception as exc:  # pydantic ValidationError -> one readable message
                print(f"error: {config_error_message(exc)}", file=sys.stderr)
                return 2
        result = train(settings, source)
    except (ValueError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    summary = {k: v for k, v in dataclasses.asdict(result).items() if k != "curve"}
    if not args.env_id and args.eval_episodes > 0:
        from rl.evaluate import evaluate_policy

        summary["evaluation"] = evaluate_policy(result.policy_path, episodes=args.eval_episodes).as_dict()
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
