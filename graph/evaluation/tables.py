"""The five tables of the report: which cells each one measures, and how they are laid out.

A table is plain data (`Table`): columns, rows, notes and the plot file, rendered by report.py.
Every measured cell goes through the CellCache, so a re-run after a kill skips finished cells.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from envs.score import achievement_rates, bootstrap_score, bootstrap_score_difference, crafter_score
from envs.tasks import ACHIEVEMENTS
from graph.evaluation import methods, published
from graph.evaluation.cache import CellCache, cell_key
from graph.evaluation.heldout import (
    code_skill,
    crafter_episodes,
    evaluate_skills,
    play_code_episode,
    play_policy_episode,
    rate_fields,
)
from sandbox import AgentCode

TECH_TREE = ("collect_wood", "place_table", "make_wood_pickaxe", "collect_stone", "make_stone_pickaxe",
             "collect_coal", "collect_iron", "place_furnace", "make_iron_pickaxe", "collect_diamond")
OURS = "ours (Crafter)"
# Version of everything that decides or plays coded actions: the graph's rules (nodes/), the executor, the
# chain driver and its survival code (prompts/), the game API, and how PPO runs coded calls (rl/options.py).
# It is part of the key of every cell that plays coded actions (all but pure RL on primitives): bump it when a
# change alters what those cells would measure, so cached cells are measured again rather than reused.
# 2: a code test replays only the subtask's own prerequisites and is judged on the runs that reached it.
# 3: the executor places a station next to the stations that later subtasks need with it.
# 4: stay_alive spends the night walled into a shelter and keeps hunting until it has eaten.
# 5: PPO cuts coded calls in a training's last step, so no training overruns its budget.
# 6: a shelter is built only with a way out (a pickaxe, and a stone wall or seal), and leave_shelter mines any
#    stone, coal, iron or diamond wall of the pocket: 15 of 300 coded-chain episodes ended walled in and starving.
# 7: the chain places a table or furnace again when the one it placed is gone (arrows turn them into path) or
#    out of reach, before a make_ step that needs it.
# 8: the game API's random helpers (explore's tie-breaking) are seeded per episode from the env's own stream,
#    not from the world seed (issue 26), so coded play takes other paths on the same worlds.
# 9: the chain's stay_alive explores a step when a cow it knows of cannot be walked to now, instead of asking
#    collect_food again at once (200 path searches in one step ran into the step's time limit).
# 10: a collect_ action mines its way through rock to a target it cannot walk to (game.go_to(..., dig=True)): a
#     diamond or iron seen inside stone was out of the chain's reach; and the chain calls stay_alive again before
#     it explores, since eating or drinking before a step may have taken the player into the night.
# 11: the chain explores after that second stay_alive whatever it did (a stay_alive that always takes a step
#     stopped it exploring); go_to never digs out of a shelter (it says to leave_shelter first).
# 12: the fights and the ripe plant have few-shot examples (prompts/examples/defeat_zombie.py, eat_plant.py): the
#     score plan codes defeat_zombie, eat_plant and defeat_skeleton (the expert learned them before) and plays them
#     after the rest of its coded achievements; the built-in stay_alive does not shelter when food or drink < 2.
# 13: shelter() picks another site when a creature blocks the way to the first, and hits a creature in the pocket or
#     its doorway until it goes (it gave up at once: half its failures); defend() keeps hitting the zombie it faces.
RULES_VERSION = 13
# The RL-GPT and iteration cells also depend on the graph's own handling of tool calls; this version is bumped
# alone for a change that only they see. Their keys hold both versions (r{GRAPH_RULES_VERSION}.{RULES_VERSION}):
# they play coded actions too.
# 6: the fast node fits every tool call to the env steps left, so code tests cannot overrun the budget.
# 7: the attempt subgraph: test reports go back to the fast agent, which repairs (nodes.models.expert_repair) before the
#    critic judges; code whose revisions run out moves to RL; one coded action per answer, composed by
#    nodes.skills.pool; PPO's mid-run evaluation on validation seeds.
# 8: the critic compares a training with the attempts before it (it saw the training's own rate as the best
#    earlier one, so no training was ever extended), and a learned sub-action's policy starts on its coded
#    actions (coded_prior 0.9 in nodes.fast.ppo_defaults).
# 9: the expert repairs a collect_ action that returned without its item by calling it again (a sapling drops
#    on one grass hit in ten); score plans (crafter_score) pass over what failed and are scored by achievement;
#    a sub-action learned from the start (no code attempt) has no coded prior.
# 10: the critic's verdict stands (no move forced when code revisions run out; fail keeps the best attempt and
#    goes on); a code test meets the target by a count fitted to its seeds (nodes.attempt.results.successes_needed:
#    7 of 8 for 0.9); programs are assembled from one pool of written definitions (nodes.skills.pool.Pool); a plan
#    that gives up falls back to learning the task.
# 11: held-out play runs each skill with the library as the latest passing code test that replayed it had it
#    (nodes.executor._load_chain): a learned skill's stored actions now reach the earlier skills a later test
#    replayed with them.
# 12: a training starts its episodes where earlier code tests reached the subtask (nodes.starts), starts as the
#    code it was moved from (play_<subtask>, ppo.prior_action), decides every 32 steps of a coded call
#    (RLConfig.decision_steps), and stops at half its budget when it cannot reach that code's rate
#    (ppo.stop_below); a test of a policy's building block is never kept as the subtask's skill.
# 13: for the last subtask of a one-achievement task's plan, a code round ends the repairs only when its
#    successes over all runs meet the pass count too (nodes.attempt.results.round_passes); an answer that would
#    test the same program again is not tested (a digest of the program, not of the answer); within a subtask the
#    definition an answer sent last is the live one (nodes.attempt.rounds.live_code), whichever sub-action sent it.
# 14: a score plan's held-out chain plays the skills that met the target first, then the others, the likeliest
#     first (nodes.executor.score_play_order): a weak skill mid-plan cost every achievement after it.
# 15: a score plan keeps the best attempt of a subtask that never succeeded, played last with its own code only (what
#     needs it is still dropped; nodes.planner._go_on_without, nodes.skills.records.shares_its_code), and a score
#     chain's skill that does not load is left out of held-out play rather than stopping it.
# 16: the plan's last subtask of a one-achievement task passes on the runs that reached its action once at least
#     half of its runs did (13's count over every run was out of any chain's reach); a rewrite of a chain helper
#     that does not succeed on 2 more of the same seeds leaves the earlier one in place; past the re-plan limit a
#     failed subtask before the task that sometimes succeeded plays before the learned task.
# 17: the plan's last subtask of a one-achievement task tests on twice the run's seeds (nodes.fast.test_seed_count),
#     and a chain helper's rewrite needs a quarter of the round's seeds more successes (prompts.fewshot.rewrite_margin).
# 18: in a one-achievement task's plan every subtask's code tests replay every earlier skill, as held-out play chains
#     them, not only what the recipe needs (nodes.skills.records.replays_earlier_skills); a skill records what its
#     tests replayed (Skill.replayed), which held-out play follows.
GRAPH_RULES_VERSION = 18
METHOD_LABELS = {"rlgpt": "RL-GPT (rule-based expert)", "pure_rl": "pure RL (PPO, primitive actions)",
                 "pure_code": "pure code (coded actions, no RL)",
                 "rl_with_code": "PPO + coded actions in the action head"}


@dataclass
class Column:
    key: str
    header: str
    kind: str = "text"   # text | int | rate (rendered with its _ci_low/_ci_high) | pct | float


@dataclass
class Table:
    key: str
    title: str
    paper: str                       # what it reproduces in the paper
    columns: list[Column]
    rows: list[dict[str, Any]]
    notes: list[str] = field(default_factory=list)
    plot: str | None = None          # PNG file name in the results folder


@dataclass
class EvalConfig:
    out: Path
    budget: int = 1_000_000          # tables 1 and 5 (the Crafter standard budget)
    task_budget: int = 200_000       # each task of tables 2, 3 and 4
    episodes: int = 100
    seed: int = 0
    train_steps: int = 20_000        # one PPO training inside RL-GPT
    test_episodes: int = 8           # code-test seeds per measurement
    tasks: tuple[str, ...] = TECH_TREE
    iteration_task: str = "collect_wood"
    ablation_task: str = "make_wood_pickaxe"
    crafter_episode_steps: int = 10_000
    vector_mode: str = "sync"        # PPO's vector mode in every cell (rl.ppo); not 'sync': part of the keys
    quick: bool = False
    videos: bool = True              # table 1: a GIF per method of its furthest held-out episode (graph/video.py)

    def mode_key(self) -> tuple[str, ...]:
        """Cache-key part for the vector mode: none for 'sync', so the cells measured before stay valid."""
        return () if self.vector_mode == "sync" else (f"v{self.vector_mode}",)

    @property
    def work(self) -> Path:
        return self.out / "work"


class Runner:
    """Measures cells (cached) and logs progress with the elapsed time."""

    def __init__(self, cfg: EvalConfig, cache: CellCache, log: Callable[[str], None] = print):
        self.cfg, self.cache, self.log = cfg, cache, log
        self.started = time.time()
        self.used: dict[str, dict] = {}  # key -> value of every cell this run's tables used

    def cell(self, label: str, key: str, compute: Callable[[], dict], local: bool = False) -> dict:
        """The cell's value, from the cache or measured now. ``local``: it reads files that earlier cells wrote,
        so `graph.evaluate --ray` measures it here rather than on a Ray node (graph/evaluation/ray_cells.py)."""
        self.log(f"[{time.time() - self.started:7.0f}s] {label}")
        value = self.cache.get_or_run(key, compute, log=self.log)
        self.used[key] = value
        rate = value.get("success_rate")
        if rate is not None:
            spent = f"{value['env_steps']:,} env steps, " if value.get("env_steps") is not None else ""
            self.log(f"          -> {rate:.0%} over {value['episodes']} held-out episodes, {spent}"
                     f"{value.get('wall_s', 0)} s")
        return value

    def video(self, name: str, cell: dict, title: str) -> Path | None:
        """OUT/videos/NAME.gif: the held-out episode where the cell's method got furthest, made from the episode
        the cell recorded (`replays`, cached with the cell) by replaying its actions here: no agent code runs and
        no new seed is played. A video that already shows that episode is kept; a failure costs one log line."""
        from envs.replay import EpisodeRecord
        from graph.video import VIDEO_DIR, video_is_current, write_video

        path = self.cfg.out / VIDEO_DIR / f"{name}.gif"
        recorded = (cell.get("replays") or {}).get("furthest")
        if not recorded:
            self.log(f"  no video {path.name}: the cell recorded no episode (a cell cached before videos were "
                     "recorded: --no-resume measures it again)")
            return None
        try:
            record = EpisodeRecord.from_json(recorded)
            if self.cache.enabled and video_is_current(path, record):
                self.log(f"  cached  {path}")
            else:
                info = write_video(record, path, title=title, episode="furthest")
                self.log(f"  video   {path}: {info['frames']} frames, every {info['stride']} steps of "
                         f"{info['episode_steps']}, {info['bytes']:,} bytes")
            return path
        except Exception as exc:  # a picture of the cell, never a reason to lose the table
            why = (str(exc).splitlines() or [""])[0]
            self.log(f"  warning: no video {path.name}: {type(exc).__name__}: {why}")
            return None

    def rlgpt(self, task: str, budget: int, variant: str = "full", eval_max_steps: int | None = None) -> dict:
        c = self.cfg
        length = (f"l{eval_max_steps}",) if eval_max_steps else ()
        key = cell_key("rlgpt", variant, task, f"b{budget}", f"e{c.episodes}", f"s{c.seed}", *length,
                       f"t{c.train_steps}", f"c{c.test_episodes}", _graph_rules_key(), *c.mode_key())
        return self.cell(f"RL-GPT ({variant}) on {task}, budget {budget:,}", key, lambda: methods.run_rlgpt(
            task, budget, c.episodes, c.work, key, seed=c.seed, variant=variant, train_steps=c.train_steps,
            test_episodes=c.test_episodes, vector_mode=c.vector_mode, eval_max_steps=eval_max_steps, log=self.log))

    def pure_rl(self, task: str, budget: int, coded: bool = False) -> dict:
        c = self.cfg
        name = "rl_with_code" if coded else "pure_rl"
        key = cell_key(name, task, f"b{budget}", f"e{c.episodes}", f"s{c.seed}", *_rules_key(coded), *c.mode_key())
        sources = list(_coded(task).values()) if coded else None
        return self.cell(f"{METHOD_LABELS[name]} on {task}, budget {budget:,}", key, lambda: methods.run_pure_rl(
            task, budget, c.episodes, c.work / key, seed=c.seed, coded_sources=sources, vector_mode=c.vector_mode,
            log=self.log))

    def pure_code(self, task: str) -> dict:
        c = self.cfg
        key = cell_key("pure_code", task, f"e{c.episodes}", f"s{c.seed}", f"c{c.test_episodes}", f"r{RULES_VERSION}")
        return self.cell(f"pure code on {task}", key, lambda: methods.run_pure_code(
            task, c.episodes, test_episodes=c.test_episodes, seed=c.seed, log=self.log))


def _graph_rules_key() -> str:
    """Cache-key part of an RL-GPT or iteration cell: the graph's rules and the coded rules its skills play by."""
    return f"r{GRAPH_RULES_VERSION}.{RULES_VERSION}"


def _rules_key(coded: bool) -> tuple[str, ...]:
    """Cache-key part of a PPO cell: the rules version when coded actions are in its head, none on primitives."""
    return (f"r{RULES_VERSION}",) if coded else ()


def _coded(task: str) -> dict[str, str]:
    from graph.evaluation.coded import coded_actions_for

    return coded_actions_for(task)


def _rate_row(cell: dict, prefix: str = "") -> dict[str, Any]:
    return {f"{prefix}success_rate": cell.get("success_rate"), f"{prefix}success_rate_ci_low": cell.get("ci_low"),
            f"{prefix}success_rate_ci_high": cell.get("ci_high"), f"{prefix}episodes": cell.get("episodes"),
            f"{prefix}env_steps": cell.get("env_steps")}


def paired_text(label_a: str, cell_a: dict, label_b: str, cell_b: dict) -> str:
    """Two methods compared seed by seed (McNemar's exact test), or why they cannot be."""
    from rl.stats import mcnemar_exact

    a, b = cell_a.get("outcomes"), cell_b.get("outcomes")
    if not a or not b or len(a) != len(b):
        return (f"{label_a} vs {label_b}: no paired test (a cell measured before per-seed outcomes were stored; "
                "`--no-resume` measures it again)")
    t = mcnemar_exact(a, b)
    return (f"{label_a} vs {label_b} on the same {t['episodes']} seeds: {t['only_a']} won only by {label_a}, "
            f"{t['only_b']} only by {label_b}, {t['both']} by both, {t['neither']} by neither; difference "
            f"{100 * t['difference']:+.1f} points, McNemar exact p = {t['p_value']:.3g}")


def _paired_achievement(achievement: str, a: list[list[str]], b: list[list[str]]) -> str:
    """One achievement unlocked or not by two methods on the same seeds (McNemar's exact test), in short."""
    from rl.stats import mcnemar_exact

    t = mcnemar_exact([int(achievement in e) for e in a], [int(achievement in e) for e in b])
    return f"{100 * t['difference']:+.1f} ({t['only_a']} vs {t['only_b']}, p = {t['p_value']:.3g})"


def _seed_note(cfg: EvalConfig) -> str:
    from envs.seeds import eval_seeds

    seeds = eval_seeds(cfg.episodes)
    return (f"Held-out evaluation seeds: {seeds[0]}..{seeds[-1]} ({cfg.episodes} episodes, one per seed, "
            "never used by training or code tests); 95% Wilson intervals.")


# ---- Table 1 ---------------------------------------------------------------------------------
def table_diamond(run: Runner) -> Table:
    c = run.cfg
    cells = {"rlgpt": run.rlgpt("collect_diamond", c.budget), "pure_rl": run.pure_rl("collect_diamond", c.budget),
             "pure_code": run.pure_code("collect_diamond")}
    rows = [{"method": METHOD_LABELS[m], "source": OURS, **_rate_row(cell), "budget_steps": c.budget,
             "note": cell.get("note") or (f"stopped: {cell['stop_reason']}" if cell.get("stop_reason") else "")}
            for m, cell in cells.items()]
    rows += [{"method": p.method, "source": p.label, "success_rate": p.value, "env_steps": p.samples,
              "note": f"{p.source}" + (f"; {p.note}" if p.note else "")} for p in published.DIAMOND]
    cols = [Column("method", "method"), Column("source", "source"), Column("success_rate", "success", "rate"),
            Column("episodes", "episodes", "int"), Column("env_steps", "env steps spent", "int"),
            Column("budget_steps", "budget", "int"), Column("note", "note")]
    notes = [_seed_note(c),
             "Env steps: every primitive step of training and code tests, in every iteration "
             "(pure code: its code tests). Held-out evaluation steps are not budget.",
             "Rows marked 'published, MineDojo' are the paper's Minecraft figures, not our runs; "
             "Crafter's diamond sits at the same depth of the tech tree.",
             "Paired: " + "; ".join(paired_text(METHOD_LABELS["rlgpt"], cells["rlgpt"], METHOD_LABELS[m], cells[m])
                                    for m in ("pure_code", "pure_rl")) + "."]
    if c.videos:
        videos = {m: run.video(f"table1_{m}", cell, f"{METHOD_LABELS[m]}: the held-out episode where it got furthest")
                  for m, cell in cells.items()}
        links = [f"[{METHOD_LABELS[m]}](videos/{path.name})" for m, path in videos.items() if path is not None]
        if links:
            notes.append("Videos of play, the held-out episode where each method got furthest (every k-th step, "
                         "captioned with the skill and coded action; k and the captions in the .json beside each "
                         "GIF): " + ", ".join(links) + ".")
    return Table("table1_obtain_diamond", "Table 1: obtain diamond", "the paper's Table 1 (ObtainDiamond)",
                 cols, rows, notes, plot="table1_obtain_diamond.png")


# ---- Table 2 ---------------------------------------------------------------------------------
def table_tech_tree(run: Runner) -> Table:
    c = run.cfg
    rows = []
    paired: list[str] = []
    for task in c.tasks:
        row: dict[str, Any] = {"task": task}
        cells = {"rlgpt": run.rlgpt(task, c.task_budget), "pure_rl": run.pure_rl(task, c.task_budget),
                 "pure_code": run.pure_code(task)}
        for m, cell in cells.items():
            row.update(_rate_row(cell, f"{m}_"))
        paired.append(f"{task}: " + paired_text("RL-GPT", cells["rlgpt"], "pure code", cells["pure_code"]))
        pub = published.TECH_TREE_RLGPT.get(task)
        row["published_rlgpt_minedojo"] = pub.value if pub else None
        rows.append(row)
    cols = [Column("task", "task")]
    for m in ("rlgpt", "pure_rl", "pure_code"):
        cols += [Column(f"{m}_success_rate", METHOD_LABELS[m], "rate"), Column(f"{m}_env_steps", "steps", "int")]
    cols.append(Column("published_rlgpt_minedojo", "RL-GPT, published MineDojo (not ours)", "pct"))
    return Table("table2_tech_tree", "Table 2: tech-tree tasks", "the paper's Table 2 (MineDojo tasks)", cols, rows,
                 [_seed_note(c), f"Budget per task and method: {c.task_budget:,} env steps (pure code spends "
                  "only its code tests).", "The last column is RL-GPT's published MineDojo success on the "
                  "corresponding Minecraft task (crafting table, wooden pickaxe, stone, stone pickaxe, furnace); "
                  "not our run.", "Paired, per task: " + "; ".join(paired) + "."], plot="table2_tech_tree.png")


# ---- Table 3 ---------------------------------------------------------------------------------
def table_iterations(run: Runner) -> Table:
    c = run.cfg
    task = c.iteration_task
    cell = run.rlgpt(task, c.task_budget)
    base_key = cell_key("iter", task, f"b{c.task_budget}", f"e{c.episodes}", f"s{c.seed}", f"t{c.train_steps}",
                        _graph_rules_key(), *c.mode_key())
    rows, spent = [], 0
    attempts = [a for a in cell.get("attempts", [])]
    for i, attempt in enumerate(attempts):
        spent += int(attempt.get("steps") or 0)
        held = run.cell(f"iteration {i} of RL-GPT on {task} ({attempt['kind']})", f"{base_key}-a{i}",
                        # mypy cannot infer a lambda with a default argument
                        lambda a=attempt: _evaluate_attempt(task, a, cell, c.episodes, c.seed),  # type: ignore[misc]
                        local=True)  # plays the run's policy files
        rows.append({"iteration": i, "outer": attempt.get("outer_iter"), "inner": attempt.get("inner_iter"),
                     "subtask": attempt.get("subtask"), "kind": attempt.get("kind"),
                     "measured_success": attempt.get("success_rate"), "cumulative_env_steps": spent,
                     "success_rate": held.get("success_rate"), "success_rate_ci_low": held.get("ci_low"),
                     "success_rate_ci_high": held.get("ci_high"), "episodes": held.get("episodes")})
    for it, value in published.HARVEST_LOG_ITERATIONS:
        rows.append({"iteration": it, "kind": "published, MineDojo (not ours)", "success_rate": value,
                     "subtask": "harvest log"})
    cols = [Column("iteration", "iteration", "int"), Column("outer", "outer", "int"), Column("inner", "inner", "int"),
            Column("subtask", "subtask"), Column("kind", "code / RL"),
            Column("measured_success", "success seen by the critic", "pct"),
            Column("cumulative_env_steps", "env steps so far", "int"),
            Column("success_rate", "held-out success", "rate"), Column("episodes", "episodes", "int")]
    return Table("table3_iterations", f"Table 3: iterations of the two loops on '{task}' (harvest log)",
                 "the paper's harvest-log iterations figure", cols, rows,
                 [_seed_note(c), "Each measured attempt of the run is one iteration (outer = slow-agent revision, "
                  "inner = fast-agent revision: a repair from the test report or a longer training); its code or "
                  "policy is played again on the held-out seeds. "
                  "'Success seen by the critic' is the code-test or training success the loop decided on.",
                  "Published rows: the paper's MineDojo end points (0% at iteration 0, 58% at iteration 3)."],
                 plot="table3_iterations.png")


def _evaluate_attempt(task: str, attempt: dict, cell: dict, episodes: int, seed: int) -> dict:
    """The chain as it stood at this attempt: earlier subtasks' final skills, then this attempt."""
    skills = []
    for name in cell.get("plan", []):
        if name == attempt["subtask"]:
            break
        if name in cell.get("skills", {}):
            skills.append((name, cell["skills"][name]))
    if attempt["kind"] == "code" and attempt.get("sources"):
        skills.append((attempt["subtask"], code_skill("\n\n".join(attempt["sources"]), attempt.get("entry") or "main")))
    elif attempt["kind"] == "rl" and attempt.get("policy_path"):
        skills.append((attempt["subtask"], {"kind": "rl", "policy_path": attempt["policy_path"]}))
    start = time.time()
    held = evaluate_skills(task, skills, episodes, seed)
    return {**{k: held[k] for k in ("successes", "episodes", "success_rate", "ci_low", "ci_high", "eval_steps",
                                    "outcomes")},
            "wall_s": round(time.time() - start, 1)}


# ---- Table 4 ---------------------------------------------------------------------------------
def table_ablations(run: Runner) -> Table:
    c = run.cfg
    task = c.ablation_task
    rows = []
    for variant, label in (("full", "slow + fast + critic"), ("no_critic", "slow + fast"),
                           ("one_agent", "one agent")):
        cell = run.rlgpt(task, c.task_budget, variant)
        rows.append({"ablation": "agent structure", "setting": label, **_rate_row(cell),
                     "note": methods.VARIANTS[variant]})
    for coded, label in ((True, "PPO with coded actions in the action head"),
                         (False, "PPO without coded actions (primitives only)")):
        cell = run.pure_rl(task, c.task_budget, coded=coded)
        counts = cell.get("coded_action_counts") or {}
        rows.append({"ablation": "action head", "setting": label, **_rate_row(cell),
                     "note": ("coded actions: " + ", ".join(counts)) if counts else "17 primitive actions"})
    cols = [Column("ablation", "ablation"), Column("setting", "setting"), Column("success_rate", "success", "rate"),
            Column("episodes", "episodes", "int"), Column("env_steps", "env steps spent", "int"),
            Column("note", "what it is")]
    return Table("table4_ablations", f"Table 4: ablations on '{task}'", "the paper's ablations (agent structure; "
                 "coded actions in the action head)", cols, rows,
                 [_seed_note(c), f"Every row spends at most {c.task_budget:,} env steps.",
                  "With the rule-based expert the structure variants are set by the loops: 'slow + fast' keeps the "
                  "first measured attempt (the critic's verdict is replaced by acceptance), 'one agent' has no outer "
                  "loop (max_outer_iters = 1)."], plot="table4_ablations.png")


# ---- Table 5 ---------------------------------------------------------------------------------
def crafter_cells(run: Runner) -> dict[str, dict]:
    c = run.cfg
    steps = c.crafter_episode_steps
    # RL-GPT's row is the graph itself on the crafter_score task: a plan over every achievement, its
    # skills played in one episode per held-out seed (the task's own length, 10,000 steps)
    out = {"rlgpt": run.rlgpt("crafter_score", c.budget, eval_max_steps=steps)}
    for name, coded in (("rl_with_code", True), ("pure_rl", False)):
        key = cell_key("crafter", name, f"b{c.budget}", f"e{c.episodes}", f"s{c.seed}", f"l{steps}",
                       *_rules_key(coded), *c.mode_key())

        def compute(name=name, coded=coded, key=key) -> dict:
            start = time.time()
            trained = methods.run_pure_rl("crafter_score", c.budget, 0, c.work / key, seed=c.seed,
                                          coded_sources=list(_coded("collect_diamond").values()) if coded else None,
                                          reward="crafter", max_episode_steps=steps, vector_mode=c.vector_mode,
                                          log=run.log)
            from rl.policy_skill import PolicySkill

            policy = PolicySkill(trained["policy_path"], seed=c.seed)
            try:
                played = crafter_episodes(lambda env, n: play_policy_episode(env, policy, n), c.episodes, steps,
                                          run.log, name)
            finally:
                policy.close()
            return {**trained, **played, "wall_s": round(time.time() - start, 1)}

        out[name] = run.cell(f"Crafter score: {METHOD_LABELS[name]}, budget {c.budget:,}", key, compute)
    key = cell_key("crafter", "pure_code", "plan", f"e{c.episodes}", f"s{c.seed}", f"l{steps}",
                   f"c{c.test_episodes}", f"r{RULES_VERSION}")

    def compute_code() -> dict:
        start = time.time()
        tested = methods.test_pure_code("crafter_score", c.test_episodes, c.seed, run.log)
        with AgentCode([tested["source"]]) as code:
            played = crafter_episodes(lambda env, n: play_code_episode(env, code, "main", n),
                                      c.episodes, steps, run.log, "pure_code")
        return {"method": "pure_code", "env_steps": tested["env_steps"], **played,
                "wall_s": round(time.time() - start, 1)}

    out["pure_code"] = run.cell("Crafter score: pure code (the expert's coded plan)", key, compute_code)
    return out


def tables_crafter(run: Runner) -> list[Table]:
    c = run.cfg
    cells = crafter_cells(run)
    labels = {"rlgpt": "RL-GPT (rule-based expert): `graph.run crafter_score`",
              "rl_with_code": "PPO + the expert's coded actions in its head (ablation)",
              "pure_rl": METHOD_LABELS["pure_rl"],
              "pure_code": "pure code: the expert's coded plan over the achievements, no RL"}
    score_rows: list[dict[str, Any]] = []
    per: dict[str, dict[str, float]] = {}
    for name, cell in cells.items():
        rates = achievement_rates(cell["achievements"])
        per[name] = rates
        low, high = bootstrap_score(cell["achievements"], seed=c.seed)
        score_rows.append({"agent": labels[name], "source": OURS, "crafter_score": crafter_score(rates),
                           "crafter_score_ci_low": low, "crafter_score_ci_high": high,
                           "episodes": len(cell["achievements"]), "env_steps": cell.get("env_steps"),
                           "mean_episode_length": float(cell["mean_episode_length"] if "mean_episode_length" in cell
                                                        else np.mean(cell["episode_steps"]))})
    for p in published.CRAFTER_SCORES:
        score_rows.append({"agent": p.method, "source": p.label, "crafter_score": p.value, "env_steps": p.samples,
                           "note": p.source})
    score_cols = [Column("agent", "agent"), Column("source", "source"),
                  Column("crafter_score", "Crafter score (%)", "score"), Column("episodes", "episodes", "int"),
                  Column("env_steps", "env steps spent", "int"), Column("mean_episode_length", "mean length", "float"),
                  Column("note", "note")]
    # RL's part in RL-GPT's score: the graph against the same plan played as code, seed by seed
    both = "rlgpt" in cells and "pure_code" in cells
    graph_played: list[list[str]] = cells["rlgpt"]["achievements"] if both else []
    code_played: list[list[str]] = cells["pure_code"]["achievements"] if both else []
    paired = both and len(graph_played) == len(code_played)
    ach_rows = []
    for a in ACHIEVEMENTS:
        row: dict[str, Any] = {"achievement": a}
        for name in cells:
            played = cells[name]["achievements"]
            r = rate_fields(sum(a in e for e in played), len(played))
            row.update({f"{name}": r["success_rate"], f"{name}_ci_low": r["ci_low"], f"{name}_ci_high": r["ci_high"]})
        if paired:
            row["paired"] = _paired_achievement(a, graph_played, code_played)
        for who, figures in published.CRAFTER_ACHIEVEMENTS.items():
            if a in figures:
                row.setdefault("published", "")
                row["published"] = (row["published"] + "; " if row["published"] else "") + f"{who} {figures[a]:g}%"
        ach_rows.append(row)
    ach_cols = [Column("achievement", "achievement")] + [Column(name, labels[name], "rate") for name in cells] + (
        [Column("paired", "RL-GPT minus pure code, same seeds")] if paired else []) + [
        Column("published", "published Crafter figures (not ours)")]
    length_note = ("" if c.crafter_episode_steps == 10_000 else
                   f" NOTE: episodes were cut at {c.crafter_episode_steps} steps, not the benchmark's 10000.")
    notes = [_seed_note(c), "Crafter score = exp(mean_i ln(1 + s_i)) - 1 over the 22 achievements, s_i in percent "
             "(Hafner 2021); its interval is a 1000-draw bootstrap over episodes." + length_note,
             f"RL-GPT is the graph on the crafter_score task with {c.budget:,} env steps: the planner's plan over "
             "the achievements, each coded or learned and judged by its own achievement in its test episodes; its "
             "skills are played in plan order in each episode (those that did not meet the target last, with the "
             "skills that need them), a skill whose prerequisites did not unlock is "
             "passed over, and the episode ends at death, the step limit or the plan's end. The pure-code row "
             "plays the same plan's coded achievements (no RL) in one program, which ends when its plan does "
             "(standing still unlocks nothing).",
             f"The PPO rows trained for {c.budget:,} env steps on Crafter's own reward; an episode ends at "
             "death or the step limit.",
             "Published rows are the benchmark's reported scores at their own budgets, not our runs."]
    ach_notes = [_seed_note(c)]
    if paired:
        diff, low, high = bootstrap_score_difference(graph_played, code_played, seed=c.seed)
        notes.append(f"Paired: RL-GPT minus pure code on the same {len(graph_played)} seeds: "
                     f"{diff:+.2f} [{low:+.2f} to {high:+.2f}] Crafter score points (a 1000-draw bootstrap over "
                     "seeds, each draw taking both methods' episodes of a seed); per achievement in table 5b.")
        ach_notes.append("RL-GPT minus pure code: the difference in points on the same seeds, the seeds won only by "
                         "RL-GPT and only by pure code, and McNemar's exact p.")
    elif both:
        ach_notes.append(f"RL-GPT and pure code are not paired: they played {len(graph_played)} "
                         f"and {len(code_played)} episodes.")
    return [Table("table5_crafter_score", "Table 5: Crafter score", "the Crafter benchmark (not in the paper)",
                  score_cols, score_rows, notes, plot="table5_crafter_score.png"),
            Table("table5_achievements", "Table 5b: success rate per achievement", "the Crafter benchmark",
                  ach_cols, ach_rows, ach_notes, plot="table5_achievements.png")]


BUILDERS: dict[int, Callable[[Runner], Table | list[Table]]] = {
    1: table_diamond, 2: table_tech_tree, 3: table_iterations, 4: table_ablations, 5: tables_crafter}
