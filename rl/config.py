"""RLConfig: the validated RL configuration the fast agent writes (task, observation, reward, coded
actions, termination, PPO settings). Bad fields fail with messages that name the field and what is allowed."""
from __future__ import annotations

import dataclasses
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model, field_validator, model_validator

from envs.seeds import check_training_seed
from envs.tasks import get_task
from rl import MIN_TRAIN_STEPS
from rl.coded_sources import agent_code, check_config_sources, check_shaping
from rl.ppo import PPOSettings

# Sane bounds for every PPO setting an agent may choose: (ge, le) for numbers, allowed values for strings.
PPO_BOUNDS: dict[str, Any] = {
    "seed": (0, 999_999),  # below envs.seeds.EVAL_SEED_BASE: training never sees evaluation worlds
    "total_steps": (MIN_TRAIN_STEPS, 10_000_000),
    "learning_rate": (1e-6, 1e-2),
    "num_envs": (1, 64),
    "num_steps": (8, 4096),
    "gamma": (0.8, 0.9999),
    "gae_lambda": (0.0, 1.0),
    "num_minibatches": (1, 256),
    "update_epochs": (1, 50),
    "clip_coef": (0.01, 1.0),
    "ent_coef": (0.0, 0.5),
    "vf_coef": (0.0, 5.0),
    "max_grad_norm": (0.01, 100.0),
    "target_kl": (0.001, 1.0),
    "hidden_size": (8, 1024),
    "coded_prior": (0.0, 0.99),
    "stop_below": (0.0, 1.0),
    "prior_action": (0, 63),
    "torch_threads": (1, 64),
    "num_workers": (1, 64),
    "log_every": (1, 100_000),
    "window": (1, 10_000),
    "vector_mode": ("auto", "sync", "batched", "async", "actors", "ray"),
    "device": ("auto", "cpu", "cuda"),
    "progress": ("auto", "bar", "log", "none"),
}


def _ppo_field(f: dataclasses.Field, doc: str):
    bounds = PPO_BOUNDS.get(f.name)
    if isinstance(bounds, tuple) and bounds and isinstance(bounds[0], str):
        return (Literal[bounds], Field(f.default, description=doc))  # type: ignore[valid-type]
    annotation = {"int": int, "float": float, "bool": bool, "str | None": str | None,
                  "float | None": float | None, "int | None": int | None}[str(f.type)]
    if bounds:
        return (annotation, Field(f.default, ge=bounds[0], le=bounds[1], description=doc))
    return (annotation, Field(f.default, description=doc))


def _build_ppo_model() -> type[BaseModel]:
    # each field's documentation is data on the dataclass field (rl.ppo.setting): no source is read here
    fields = {f.name: _ppo_field(f, f.metadata.get("doc", "")) for f in dataclasses.fields(PPOSettings)}
    model = create_model("PPOConfig", __config__=ConfigDict(extra="forbid"), **fields)
    model.__doc__ = "PPO settings (the fields of rl.ppo.PPOSettings) with sane bounds."
    return model


PPOConfig = _build_ppo_model()


class RLConfig(BaseModel):
    """One learned sub-action: what the policy sees, what it is rewarded for, which coded actions it may call."""

    model_config = ConfigDict(extra="forbid")

    task: str = Field(description="Crafter task name or alias (envs.tasks); success of this task ends an episode")
    obs_kind: Literal["symbolic", "pixels"] = Field("symbolic", description="observation given to the policy")
    reward: Literal["task", "crafter"] = Field(
        "task", description="'task': 1.0 when the task succeeds; 'crafter': Crafter's own reward")
    shaping: str | None = Field(
        None, description="optional Python source defining `def shaping(prev, curr) -> float`, added to the reward "
                          "every primitive step; prev/curr are dicts with 'inventory' and 'achievements' "
                          "(what the player sees); runs under the sandbox rules")
    coded_actions: list[str] = Field(
        default_factory=list, description="Python sources of coded actions (generator functions over the game "
                                          "API) appended to the policy's action head")
    decision_steps: int | None = Field(
        None, ge=1, le=10_000, description="the policy decides again after this many primitive steps of a coded "
                                           "call; choosing the same action then continues the call where it stopped, "
                                           "any other choice ends it (none: every call runs until it returns)")
    max_episode_steps: int | None = Field(None, ge=10, le=10_000,
                                          description="episode step limit (default: the task's limit)")
    terminate_on_success: bool = Field(True, description="end the episode when the task succeeds")
    eval_episodes: int = Field(
        20, ge=0, le=500, description="episodes played after training to rate the policy, on validation seeds "
                                      "(envs.seeds.validation_seeds); the held-out evaluation seeds stay for the "
                                      "final evaluation")
    start_states: str | None = Field(
        None, description="a start-set file (envs.saved_state) of moments where the chain reached this task's "
                          "turn, saved by the graph from its code tests on training seeds: every training episode "
                          "starts from one of them instead of a fresh world (none: fresh worlds)")
    ppo: PPOConfig = Field(default_factory=PPOConfig, description="PPO settings")  # type: ignore[valid-type]

    @field_validator("task")
    @classmethod
    def _known_task(cls, value: str) -> str:
        return get_task(value).name  # UnknownTaskError (a ValueError) lists the close matches

    @field_validator("shaping")
    @classmethod
    def _check_shaping(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        check_shaping(value)  # the lint: no agent code runs while a config is validated
        return value

    @field_validator("coded_actions")
    @classmethod
    def _check_coded(cls, value: list[str]) -> list[str]:
        for i, src in enumerate(value):
            # a model that names coded actions may pass a name through where a source belongs
            if isinstance(src, str) and src.strip().isidentifier():
                raise ValueError(f"coded_actions[{i}] is the bare name {src.strip()!r}, not the Python source of a "
                                 "coded action; give the source (`def name(game): ... yield 'do'`)")
        check_config_sources(value)
        return value

    @model_validator(mode="after")
    def _prior_on_the_head(self) -> RLConfig:
        prior = getattr(self.ppo, "prior_action", None)
        if prior is not None and prior >= len(self.coded_actions):
            raise ValueError(f"ppo.prior_action: {prior} is not one of the {len(self.coded_actions)} coded actions "
                             f"(0..{len(self.coded_actions) - 1})")
        return self

    @model_validator(mode="after")
    def _starts(self) -> RLConfig:
        # the file itself is read where episodes start (load_starts): a saved policy's config stays valid
        # after its run folder's start states are gone
        if self.start_states is not None and self.eval_episodes:
            raise ValueError("start_states: a policy that starts where the chain stands cannot be rated from a fresh "
                             "world; set eval_episodes to 0 (its training episodes and the chain's held-out play "
                             "rate it)")
        return self

    def load_starts(self) -> list:
        """The saved moments episodes start from (envs.saved_state.SavedState): ValueError when the file
        cannot be read, a start is not from a training seed, or has this task's achievement already."""
        from envs.saved_state import read_states

        if self.start_states is None:
            return []
        starts = read_states(self.start_states)  # StateFileError, a ValueError, says what is wrong
        own = get_task(self.task).achievement
        for s in starts:
            check_training_seed(s.seed, "a start state")
            if own is not None and own in s.achievements:
                raise ValueError(f"start_states: a start has {own} unlocked already; a training would count a "
                                 "success it did not earn")
        return starts

    @model_validator(mode="after")
    def _termination(self) -> RLConfig:
        if self.reward == "task" and not self.terminate_on_success:
            raise ValueError("terminate_on_success=False needs reward='crafter': the task reward ends the "
                             "episode on success by definition")
        return self

    def ppo_settings(self, **overrides: Any) -> PPOSettings:
        return PPOSettings(**{**self.ppo.model_dump(), **overrides})  # type: ignore[attr-defined]  # dynamic model

    def coded_action_names(self) -> list[str]:
        return check_config_sources(self.coded_actions)

    def load_in_sandbox(self) -> None:
        """Run the sources' top level in a sandbox process once: ValueError with the agent's error if it fails
        or defines other actions than its syntax shows."""
        try:
            code = agent_code(self.coded_actions, self.shaping)
        except ValueError as exc:  # name what was loaded: the agent's error quotes a line but not its source
            parts = [f"coded_actions ({', '.join(self.coded_action_names())})"] if self.coded_actions else []
            parts += ["shaping"] if self.shaping else []
            raise ValueError(f"{' and '.join(parts)}: {exc}") from exc
        if code is not None:
            with code:
                if code.names != self.coded_action_names():
                    raise ValueError(f"coded_actions define {code.names} when run, not {self.coded_action_names()}")


def config_error_message(exc: Exception) -> str:
    """One readable message per bad field: 'field.path: problem (allowed: ...)'."""
    if not isinstance(exc, ValidationError):
        return str(exc)
    lines = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "config"
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            model = PPOConfig if err["loc"][:1] == ("ppo",) else RLConfig
            msg = f"unknown field; allowed fields: {', '.join(model.model_fields)}"
        else:
            msg = msg.removeprefix("Value error, ")
            bounds = PPO_BOUNDS.get(str(err["loc"][-1])) if err["loc"][:1] == ("ppo",) else None
            if bounds and not isinstance(bounds[0], str):
                msg += f"; allowed: {bounds[0]} .. {bounds[1]}"
            if "input" in err and err["type"] not in ("missing", "value_error"):
                msg += f" (got {err['input']!r})"[:300]
        lines.append(msg if msg.startswith(loc) else f"{loc}: {msg}")  # 'coded_actions[0] ...' names itself
    return "invalid RL configuration:\n" + "\n".join(f"  - {line}" for line in lines)
