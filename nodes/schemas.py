"""The answers the agents give, as pydantic models.

Planner -> `Plan`, slow agent -> `Decomposition`, critic -> `Critique`. A language model fills
them through structured output; the rule-based expert builds them directly. String fields are
length-bounded so that a small model cannot ramble past what a node can use, and every field has a
description because that is what a model reads in the JSON schema.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    create_model,
    field_validator,
    model_validator,
)

from envs.tasks import ACHIEVEMENTS, get_task
from prompts.facts import Kind, TemplateKind, Verdict  # one definition: the state's entries and the prompts use them
from prompts.fewshot import BUILTIN_PREFIX

NAME_RE = r"^[a-z][a-z0-9_]{0,47}$"
MAX_SUB_ACTIONS = 8


def _cut(limit: int):
    def cut(value: Any) -> Any:
        if not isinstance(value, str) or len(value) <= limit:
            return value
        # at a word, marked: the node reading it (a critique shown to the slow agent) sees that text was lost
        head = value[:limit - 4]
        space = head.rfind(" ")
        return (head[:space] if space > limit // 2 else head).rstrip(" ,;:") + " ..."
    return cut


# Free-text fields cut to their limit. A server that constrains answers to the schema does not enforce long
# length bounds (llama.cpp cannot compile them into its grammar), and prose past its limit is of no use to a
# node, so it is cut rather than refused.
Prose200 = Annotated[str, BeforeValidator(_cut(200)), StringConstraints(max_length=200)]
Prose300 = Annotated[str, BeforeValidator(_cut(300)), StringConstraints(max_length=300)]
Prose400 = Annotated[str, BeforeValidator(_cut(400)), StringConstraints(max_length=400)]
Prose600 = Annotated[str, BeforeValidator(_cut(600)), StringConstraints(max_length=600)]


class Subtask(BaseModel):
    """One step of the plan: a Crafter task whose achievement must be unlocked."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(max_length=48, description="Crafter task name, e.g. 'collect_wood', 'place_table'")
    goal: Prose200 = Field(description="what this step achieves, in a few words")
    success_condition: Prose200 = Field(
        description="how success is measured, e.g. \"achievement 'collect_wood' unlocked\"")

    @field_validator("name")
    @classmethod
    def _known(cls, value: str) -> str:
        return get_task(value).name  # UnknownTaskError (a ValueError) lists close matches


class Plan(BaseModel):
    """Subtasks in tech-tree order; the last one is the task itself."""

    model_config = ConfigDict(extra="forbid")

    # up to every achievement once: the Crafter-score task plans all 22
    subtasks: list[Subtask] = Field(max_length=len(ACHIEVEMENTS), description="ordered subtasks, prerequisites first")
    reason: Prose400 = Field("", description="why this order")

    @model_validator(mode="after")
    def _each_once(self) -> Plan:
        names = [s.name for s in self.subtasks]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:  # a subtask that came twice would be its own prerequisite
            raise ValueError(f"each subtask comes once in a plan, repeated: {', '.join(dupes)}")
        return self


class SubAction(BaseModel):
    """One piece of a subtask's solution, either coded or learned with RL."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=NAME_RE, description="snake_case name; for code, the function name")

    @field_validator("name")
    @classmethod
    def _not_reserved(cls, value: str) -> str:
        # the names the graph gives its own coded actions (the test chain, the solved prefix, the executor's) and
        # the library's names for the built-ins a rewrite replaces
        if value == "main" or value.startswith(("reach_", "play_", BUILTIN_PREFIX)):
            raise ValueError(f"'{value}' is a name the graph uses for its own coded actions or the built-ins; "
                             "pick another")
        return value
    kind: Kind = Field(description="'code' (a program over the game API) or 'rl' (learned with PPO)")
    reason: Prose300 = Field(description="why code or RL for this sub-action")
    template: TemplateKind = Field(
        "custom",
        description="which few-shot example the code starts from: collect, place, make, explore, defeat, plant")
    target: str | None = Field(
        None, max_length=48, description="material or item the template is filled with, e.g. 'tree', 'table'")
    item: str | None = Field(None, max_length=48, description="inventory item it yields, e.g. 'wood'")
    coded_actions: list[str] = Field(
        default_factory=list, max_length=12,
        description="for 'rl': names of coded actions appended to the policy's action head")


class Decomposition(BaseModel):
    """The slow agent's answer: the sub-actions of one subtask, each marked code or rl."""

    model_config = ConfigDict(extra="forbid")

    subtask: str = Field(max_length=48, description="the subtask these sub-actions solve")
    sub_actions: list[SubAction] = Field(min_length=1, max_length=MAX_SUB_ACTIONS,
                                         description="sub-actions in order; the last one achieves the subtask")
    reason: Prose400 = Field("", description="what changed from the previous decomposition and why")

    @model_validator(mode="after")
    def _unique_names(self) -> Decomposition:
        names = [a.name for a in self.sub_actions]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"sub-action names must be unique, repeated: {', '.join(dupes)}")
        return self


class Critique(BaseModel):
    """The critic's judgement of one measured attempt of a sub-action."""

    model_config = ConfigDict(extra="forbid")

    sub_action: str = Field(max_length=48, description="the sub-action judged")
    verdict: Verdict = Field(description="pass: good enough; revise: fix the code or configuration and try "
                                         "again; move: change code<->rl; fail: keep the best attempt so far "
                                         "and go on")
    success_rate: float = Field(ge=0.0, le=1.0, description="measured success rate of this attempt")
    feedback: Prose600 = Field(description="what went wrong and what to change, concretely, in at most 600 "
                                         "characters (the rest is cut)")
    move_to: Kind | None = Field(None, description="with verdict 'move': the kind to move the sub-action to")

    @model_validator(mode="after")
    def _move_needs_kind(self) -> Critique:
        if self.verdict == "move" and self.move_to is None:
            raise ValueError("verdict 'move' needs move_to ('code' or 'rl')")
        if self.verdict != "move" and self.move_to is not None:
            raise ValueError("move_to is only allowed with verdict 'move'")
        return self


# -- the fast agent's answers ---------------------------------------------------------------------
# The fast agent answers with one of these per call; the node turns the answer into real tool calls
# (the test seeds, the task, the library's sources and the PPO defaults are the graph's facts, not
# the model's). The node builds a subclass per call that knows the names of that moment, so that a
# schema-constrained server can only produce valid names and a wrong one is re-asked with the reason.

MAX_CODE_CHARS = 8000


class WriteCode(BaseModel):
    """Write the coded action you were asked for and test it in fresh episodes (one per test seed)."""

    model_config = ConfigDict(extra="forbid")

    code: str = Field(max_length=MAX_CODE_CHARS, description=(
        "Python source of ONE coded action: a generator function `def NAME(game): ... yield 'do'` "
        "that yields primitive action names (helper functions allowed); it may call the library's "
        "coded actions with `yield from name(game)`"))
    max_steps: int | None = Field(None, ge=1, le=10_000, description=(
        "primitive steps one test episode may use; default: the subtask's test limit"))


def write_code_answer(function_name: str, building_block: bool = False) -> type[WriteCode]:
    """`WriteCode` for a sub-action named `function_name` (the name is in its description). Whether the
    code parses and defines it is the sandbox's to say: its load error goes back to the model as a test
    report, like any other failure of its code. `building_block`: a code sub-action before the last one of
    a coded decomposition, tested only with the last one (nodes.fast), as its description says."""
    doc = (f"Write the coded action `def {function_name}(game):`. It is only loaded now (one that does not load "
           "gets a one-seed test with the error); once the decomposition's last coded sub-action is written, one "
           "test plays its coded sub-actions in order." if building_block else
           f"Write the coded action `def {function_name}(game):` and test it in fresh episodes (one per test seed).")
    return create_model("WriteCode", __base__=WriteCode, __doc__=doc)


class ConfigureRL(BaseModel):
    """Configure the PPO training of the learned sub-action: its extra coded actions, steps and reward."""

    model_config = ConfigDict(extra="forbid")

    coded_actions: list[str] = Field(max_length=16, description=(
        "names of coded actions from the library to append to the policy's action head"))
    total_steps: int = Field(ge=1, description="environment steps of the training (the graph fits it to the budget)")
    reward: Literal["task", "crafter"] = Field(
        "task", description="'task': +1 when the subtask succeeds; 'crafter': the game's achievement reward")


def configure_rl_answer(names: list[str], min_steps: int, max_steps: int) -> type[ConfigureRL]:
    """`ConfigureRL` that accepts only the library's coded action names and a step count the budget allows."""
    choice: Any = Literal[tuple(names)] if names else str  # type: ignore[valid-type]
    return create_model(
        "ConfigureRL", __base__=ConfigureRL, __doc__=ConfigureRL.__doc__,
        coded_actions=(list[choice], Field(default_factory=list, max_length=16 if names else 0, description=(
            "names of coded actions from the library to append to the policy's action head"
            if names else "the library has no coded action yet: leave this empty"))),
        # the graph fits the count into [min_steps, max_steps] (nodes.fast), as it fits every spend to the budget
        total_steps=(int, Field(ge=1, description=(
            f"environment steps of the training, {min_steps} to {max(min_steps, max_steps)}"))))


class TrainPolicy(BaseModel):
    """Train the policy with the configuration that configure_rl validated."""

    model_config = ConfigDict(extra="forbid")
