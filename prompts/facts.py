"""The facts each role's prompt is given, as types: one per role, shared by the node that builds them,
the renderer that shows them (prompts.templates) and the rule-based expert that reasons on them
(nodes.models.expert), so that mypy checks all three against one list of keys.

All of them are TypedDicts, i.e. plain dicts at runtime. `NotRequired` marks a key the node gives only
in some calls; the renderers still read every key with `.get` (a hand-built context may leave any out).

The agents' answers the prompts show again (a plan's subtask, a decomposition, a critique) are typed
here too, as the plain dumps of the pydantic answers in nodes.schemas: the prompts sit below the nodes,
so the state's entries (nodes.entries) take these from here.
"""

from __future__ import annotations

from typing import Any, Literal

from typing_extensions import NotRequired, TypedDict  # pydantic (LangGraph's schemas) needs it before 3.12

Kind = Literal["code", "rl"]
Verdict = Literal["pass", "revise", "move", "fail"]
TemplateKind = Literal["collect", "place", "make", "explore", "defeat", "plant", "custom"]


# -- the answers, as plain data (nodes.schemas dumps) --------------------------------------------------

class SubtaskEntry(TypedDict):
    """One step of the plan (nodes.schemas.Subtask)."""

    name: str                    # Crafter task name
    goal: str
    success_condition: str


class SubActionEntry(TypedDict):
    """One sub-action of a decomposition (nodes.schemas.SubAction)."""

    name: str                    # for code, the function name
    kind: Kind
    reason: str
    template: TemplateKind       # the few-shot example the code starts from
    target: str | None           # what the template is filled with
    item: str | None             # the inventory item it yields
    coded_actions: list[str]     # rl: the coded actions its action head gets


class DecompositionEntry(TypedDict):
    """The slow agent's decomposition of one subtask (nodes.schemas.Decomposition)."""

    subtask: str
    sub_actions: list[SubActionEntry]
    reason: str


class CritiqueEntry(TypedDict):
    """The critic's judgement (nodes.schemas.Critique); the state's `feedback`."""

    sub_action: str
    verdict: Verdict
    success_rate: float
    feedback: str
    move_to: Kind | None         # with verdict 'move'


class FailedEntry(TypedDict):
    """A failed subtask the planner re-plans around (the state's `failed`)."""

    subtask: str
    best_rate: float
    feedback: str


class AttemptResult(TypedDict, total=False):
    """What a code test measured, kept with the attempt for the repairs (nodes.measure)."""

    success_rate: float
    success_given_start: float | None
    started: int                 # runs that reached the judged action (of `episodes`)
    episodes: int
    prerequisites: list[str]     # achievements the replayed chain unlocks first (empty: nothing replayed)
    outcomes: dict[str, int]
    per_seed: list[dict[str, Any]]


class LastAttempt(TypedDict):
    """The fast agent's latest code of this attempt and its test report (the attempt state's `last_attempt`)."""

    sub_action: str
    code: str
    max_steps: int
    report: str | None           # None until its test round came back
    result: NotRequired[AttemptResult]  # a code test's numbers (nodes.measure)
    program: NotRequired[str]    # not rendered: a digest of the program its test played (not tested twice)
    replayed: NotRequired[list[str]]  # not rendered: the earlier skills its test played first (Skill.replayed)


class PreviousAttempt(TypedDict):
    """Code from an earlier outer iteration the fast agent starts from (the state's `previous_attempt`)."""

    sub_action: str
    code: str | None
    outer_iter: int
    report: NotRequired[str | None]     # the critic sent it back with this report
    result: NotRequired[AttemptResult | None]  # what that report measured
    replanned: NotRequired[bool]         # written for a plan the slow agent has changed since


# -- planner ------------------------------------------------------------------------------------------

class PlannerFacts(TypedDict):
    task: str
    task_description: str
    recipes: list[dict[str, Any]]        # every achievement's recipe facts (nodes.recipes.all_recipe_facts)
    failed: NotRequired[FailedEntry]     # a re-plan: the subtask that failed
    remaining: NotRequired[list[SubtaskEntry]]  # a re-plan: the plan from the failed subtask on


# -- slow agent ---------------------------------------------------------------------------------------

class PriorSkill(TypedDict):
    subtask: str
    kind: Kind
    success_rate: float


class BestSoFar(TypedDict):
    kind: Kind
    success_rate: float


class SlowFacts(TypedDict):
    subtask: SubtaskEntry
    recipe: dict[str, Any]               # nodes.recipes.recipe_facts
    template: dict[str, str] | None      # the few-shot example that fits (nodes.recipes.template_for)
    task_description: str
    prior_skills: list[PriorSkill]
    previous: DecompositionEntry | None  # the decomposition being revised
    critique: CritiqueEntry | None       # the critic's latest judgement
    best: BestSoFar | None               # the subtask's best measured attempt
    outer_iter: int
    max_outer_iters: int
    forced_rl: str | None                # the sub-action the graph moved to rl
    rewritten: NotRequired[dict[str, str]]  # built-in action -> the earlier subtask whose code wrote it anew


# -- fast agent ---------------------------------------------------------------------------------------

class FastLimits(TypedDict):
    test_seeds: int
    max_steps_per_test: int
    budget_left: int
    revision: int
    max_revisions: int
    pass_rule: str
    last_round_steps: NotRequired[int]   # the env steps of this sub-action's latest code-test round
    max_code_chars: NotRequired[int]     # the longest code an answer may hold (nodes.schemas.MAX_CODE_CHARS)
    # roomy prompts: why a rewrite of a chain helper would not be played against the earlier one this round
    helpers_compared_only_if: NotRequired[str]
    helpers_compared_already: NotRequired[dict[str, str]]  # live rewrites compared before: name -> whose stood before
    helpers_compared: NotRequired[list[str]]  # the chain helpers such a rewrite would be of (not the action tested)
    helpers_compared_cap: NotRequired[int]  # the `max_steps` a higher one is lowered to so both run (comparison_cap)


class RLFacts(TypedDict):
    coded_actions: list[str]             # what the action head may hold
    train_steps: int                     # the default total_steps
    min_train_steps: int
    max_train_steps: int
    subtasks_left: int
    previous_train_steps: int | None     # this sub-action's last training
    revise: bool                         # the critic asked for another training
    total_steps_set_by_the_graph: NotRequired[str]
    reward_set_by_the_graph: NotRequired[str]
    coded_actions_tested_before_training: NotRequired[str]
    left_out_of_the_head: NotRequired[str]
    episodes_start: NotRequired[str]     # where training episodes start, when saved moments of the chain exist
    decision_steps: NotRequired[int]     # steps of a coded call between two decisions of the policy


# the rate at which a kept skill counts as passing, unless a run sets another (nodes.settings.RunSettings)
DEFAULT_SKILL_THRESHOLD = 0.5


class FastFacts(TypedDict):
    subtask: str
    task_description: str
    mode: Kind
    sub_action: SubActionEntry           # the one to write or train now
    decomposition: DecompositionEntry
    reused: NotRequired[list[str]]       # its coded sub-actions that are earlier skills, reused as they are
    # the other coded sub-actions whose code from before stays, when this answer is the last one to write (its
    # test, of the whole decomposition, runs on it)
    kept_pieces: NotRequired[list[str]]
    library: list[dict[str, Any]]        # nodes.skills.pool.listing
    module_names: NotRequired[list[dict[str, Any]]]  # roomy code prompts: constants and imports (pool.module_names)
    # a sub-action the decomposition dropped -> the functions of its code that are no longer loaded
    unloaded: NotRequired[dict[str, list[str]]]
    examples: dict[str, str]             # few-shot example name -> source
    last_attempt: LastAttempt | None
    feedback: str | None                 # the critic's feedback text
    previous_attempt: PreviousAttempt | None
    limits: FastLimits
    skill_threshold: NotRequired[float]  # the rate at which a kept skill counts as passing (RunSettings)
    room: NotRequired[str]               # how much of the long texts to show (prompts.templates.PROMPT_ROOMS)
    # a roomy prompt's repair: the subtask's best code attempt so far where it is not the last round's
    best_attempt: NotRequired[dict[str, Any]]
    sources: dict[str, str]              # not rendered: the library's sources, for the expert
    prefix: list[str]                    # not rendered: the solved skills' entries a test replays
    rl: NotRequired[RLFacts]             # rl mode
    configured: NotRequired[Any]         # rl mode: the configuration configure_rl validated
    configured_view: NotRequired[dict[str, Any]]  # the same, its coded actions by name
    configure_error: NotRequired[Any]    # rl mode: why configure_rl refused it


# -- critic -------------------------------------------------------------------------------------------

class JudgedAction(TypedDict):
    name: str
    kind: Kind


class CriticFacts(TypedDict):
    subtask: str
    sub_action: JudgedAction
    result: dict[str, Any]               # the measured result, its artefacts left out (nodes.critic)
    # the round's own figures (with its rewrite of a chain helper) where `result` is that code with the helpers
    # from before the rewrite: what the code and report shown measured
    rewrite_result: NotRequired[dict[str, Any] | None]
    code: str | None                     # a code attempt: its code and test report
    report: str | None
    fast_error: str | None               # why no answer of the fast agent could be used
    target: float
    best_by_kind: dict[str, float | None]  # best earlier rate per kind, and 'rl_before'
    best_measure: str  # which rate best_by_kind holds: success_rate, or success_given_start beside chain starts
    inner_iter: int
    max_inner_iters: int
    outer_iter: int
    max_outer_iters: int
    loops: dict[str, str]
    budget_left: int
    min_train_steps: int
    pass_rule: str
    meets_target: bool
    judged_count: tuple[int, int] | None  # (successes, runs) behind a code test's judged rate
    # the plan's last subtask: (runs that reached the action, runs, how many must reach it)
    reached_count: NotRequired[tuple[int, int, int] | None]
    same_seeds: list[float]              # the judged rates of earlier code attempts of it on these test seeds
    same_seeds_measure: NotRequired[str]  # which rates same_seeds holds ("judged rates" where not given)
    verdict_rules: str
    room: NotRequired[str]               # how much of the long texts to show (prompts.templates.PROMPT_ROOMS)
