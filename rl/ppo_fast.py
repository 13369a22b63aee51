"""Speed machinery for rl/ppo.py's loop: the same acting and the same PPO gradient, with less overhead.

At Crafter's sizes (a few envs per rollout step, minibatches of ~128, a 1,282-wide one-hot input) the time
of the small MLP goes to framework overhead more than to arithmetic. ``RolloutPolicy`` acts in numpy on a
block-diagonal copy of the MLP's weights (the CNN in torch, sampled the same way), ``HandGradientStep``
backpropagates the MLP's clipped-surrogate loss by hand into one flat gradient buffer, and both multiply
only the input columns in use. rl/training.py injects them into rl.ppo's loop (``CollectorSpec.make_policy``,
``train_loop(make_step=fast_step)``); rl/ppo.py never imports this module. Their contract with rl/ppo.py is
the equivalence tests: tests/test_ppo_update.py (HandGradientStep against AutogradStep) and
tests/test_ppo_training.py (RolloutPolicy against Agent.get_action_and_value).
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch
import torch.nn as nn

from rl.ppo import MASKED_LOGIT, Agent, AutogradStep, Batch, PPOSettings, minibatch_stats, normalised_advantages

# The first layer multiplies only the input columns some observation uses when fewer than this share of
# them are (acting and the update alike): Crafter's one-hot view sets ~70 of its 1,282 entries.
SPARSE_SHARE = 0.5


def mlp_linears(agent: Agent) -> tuple[list[nn.Linear], list[nn.Linear]]:
    """The MLP's actor and critic layers, input to output (empty for the CNN)."""
    if agent.is_image:
        return [], []

    def linears(seq: nn.Module) -> list[nn.Linear]:
        return [m for m in seq.modules() if isinstance(m, nn.Linear)]

    return linears(agent.actor), linears(agent.critic)


class RolloutPolicy:
    """The policy as the rollout loop runs it: numpy in, numpy out, no autograd, its own sampling stream.

    For the MLP the forward pass is plain numpy on a copy of the weights taken once per rollout: at a
    rollout's batch (a few envs) a torch call costs more in framework overhead than in arithmetic, and
    acting took as long as a Crafter step. The actor's and the critic's layers are laid side by side
    (block-diagonal), so one pass of three matrix products serves both. The CNN runs in torch under
    ``inference_mode``. Actions are drawn from ``rng`` (inverse CDF), so a collector's action stream
    depends only on its seed. The update recomputes log-probabilities in torch; the two agree to float32
    rounding (the first epoch's ratios are 1 within ~1e-6).
    """

    def __init__(self, agent: Agent, rng: np.random.Generator):
        self.agent, self.rng = agent, rng
        self.n_actions = agent.n_actions
        self.layers: list[tuple[np.ndarray, np.ndarray]] = []
        if not agent.is_image:
            def arrays(layers: list[nn.Linear]) -> list[tuple[np.ndarray, np.ndarray]]:
                return [(m.weight.detach().cpu().numpy().T, m.bias.detach().cpu().numpy()) for m in layers]

            actor, critic = (arrays(layers) for layers in mlp_linears(agent))
            (wa, ba), (wc, bc) = actor[0], critic[0]
            self.layers.append((np.concatenate([wa, wc], axis=1), np.concatenate([ba, bc])))  # same input
            for (wa, ba), (wc, bc) in zip(actor[1:], critic[1:]):
                w = np.zeros((wa.shape[0] + wc.shape[0], wa.shape[1] + wc.shape[1]), dtype=np.float32)
                w[:wa.shape[0], :wa.shape[1]], w[wa.shape[0]:, wa.shape[1]:] = wa, wc
                self.layers.append((w, np.concatenate([ba, bc])))

    def _forward(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(logits, values) for a batch of observations."""
        if not self.layers:
            device = next(self.agent.parameters()).device
            with torch.inference_mode():
                feats = self.agent._features(torch.as_tensor(obs, device=device))
                return self.agent.actor(feats).cpu().numpy(), self.agent.critic(feats)[:, 0].cpu().numpy()
        z = obs.reshape(obs.shape[0], -1).astype(np.float32, copy=False)
        (w_in, b_in), *hidden, (w_out, b_out) = self.layers
        used = np.flatnonzero(z.any(axis=0))
        if len(used) < SPARSE_SHARE * z.shape[1]:  # a sparse input: multiply only its used columns
            z = np.tanh(z[:, used] @ w_in[used] + b_in)
        else:
            z = np.tanh(z @ w_in + b_in)
        for w, b in hidden:
            z = np.tanh(z @ w + b)
        out = z @ w_out + b_out
        return out[:, :self.n_actions], out[:, self.n_actions]

    def value(self, obs: np.ndarray) -> np.ndarray:
        return self._forward(obs)[1]

    def act(self, obs: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(actions, their log-probabilities, values) for a batch of observations and action masks."""
        logits, values = self._forward(obs)
        logits = np.where(mask, logits, np.float32(MASKED_LOGIT))
        top = logits.max(axis=1)
        cdf = np.cumsum(np.exp(logits - top[:, None]), axis=1)
        total = cdf[:, -1]
        # the first index whose cumulative weight exceeds u: never a masked (zero-weight) one
        u = self.rng.random(len(logits)) * total
        actions = np.minimum((cdf <= u[:, None]).sum(axis=1), self.n_actions - 1)
        logprobs = logits[np.arange(len(logits)), actions] - top - np.log(total)
        return actions, logprobs.astype(np.float32, copy=False), values.astype(np.float32, copy=False)


def _max_grads(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """How torch.max(a, b) splits its gradient: all to the larger, half each on a tie."""
    tie = 0.5 * (a == b)
    return (a > b) + tie, (b > a) + tie


class HandGradientStep:
    """The same loss and gradient as AutogradStep for the MLP agent, derived by hand.

    At a minibatch of 128 the autograd engine's bookkeeping costs more than the arithmetic of the
    small MLP (3.4 vs 2.2 ms per minibatch here), and the update runs while the actor workers wait.
    The gradient is written into one flat buffer that the parameters' ``.grad`` are views of, so that
    clipping its norm is two operations. The actor's and the critic's first layers share their input,
    so they run as one product; and where the batch's observations leave most input columns at zero
    (Crafter's one-hot view: ~250-320 of 1,282 columns used in a rollout), ``prepare`` narrows the
    batch to the used columns once per update, and the first layer multiplies only those: the other
    columns' weight gradient is exactly zero either way. tests/test_ppo_update.py checks it against
    autograd, for every loss option, at ties of the clipped terms, and on a narrowed batch."""

    def __init__(self, agent: Agent, s: PPOSettings):
        self.s = s
        self.actor, self.critic = mlp_linears(agent)
        params = list(agent.parameters())
        self.flat = torch.zeros(sum(p.numel() for p in params), device=params[0].device)
        views: dict[torch.Tensor, torch.Tensor] = {}  # a parameter (hashed by identity) -> its gradient's view
        at = 0
        for p in params:
            views[p] = self.flat[at:at + p.numel()].view_as(p)
            at += p.numel()
            p.grad = views[p]
        self.views = views
        self.columns: torch.Tensor | None = None  # the input columns the first layer multiplies (None: all)

    def prepare(self, b: Batch) -> Batch:
        """The batch as the steps read it: observations as flat float features, narrowed to the columns that
        some observation of the batch uses when that is less than SPARSE_SHARE of them."""
        x = b.obs.reshape(b.obs.shape[0], -1).float()
        used = torch.nonzero(x.any(0)).squeeze(1)
        if used.numel() < SPARSE_SHARE * x.shape[1]:
            self.columns, x = used, x.index_select(1, used)
            for layer in (self.actor[0], self.critic[0]):  # the other columns' gradient stays zero all update
                self.views[layer.weight].zero_()
        else:
            self.columns = None
        return replace(b, obs=x)

    def _first_layer(self, x: torch.Tensor) -> torch.Tensor:
        """tanh of the actor's and the critic's first layers side by side: (n, 2 * hidden)."""
        a, c = self.actor[0], self.critic[0]
        if self.columns is None:
            w = torch.cat([a.weight, c.weight])
        else:
            w = torch.cat([a.weight.index_select(1, self.columns), c.weight.index_select(1, self.columns)])
        return torch.tanh(torch.addmm(torch.cat([a.bias, c.bias]), x, w.t()))

    def _first_layer_backward(self, x: torch.Tensor, h: torch.Tensor, d_h: torch.Tensor) -> None:
        """The first layers' gradients from d(loss)/dh, h = tanh(...) of both (n, 2 * hidden)."""
        d = d_h * (1 - h * h)
        w_grad, b_grad = d.t() @ x, d.sum(0)
        at = 0
        for layer in (self.actor[0], self.critic[0]):
            rows = slice(at, at + layer.out_features)
            if self.columns is None:
                self.views[layer.weight].copy_(w_grad[rows])
            else:  # the unused columns' gradient is zero (prepare): their input is zero in every row
                self.views[layer.weight].index_copy_(1, self.columns, w_grad[rows])
            self.views[layer.bias].copy_(b_grad[rows])
            at += layer.out_features

    def _forward(self, x: torch.Tensor, layers: list[nn.Linear]) -> tuple[list[torch.Tensor], torch.Tensor]:
        hidden = []
        for layer in layers[:-1]:
            x = torch.tanh(torch.addmm(layer.bias, x, layer.weight.t()))
            hidden.append(x)
        return hidden, torch.addmm(layers[-1].bias, x, layers[-1].weight.t())

    def _backward(self, x: torch.Tensor, layers: list[nn.Linear], hidden: list[torch.Tensor],
                  d_out: torch.Tensor) -> torch.Tensor:
        """Gradients of ``layers`` (after the first) from d(loss)/d(output); returns d(loss)/dx."""
        inputs = [x, *hidden]
        d = d_out
        for i in reversed(range(len(layers))):
            layer = layers[i]
            torch.mm(d.t(), inputs[i], out=self.views[layer.weight])
            torch.sum(d, 0, out=self.views[layer.bias])
            d = d @ layer.weight
            if i:
                d = d * (1 - hidden[i - 1] * hidden[i - 1])  # tanh' = 1 - tanh**2
        return d

    @torch.no_grad()
    def __call__(self, mb: Batch) -> torch.Tensor:
        """One minibatch of a batch that went through ``prepare``."""
        s = self.s
        x = mb.obs
        n = x.shape[0]
        h = self._first_layer(x)
        width = self.actor[0].out_features
        actor_in, critic_in = h[:, :width], h[:, width:]
        actor_hidden, logits = self._forward(actor_in, self.actor[1:])
        critic_hidden, value = self._forward(critic_in, self.critic[1:])
        value = value[:, 0]

        logp_all = torch.log_softmax(logits.masked_fill(~mb.masks, MASKED_LOGIT), dim=-1)
        probs = logp_all.exp()
        newlogprob = logp_all.gather(1, mb.actions[:, None])[:, 0]
        entropy = -(probs * logp_all).sum(-1)
        logratio = newlogprob - mb.logprobs
        ratio = logratio.exp()
        adv = normalised_advantages(mb.advantages, s)
        unclipped, clipped = -adv * ratio, -adv * torch.clamp(ratio, 1 - s.clip_coef, 1 + s.clip_coef)
        pg_loss = torch.max(unclipped, clipped).mean()
        inside = (ratio >= 1 - s.clip_coef) & (ratio <= 1 + s.clip_coef)  # where clamp passes its gradient
        to_unclipped, to_clipped = _max_grads(unclipped, clipped)
        d_newlogprob = -adv * (to_unclipped + to_clipped * inside) * ratio / n
        # d(log p_a)/d logits = onehot(a) - p;  d(entropy)/d logits = -p * (log p + entropy)
        d_logits = probs * (s.ent_coef / n * (logp_all + entropy[:, None]) - d_newlogprob[:, None])
        d_logits.scatter_add_(1, mb.actions[:, None], d_newlogprob[:, None])

        err = value - mb.returns
        if s.clip_vloss:
            delta = value - mb.values
            clipped_err = mb.values + torch.clamp(delta, -s.clip_coef, s.clip_coef) - mb.returns
            sq, sq_clipped = err * err, clipped_err * clipped_err
            v_loss = 0.5 * torch.max(sq, sq_clipped).mean()
            to_sq, to_sq_clipped = _max_grads(sq, sq_clipped)
            v_inside = (delta >= -s.clip_coef) & (delta <= s.clip_coef)
            d_value = (to_sq * err + to_sq_clipped * v_inside * clipped_err) * (s.vf_coef / n)
        else:
            v_loss = 0.5 * (err * err).mean()
            d_value = err * (s.vf_coef / n)

        d_actor_in = self._backward(actor_in, self.actor[1:], actor_hidden, d_logits)
        d_critic_in = self._backward(critic_in, self.critic[1:], critic_hidden, d_value[:, None])
        self._first_layer_backward(x, h, torch.cat([d_actor_in, d_critic_in], 1))
        # nn.utils.clip_grad_norm_ on the flat gradient
        norm = torch.linalg.vector_norm(self.flat)
        self.flat.mul_(torch.clamp(s.max_grad_norm / (norm + 1e-6), max=1.0))
        return minibatch_stats(pg_loss, v_loss, entropy.mean(), logratio, ratio, s)


def fast_step(agent: Agent, s: PPOSettings) -> AutogradStep | HandGradientStep:
    """``train_loop``'s ``make_step`` for the trainer: the hand gradient for the MLP, autograd for the CNN."""
    return AutogradStep(agent, s) if agent.is_image else HandGradientStep(agent, s)
