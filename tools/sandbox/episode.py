"""Inside the sandbox child: run agent code for one episode and describe what happened.

The environment lives in the child with the code, so every step the code takes is an
environment step, counted here; the parent only receives plain data (progress items while the
episode runs, and a final dict). Which coded action runs: `action` when given; otherwise the
one named `main` if the code defines it; otherwise the last coded action in the source (helpers
usually come first and the entry point last).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from envs.coded import CodedAction, execute
from envs.crafter_env import CrafterEnv
from tools.sandbox.loader import load_coded_actions

GIF_NAME = "episode.gif"
MAX_GIF_FRAMES = 300
GIF_FPS = 8
GIF_MIN_WIDTH = 192

Progress = Callable[[dict[str, Any]], None]


def choose_action(actions: list[CodedAction], name: str | None) -> CodedAction:
    by_name = {a.name: a for a in actions}
    if name is not None:
        if name not in by_name:
            raise LookupError(f"the code defines no coded action named '{name}'; "
                              f"it defines: {', '.join(by_name)}")
        return by_name[name]
    return by_name.get("main", actions[-1])


def step_limit(action: CodedAction, max_steps: int) -> int:
    """The run's budget, or the action's own @coded_action(max_steps=...) when that is smaller;
    an undecorated action gets the whole budget."""
    declared = "max_steps" in vars(action.fn)
    return min(action.max_steps, max_steps) if declared else max_steps


def _events(before: dict[str, int], after: dict[str, int], new_achievements: list[str], reward: float) -> list[str]:
    events = []
    for key in sorted(set(before) | set(after)):
        delta = after.get(key, 0) - before.get(key, 0)
        if delta:
            events.append(f"{key} {delta:+d}")
    events += [f"unlocked {a}" for a in new_achievements]
    if reward:
        events.append(f"reward {reward:g}")
    return events


@dataclass
class PreparedEpisode:
    """The environment after reset, built before the limits apply (it is not the agent's cost)."""

    env: CrafterEnv
    info: dict
    frames: list


def prepare_episode(task: str, seed: int, max_steps: int, gif: bool) -> PreparedEpisode:
    env = CrafterEnv(task=task, obs_kind="symbolic", max_steps=max_steps)
    _, info = env.reset(seed=seed)
    return PreparedEpisode(env=env, info=info, frames=[env.render()] if gif else [])


def run_episode(prepared: PreparedEpisode, code: str, max_steps: int, action: str | None,
                gif: bool, progress: Progress | None = None) -> dict[str, Any]:
    """Load `code`, run one call of the chosen coded action in the prepared episode, return a report dict."""
    send = progress or (lambda item: None)
    steps = 0

    def on_print(text: str) -> None:
        send({"kind": "print", "t": steps, "text": text})

    try:
        actions = load_coded_actions(code, output=on_print)
        chosen = choose_action(actions, action)
    except (ValueError, LookupError) as exc:
        return {"error": str(exc), "steps": 0, "loaded": False}

    env, info, frames = prepared.env, prepared.info, prepared.frames
    inventory_before = env.game.inventory
    send({"kind": "start", "action": chosen.name, "inventory": inventory_before})
    state = {"inventory": inventory_before, "achievements": list(info["achievements"]), "info": info}

    def on_step(name, obs, reward, step_info):
        nonlocal steps
        steps += 1
        inventory = env.game.inventory
        new = [a for a in step_info["achievements"] if a not in state["achievements"]]
        send({"kind": "step", "t": steps, "action": name, "inventory": inventory,
              "achievements": list(step_info["achievements"]),
              "events": _events(state["inventory"], inventory, new, reward)})
        state.update(inventory=inventory, achievements=list(step_info["achievements"]), info=step_info)
        if gif and len(frames) < MAX_GIF_FRAMES:
            frames.append(env.render())

    outcome = execute(env, chosen, on_step=on_step, max_steps=step_limit(chosen, max_steps))
    gif_file = _write_gif(frames) if gif else None
    return {
        "loaded": True,
        "action": chosen.name,
        "error": outcome.error,
        "precondition_failed": outcome.precondition_failed,
        "steps": outcome.steps,
        "achievements": state["achievements"],
        "task_success": env.task.is_success(set(state["achievements"])),
        "inventory_before": inventory_before,
        "inventory_after": env.game.inventory,
        "terminated": outcome.terminated,
        "truncated": outcome.truncated,
        "gif_file": gif_file,
    }


def _write_gif(frames: list) -> str | None:
    """Write the frames into the child's working directory (its scratch folder)."""
    if not frames:
        return None
    import imageio.v2 as imageio  # only runs that ask for a GIF pay for the import

    scale = max(1, GIF_MIN_WIDTH // frames[0].shape[1])  # Crafter frames are tiny: enlarge, pixel-exact
    frames = [f.repeat(scale, axis=0).repeat(scale, axis=1) for f in frames]
    imageio.mimsave(GIF_NAME, frames, duration=1000.0 / GIF_FPS, loop=0)
    return GIF_NAME
