"""configure_rl and train_ppo: the RL pipeline as LangChain tools of the fast agent.

Each tool answers with a short JSON text for the model (``content``) and the full pydantic report
(``artifact``) for the graph. Bad input never raises out of a tool: it comes back as ``ok: false``
with a message naming the field and what is allowed. The config ``configure_rl`` returns is accepted
as is by ``train_ppo``.

The success rate train_ppo measures after training is played on validation seeds
(envs.seeds.validation_seeds), never on the held-out evaluation seeds, which stay for the final
evaluation of the finished chain; ``rate_sources`` in the report says where each rate comes from.
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from langchain_core.tools import StructuredTool
from pydantic import BaseModel, Field

CURVE_POINTS = 40  # the model sees a thinned curve; the CSV in the run folder keeps every update


class ConfigureReport(BaseModel):
    ok: bool
    config: dict | None = None
    coded_action_names: list[str] = Field(default_factory=list)
    error: str | None = None


class CurvePoint(BaseModel):
    step: int
    success_rate: float | None
    mean_return: float | None


class TrainReport(BaseModel):
    ok: bool
    error: str | None = None
    task: str | None = None
    steps_used: int = 0
    """primitive environment steps spent training (counts toward the run's sample budget)"""
    eval_steps: int = 0
    """primitive steps spent on the validation episodes after training"""
    wall_time_s: float = 0.0
    learning_curve: list[CurvePoint] = Field(default_factory=list)
    final_success_rate: float | None = None
    """success rate on validation seeds (not the held-out evaluation seeds)"""
    success_ci: tuple[float, float] | None = None
    eval_episodes: int = 0
    eval_seeds: tuple[int, int] | None = None
    """first and last validation seed played"""
    final_train_success_rate: float | None = None
    """success rate of the last training episodes (moving window of ppo.window episodes)"""
    episodes: int = 0
    """training episodes finished"""
    episode_outcomes: dict[str, int] = Field(default_factory=dict)
    """how the training episodes ended: 'succeeded', 'died: CAUSE', 'step limit' or 'ended' -> episodes"""
    recent_episode_outcomes: dict[str, int] = Field(default_factory=dict)
    """the same for the last ppo.window episodes (those of final_train_success_rate)"""
    outcome_summary: str | None = None
    """the two above in words, e.g. 'last 50 episodes: 12 succeeded, 30 died (zombie 18, thirst 12), 8 hit the
    10,000-step limit; all 212: ...'"""
    rate_sources: dict[str, str] = Field(default_factory=dict)
    """for each rate above, where it was measured"""
    start_states: int = 0
    """how many saved moments of the chain the training episodes started from (0: fresh worlds)"""
    stopped_early: str | None = None
    """why the training stopped before spending its budget (ppo.stop_below); the rest stays in the budget"""
    coded_action_counts: dict[str, int] = Field(default_factory=dict)
    coded_action_failures: dict[str, int] = Field(default_factory=dict)
    coded_action_errors: list[str] = Field(default_factory=list)
    policy_path: str | None = None
    run_dir: str | None = None
    learning_curve_png: str | None = None
    metrics_csv: str | None = None


def validate_config(config: Any):
    """An RLConfig from a dict, JSON text or RLConfig; ValueError with a field-by-field message."""
    from pydantic import ValidationError

    from rl.config import RLConfig, config_error_message

    if isinstance(config, RLConfig):
        return config
    if isinstance(config, str):
        try:
            config = json.loads(config)
        except json.JSONDecodeError as exc:
            raise ValueError(f"config is not valid JSON: {exc}") from exc
    if not isinstance(config, dict):
        raise ValueError(f"config must be a JSON object of RLConfig fields, got {type(config).__name__}")
    try:
        return RLConfig.model_validate(config)
    except ValidationError as exc:
        raise ValueError(config_error_message(exc)) from exc


def configure_rl(config: dict) -> ConfigureReport:
    try:
        cfg = validate_config(config)
        cfg.load_starts()  # the saved moments episodes would start from, read once to check them
        cfg.load_in_sandbox()  # the top level of the agent's sources runs here, behind the boundary
    except ValueError as exc:
        return ConfigureReport(ok=False, error=str(exc))
    except RuntimeError as exc:  # sandbox.SandboxUnavailable: the machine, not the config
        return ConfigureReport(ok=False, error=f"the code could not be loaded: {exc}; this is not your config's fault")
    return ConfigureReport(ok=True, config=cfg.model_dump(mode="json"), coded_action_names=cfg.coded_action_names())


def _thin(curve: list[dict], n: int) -> list[CurvePoint]:
    if len(curve) > n:
        idx = sorted({round(i * (len(curve) - 1) / (n - 1)) for i in range(n)})
        curve = [curve[i] for i in idx]
    clean: list[dict[str, Any]] = [{k: (None if isinstance(v, float) and v != v else v) for k, v in row.items()}
                                   for row in curve]
    return [CurvePoint(step=int(r["step"]), success_rate=r["success_rate"], mean_return=r["mean_return"])
            for r in clean]


def train_ppo(config: dict, run_dir: str | None = None) -> TrainReport:
    from envs.tasks import get_task
    from rl.evaluate import evaluate_policy
    from rl.training import train

    try:
        cfg = validate_config(config)
    except ValueError as exc:
        return TrainReport(ok=False, error=str(exc))
    overrides = {"run_dir": run_dir} if run_dir else {}
    start = time.time()
    try:
        n_starts = len(cfg.load_starts())  # read here first: a missing or damaged file is a clear error, not a crash
        result = train(cfg.ppo_settings(**overrides), cfg)
    except (ValueError, RuntimeError) as exc:  # e.g. shaping code that raises mid-training
        return TrainReport(ok=False, task=cfg.task, error=f"training failed: {exc}", wall_time_s=time.time() - start)
    report = TrainReport(
        ok=True, task=cfg.task, steps_used=result.steps_used, wall_time_s=result.wall_time_s,
        learning_curve=_thin(result.curve, CURVE_POINTS), final_train_success_rate=result.final_train_success_rate,
        episodes=result.episodes, episode_outcomes=result.episode_outcomes,
        recent_episode_outcomes=result.recent_episode_outcomes,
        outcome_summary=outcome_summary(result.episode_outcomes, result.recent_episode_outcomes,
                                        cfg.max_episode_steps or get_task(cfg.task).max_steps),
        coded_action_counts=result.coded_action_counts, coded_action_failures=result.coded_action_failures,
        coded_action_errors=result.coded_action_errors, policy_path=result.policy_path, run_dir=result.run_dir,
        metrics_csv=str(Path(result.run_dir) / "metrics.csv"), start_states=n_starts,
        stopped_early=result.stopped_early,
        learning_curve_png=_existing(Path(result.run_dir) / "learning_curve.png"))
    if result.final_train_success_rate is not None:
        report.rate_sources["final_train_success_rate"] = (
            f"the last training episodes (moving window of {cfg.ppo_settings().window}, training seeds" +
            (f", each started from one of {report.start_states} saved moments where the chain reached this task)"
             if report.start_states else ")"))
    if cfg.eval_episodes > 0:
        try:
            ev = evaluate_policy(result.policy_path, episodes=cfg.eval_episodes, seed_range="validation")
        except (ValueError, RuntimeError) as exc:  # the policy is saved: the training still counts
            report.error = f"the evaluation on validation seeds after training failed: {exc}"
            report.wall_time_s = time.time() - start
            return report
        report.final_success_rate, report.success_ci = ev.success_rate, (ev.ci_low, ev.ci_high)
        report.eval_episodes, report.eval_steps = ev.episodes, ev.total_steps
        report.eval_seeds = (ev.seeds[0], ev.seeds[-1])
        report.rate_sources["final_success_rate"] = (
            f"{ev.episodes} episodes on validation seeds {ev.seeds[0]}..{ev.seeds[-1]} after training")
        (Path(result.run_dir) / "evaluation.json").write_text(json.dumps(ev.as_dict(), indent=2))
    report.wall_time_s = time.time() - start
    return report


def outcome_summary(outcomes: dict[str, int], recent: dict[str, int], step_limit: int | None = None) -> str:
    """How a training's episodes ended, in words: the last window's episodes first (where the policy stands
    now), then all of them; the deaths by cause, in the words of the code-test reports."""
    from rl.run_log import outcomes_text

    n, n_recent = sum(outcomes.values()), sum(recent.values())
    if not n:
        return "no training episode finished"
    if n_recent == n:
        return f"all {n} episodes: {outcomes_text(outcomes, step_limit)}"
    return (f"last {n_recent} episodes: {outcomes_text(recent, step_limit)}; "
            f"all {n}: {outcomes_text(outcomes, step_limit)}")


def _existing(path: Path) -> str | None:
    return str(path) if path.exists() else None


def _fields_help() -> str:
    from rl.config import PPO_BOUNDS, RLConfig

    lines = [f"- {name}: {f.description}" for name, f in RLConfig.model_fields.items() if name != "ppo"]
    ppo = ", ".join(f"{k} {v[0]}..{v[1]}" if not isinstance(v[0], str) else f"{k} in {list(v)}"
                    for k, v in PPO_BOUNDS.items())
    return "\n".join(lines) + f"\n- ppo: PPO settings object ({ppo})"


class _ConfigArgs(BaseModel):
    # not named `config`: LangChain reserves that argument name for its RunnableConfig
    rl_config: dict = Field(description="the RL configuration as a JSON object (fields listed in the tool description)")


class _TrainArgs(_ConfigArgs):
    run_dir: str | None = Field(None, description="folder for the run's metrics and policy (default: runs/ppo/...)")


def _configure_rl_tool(rl_config: dict):
    report = configure_rl(rl_config)
    return report.model_dump_json(exclude_none=True), report


def _train_ppo_tool(rl_config: dict, run_dir: str | None = None):
    report = train_ppo(rl_config, run_dir)
    return report.model_dump_json(exclude_none=True), report


def make_tools() -> list[StructuredTool]:
    fields = f"\nFields:\n{_fields_help()}"
    return [
        StructuredTool.from_function(
            func=_configure_rl_tool, name="configure_rl", args_schema=_ConfigArgs,
            response_format="content_and_artifact",
            description="Validate an RL configuration for a learned sub-action (task, observation, reward and "
                        "optional shaping code, coded actions appended to the action head, termination, PPO "
                        "settings). Returns the normalised config or the errors, naming each bad field and its "
                        "allowed values." + fields),
        StructuredTool.from_function(
            func=_train_ppo_tool, name="train_ppo", args_schema=_TrainArgs, response_format="content_and_artifact",
            description="Train PPO from a configuration (coded actions become extra actions of the policy). Returns "
                        "the steps used, wall time, learning curve, success rate on validation seeds with a 95% "
                        "interval (the held-out evaluation seeds are kept for the final evaluation), how the training "
                        "episodes ended (succeeded, died and of what, hit the step limit), how often each coded action "
                        "was chosen and failed, and the saved policy's path." + fields),
    ]


configure_rl_tool, train_ppo_tool = make_tools()
