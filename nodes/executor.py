"""Executor node: runs the finished chain of skills on held-out seeds and measures the task's success.

One episode per evaluation seed (envs.seeds.eval_seeds, never used by training or code tests):
the skills run in plan order in the same episode, each until its subtask's achievement is
unlocked (a coded skill: one call of its entry action; a learned one: its policy, with its coded
actions, until the achievement or the step limit). The success rate comes with a 95% Wilson
interval. These steps are evaluation, reported apart from the training budget.

A score task (crafter_score) has no single achievement: every skill of its plan is played in one episode of
the task's length (the ones that met the target in plan order, then the others, the likeliest first:
`score_play_order`), a skill whose prerequisites did not unlock (or that has none) is skipped rather than
ending the episode, a learned skill stops at its subtask's step limit, and the result is the Crafter score of
the unlocked achievements (envs.score) with a bootstrap interval.

The episodes are played in an `envs.replay.RecordingEnv`, which keeps every primitive action and the
skill and coded action that played it; two episodes come back in the result (`replays`) so that a
video can be made later by replaying their actions on a fresh env, without running agent code again
(envs/replay.py, graph/video.py).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from langgraph.runtime import Runtime

from envs.score import achievement_rates, bootstrap_score, crafter_score
from envs.seeds import eval_seeds
from envs.tasks import TASKS
from nodes.attempt.outcome import skill_from_best
from nodes.attempt.results import judged_rate, skill_meets_target
from nodes.context import RunContext, context_of
from nodes.recipes import prerequisites
from nodes.settings import RunSettings
from nodes.skills.library import Skill
from nodes.skills.pool import Pool, chain_parts, definitions, pool_of
from nodes.skills.records import needed_before, shares_its_code
from nodes.state import RLGPTState
from prompts.fewshot import chain_as_action
from rl.stats import wilson_interval
from sandbox import AgentCode, CodeRejected

if TYPE_CHECKING:
    from envs.replay import EpisodeRecord  # heavy (Crafter): imported when a chain is played

SkillLike = Skill | Mapping[str, Any]  # a Skill, or its plain dump as the state holds it
DEFAULT_TARGET = RunSettings.model_fields["target_success"].default  # a score chain's order without a run's settings


class _ChainStep:
    """One skill, loaded once and run in many episodes."""

    def __init__(self, subtask: str, skill: Skill, seed: int, earlier: list[str] | None = None,
                 pool: Pool | None = None, later: list[str] | None = None, place: str = ""):
        self.subtask = subtask
        self.place = place  # "i/n": where the skill sits in the chain, for video captions
        self.achievement = TASKS[subtask].achievement or subtask
        self.prerequisites = frozenset(prerequisites(subtask))
        self.step_limit = TASKS[subtask].max_steps
        self.kind = skill.kind
        if self.kind == "code":
            pool = pool if pool is not None else pool_of([(subtask, skill.to_state())])
            entry = skill.entry
            # the skill's own definitions with what they use from the pool (the code tests' rule)
            source = pool.program([n for src in skill.sources for n in definitions(src)])
            if entry and entry != "main" and entry in pool:
                # Play the entry as the code tests did: through the chain driver, with the earlier
                # skills' actions at hand to gather what it lacks (a table needs more wood than the
                # wood skill left behind), and the later subtasks named so that a station goes next
                # to the stations they need (the furnace beside the table for the iron pickaxe).
                steps = [name for name in (earlier or []) if name in pool] + [entry]
                entry = f"play_{subtask}"
                source = chain_as_action(chain_parts(pool, steps), steps, TASKS[subtask].max_steps,
                                         entry, after=later or ())
            self.source = source
            try:
                self.code = AgentCode([source])  # one sandbox process plays this skill in every episode
            except CodeRejected as exc:
                raise ValueError(f"coded skill for {subtask} does not load: {exc}") from exc
            self.entry = entry if entry in self.code.names else self.code.names[-1]
        else:
            from rl.policy_skill import PolicySkill  # torch: only for a learned skill

            if not skill.policy_path:
                raise ValueError(f"learned skill for {subtask} has no policy file")
            self.policy = PolicySkill(skill.policy_path, seed=seed)

    @property
    def label(self) -> tuple[str, str]:
        """(skill, coded action) as a video caption names them: the names the trusted side calls, never text
        that agent code sends."""
        skill = f"[{self.place}] {self.subtask}" if self.place else self.subtask
        if self.kind == "code":
            return f"{skill} (code)", self.entry
        return f"{skill} (PPO)", "policy (primitive action)"

    def run(self, env, max_steps: int) -> tuple[int, bool, str | None]:
        """(steps, episode ended, error) of running this skill from the env's current state."""
        if hasattr(env, "label"):  # a RecordingEnv: name the steps this skill plays
            env.label = self.label
        if self.kind == "code":
            out = self.code.execute(env, self.entry, max_steps=max_steps)
            return out.steps, out.terminated or out.truncated, out.error

        def name_coded_call(action: int, info: dict) -> None:
            if info["coded_call"] and hasattr(env, "relabel_last"):
                env.relabel_last(info["primitive_steps"], (self.label[0], f"{info['coded_call']} (coded action)"))

        run = self.policy.run(env, max_steps=max_steps, until=lambda ach, inv: self.achievement in ach,
                              on_decision=name_coded_call)
        return run.steps, run.ended, None

    @property
    def running(self) -> str:
        """The functions a coded skill was in at its last step ('play_collect_iron > main > collect_iron >
        go_to', as the sandbox said: agent-named, cleaned and capped by sandbox.host); '' for a policy."""
        return self.code.running if self.kind == "code" else ""

    def close(self) -> None:
        (self.code if self.kind == "code" else self.policy).close()


def score_play_order(names: Sequence[str], met: Sequence[bool], rates: Sequence[float],
                     costs: Sequence[float]) -> list[int]:
    """The plan indices of a score plan in the order its held-out chain plays them, each after the skills of the
    plan it needs: the skills that met the target (`met`) in plan order, then the others, the likeliest first
    (`rates`; on a tie the one whose tests took fewer steps per episode, earlier skills replayed included:
    `costs`), each followed by what needs it.
    A weak skill spends its step limit trying (the plant's wait, a long search) and often dies: played where
    the plan put it, it cost every achievement after it (a model's 50% eat_plant before its collect_iron)."""
    in_plan = set(names)
    needs = [set(prerequisites(n)) & in_plan for n in names]
    order: list[int] = []
    left = list(range(len(names)))
    while left:
        done = {names[i] for i in order}
        ready = [i for i in left if needs[i] <= done] or left[:1]
        sure = [i for i in ready if met[i]]
        pick = sure[0] if sure else min(ready, key=lambda i: (-rates[i], costs[i], i))
        order.append(pick)
        left.remove(pick)
    return order


def _load_chain(plan: Sequence[Mapping[str, Any]], skills: Mapping[str, SkillLike], seed: int,
                score: bool = False, target: float = DEFAULT_TARGET,
                unloaded: list[str] | None = None, whole_chain: bool = False) -> list[_ChainStep]:
    """The skills in plan order, each coded one played with the library as the latest code test that played it
    had it (nodes.skills.pool.pool_of: a later definition replaces an earlier one). That is its own test, or
    the test of a later passing coded skill that replayed it first (`_replayed_by`): a
    stay_alive or helper the diamond's code rewrites then plays in every skill its tests replayed, as the
    fast agent's prompt says. A skill that is not passing (a best attempt cut short by a limit) changes only
    its own play and the later skills'.
    In a score plan a coded skill replays only its own prerequisites before it: the plan's other
    achievements are not needed for it, and one that failed would hold it up; each plays with the library
    as it stood at its own place in the plan, and the skills that did not meet the `target` play last
    (`score_play_order`). A score plan's skill that does not load is left out, said in `unloaded`: the plan's
    other achievements do not need it; a chain's stops the load (ValueError). `whole_chain`: `plan` is the run's
    whole plan (not cut at a subtask without a skill), so its last skill's tests, made in this run before graph
    rules 18 recorded what tests replayed, replayed every earlier skill (nodes.skills.records.replays_the_chain)."""
    names = [sub["name"] for sub in plan]
    loaded = [Skill.model_validate(skills[name]) for name in names]
    records = [s.to_state() for s in loaded]
    pool = pool_of([])  # the built-ins; each skill's definitions join it in plan order
    pools = []  # the library as it stood at each skill: what its code tests loaded
    for name, skill, record in zip(names, loaded, records, strict=True):
        own = pool if shares_its_code(record) else pool.copy()  # one that never succeeded: its play alone
        for source in skill.sources:
            own.add(source, subtask=name, kind=skill.kind)
        pools.append(own.copy())
    if score:
        order = score_play_order(
            names, [skill_meets_target(r, target) for r in records],
            [judged_rate(r) for r in records],
            [s.env_steps / s.episodes if s.kind == "code" and s.episodes else float("inf") for s in loaded])
    else:
        order = list(range(len(names)))
    played = [names[i] for i in order]
    chain = []
    for place, i in enumerate(order):
        name, skill = names[i], loaded[i]
        tested_last = i
        if not score:
            last = len(names) - 1
            tested_last = next((k for k in range(last, i, -1) if loaded[k].kind == "code" and loaded[k].passing
                                and name in _replayed_by(loaded[k], names[k], names[:k], whole_chain and k == last)), i)
        earlier = [n for n in played[:place] if n in prerequisites(name)] if score else names[:i]
        try:
            chain.append(_ChainStep(name, skill, seed, earlier=earlier, pool=pools[tested_last],
                                    later=played[place + 1:], place=f"{place + 1}/{len(plan)}"))
        except ValueError as exc:
            if not score or unloaded is None:
                for step in chain:
                    step.close()
                raise
            unloaded.append(str(exc))
    return chain


def _replayed_by(skill: Skill, subtask: str, earlier: list[str], last_of_the_chain: bool) -> list[str]:
    """The earlier skills of the plan (`earlier`) that `skill`'s code tests played first: as its record says
    (`Skill.replayed`, graph rules 18 on), else as the rules it was made under chose them (the recipe's needs; all
    for the plan's last subtask). A skill from the library was tested in another run, on that run's plan: its
    recipe's needs are what this plan surely shares."""
    if skill.reused:
        return needed_before(subtask, earlier)
    if skill.replayed is not None:
        return [name for name in earlier if name in skill.replayed]
    return needed_before(subtask, earlier, last_of_the_chain)


def _further(a: EpisodeRecord, b: EpisodeRecord) -> bool:
    """Whether episode `a` got further than `b`: more chain steps passed, then success, then more achievements."""
    return (a.reached, a.success, len(a.achievements)) > (b.reached, b.success, len(b.achievements))


def _play_chain(env, chain: list[_ChainStep], score: bool, errors: list[str],
                world: int) -> tuple[int, list[str], dict[str, Any] | None]:
    """One episode of the chain from the env's fresh state: (steps, subtasks whose achievement unlocked, where
    a chain task's episode ended short of the task, or a score plan's ended before its chain was played through:
    `_ending`; None when it did not).

    A chain task stops at the first skill that fails; a score plan skips it (and a skill whose
    prerequisites did not unlock) and goes on; both stop when the episode ends."""
    steps, passed = 0, []
    ending: dict[str, Any] | None = None
    for step in chain:
        if step.achievement in env.game.achievements:
            passed.append(step.subtask)
            continue
        if score and not step.prerequisites <= env.game.achievements:
            continue
        room = max(env.max_steps - steps, 1)
        used, ended, error = step.run(env, max_steps=min(room, step.step_limit) if score else room)
        steps += used
        if error and len(errors) < 5:
            errors.append(f"seed {world}, {step.subtask}: {error}")
        if step.achievement in env.game.achievements:
            passed.append(step.subtask)
        elif not score:
            ending = _ending(env, step.subtask, error, step.running)
            break
        if ended:
            # the episode ended in this skill's call (a chain task's after its achievement: a sword made after the
            # pickaxe): the skill playing then is where it ended (a chain task's success clears it)
            ending = _ending(env, step.subtask, error, step.running)
            break
    return steps, passed, ending


def _ending(env, subtask: str, error: str | None = None, running: str = "", missing: bool = False) -> dict[str, Any]:
    """Where and how an episode ended in `subtask` (without its achievement, or after it in the same call): how
    (the player died and of what, the episode ran out of steps, the code failed, the skill stopped, or the
    chain has no skill for it), the episode's step, and the functions a coded skill was in at its last step."""
    cause = getattr(env, "death_cause", None)
    if cause:
        how = f"died: {cause}"
    elif env.game.step_count >= env.max_steps:
        how = "out of episode steps"
    elif missing:
        how = "no skill for it"
    elif error:
        how = "code error"
    else:
        how = "stopped without the achievement"
    return {"subtask": subtask, "how": how, "step": int(env.game.step_count), "in": running}


def endings_summary(endings: Sequence[Mapping[str, Any] | None]) -> list[dict[str, Any]]:
    """The episodes that ended short of the task, counted by (subtask, how), most episodes first; each row
    names the functions running at the end most often among them."""
    groups: dict[tuple[str, str], Counter[str]] = {}
    for e in endings:
        if e is not None:
            groups.setdefault((e["subtask"], e["how"]), Counter())[e.get("in") or ""] += 1
    rows = [{"subtask": subtask, "how": how, "episodes": sum(ins.values()),
             "often_in": max(ins, key=lambda x: (ins[x], x))}
            for (subtask, how), ins in groups.items()]
    return sorted(rows, key=lambda r: (-r["episodes"], r["subtask"], r["how"]))


def _score_fields(unlocked: list[list[str]], seed: int) -> dict:
    """The Crafter score of these episodes' achievements, its 95% bootstrap interval and each rate."""
    rates = achievement_rates(unlocked)
    low, high = bootstrap_score(unlocked, seed=seed)
    return {"crafter_score": round(crafter_score(rates), 3), "crafter_score_ci95": [round(low, 3), round(high, 3)],
            "achievement_rates": rates, "achievements": unlocked}


def evaluate_chain(task: str, plan: Sequence[Mapping[str, Any]], skills: Mapping[str, SkillLike], episodes: int,
                   seed: int, record: bool = True, max_steps: int | None = None,
                   worlds: Sequence[int] | None = None, target: float = DEFAULT_TARGET) -> dict:
    """Success of the chained skills on `episodes` held-out worlds (for a score task, its Crafter score).

    With `record`, the result's `replays` holds two of these episodes as `EpisodeRecord.to_json()` dumps:
    `first` (the first held-out seed's) and `furthest` (the most chain steps passed, then success, then the
    most achievements; the earliest seed on a tie). They are what videos are made from (graph/video.py).
    `max_steps`: each episode's length (default: the task's step limit). `worlds`: other seeds to play than the
    held-out ones, e.g. validation seeds for a measurement made while developing (one episode each). `target`: the
    run's target rate, which orders a score plan's chain (`score_play_order`)."""
    from envs.replay import RecordingEnv  # heavy (Crafter): only when a chain is played

    score = TASKS[task].is_score
    missing = [s["name"] for s in plan if s["name"] not in skills]
    if score:  # every skill the run has, in plan order; the missing ones just unlock nothing
        playable: Sequence[Mapping[str, Any]] = [s for s in plan if s["name"] in skills]
    else:
        # the skills the run has are played in plan order up to the first gap (graph.evaluation does the
        # same); a task that needs the missing ones then fails
        playable = plan[:next((i for i, s in enumerate(plan) if s["name"] not in skills), len(plan))]
    if not playable:
        return {"ran": False, "reason": f"no skill for {', '.join(missing)}: nothing to play",
                "episodes": 0, "success_rate": None, "steps": 0}
    unloaded: list[str] = []
    chain = _load_chain(playable, skills, seed, score=score, target=target, unloaded=unloaded,
                        whole_chain=not score and len(playable) == len(plan))
    if not chain:
        return {"ran": False, "reason": "no skill of the plan loads: " + "; ".join(unloaded)[:500],
                "episodes": 0, "success_rate": None, "steps": 0}
    env = RecordingEnv(task=task, obs_kind="symbolic", reward="task", max_steps=max_steps)
    task_spec = TASKS[task]
    seeds = list(worlds)[:episodes] if worlds is not None else eval_seeds(episodes)
    episodes = len(seeds)
    successes, total_steps, reached = 0, 0, {s.subtask: 0 for s in chain}
    errors: list[str] = unloaded[:5]  # a skill left out of a score chain is said first
    unlocked: list[list[str]] = []
    outcomes: list[int] = []  # 1/0 per held-out seed, in seed order: methods are compared pair by pair on them
    # per seed: where an episode ended short of the task, or a score plan's before its last skill (`_ending`)
    endings: list[dict[str, Any] | None] = []
    first: EpisodeRecord | None = None
    furthest: EpisodeRecord | None = None
    start = time.time()
    try:
        for world in seeds:
            env.reset(seed=world)
            steps, passed, ending = _play_chain(env, chain, score, errors, world)
            for name in passed:
                reached[name] += 1
            success = task_spec.is_success(set(env.game.achievements))
            if success and not score:
                ending = None
            elif ending is None and not score:  # every skill played passed, the episode goes on: the next has none
                ending = _ending(env, missing[0] if missing else task, missing=bool(missing))
            endings.append(None if ending is None else {"seed": world, **ending})
            successes += int(success)
            outcomes.append(int(success))
            total_steps += steps
            unlocked.append(sorted(env.game.achievements))
            if record:
                episode = env.record(success=success, reached=len(passed), chain_length=len(chain))
                first = episode if first is None else first
                furthest = episode if furthest is None or _further(episode, furthest) else furthest
    finally:
        for step in chain:
            step.close()
    low, high = wilson_interval(successes, episodes)
    return {"ran": True, "task": task, "episodes": episodes, "successes": successes,
            "success_rate": successes / episodes, "ci95": [round(low, 4), round(high, 4)],
            "steps": total_steps, "mean_steps": total_steps / episodes, "seeds": [seeds[0], seeds[-1]],
            "reached": reached, "outcomes": outcomes, "errors": errors,
            "endings": endings, "ended": endings_summary(endings),
            "wall_time_s": round(time.time() - start, 2), "missing": missing,
            "chain": [f"{s.subtask}:{s.kind}" for s in chain],
            **(_score_fields(unlocked, seed) if score else {}),
            **({"replays": {"first": first.to_json(), "furthest": furthest.to_json()}}
               if first is not None and furthest is not None else {})}


def chain_skills(state: Mapping[str, Any], threshold: float) -> dict[str, Any]:
    """The skills a run's chain plays: its kept skills, and for a plan subtask a limit stopped mid-way, its best
    attempt so far (what was reached)."""
    skills = dict(state.get("skills") or {})
    for sub in state.get("plan", []):
        if sub["name"] not in skills and sub["name"] in (state.get("best") or {}):
            record = skill_from_best(state, sub["name"], threshold)
            if record is not None:
                skills[sub["name"]] = record
    return skills


def executor(state: RLGPTState, runtime: Runtime[RunContext]) -> dict:
    settings = context_of(runtime).settings
    episodes = settings.eval_episodes
    seed = settings.seed
    skills = chain_skills(state, settings.skill_threshold)
    try:
        result = evaluate_chain(state["task"], state.get("plan", []), skills, episodes, seed,
                                max_steps=settings.eval_max_steps, target=settings.target_success)
    except (ValueError, FileNotFoundError, RuntimeError) as exc:  # a broken skill: report it, do not crash
        result = {"ran": False, "reason": f"the chain could not run: {exc}", "episodes": 0,
                  "success_rate": None, "steps": 0}
    return {"skills": skills, "evaluation": result, "eval_steps": int(result.get("steps", 0)), "route": "report",
            "events": [{"type": "evaluate", "success_rate": result.get("success_rate"),
                        "episodes": result.get("episodes"), "ran": result["ran"]}]}
