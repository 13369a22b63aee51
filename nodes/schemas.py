"""The answers the agents give, as pydantic models.

Planner -> `Plan`, slow agent -> `Decomposition`, critic -> `Critique`. A language model fills
them through structured output; the rule-based expert builds them directly. String fields are
length-bounded so that a small model cannot ramble past what a node can use, and every field has a
description because that is what a model reads in the JSON schema.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from envs.tasks import get_task

Kind = Literal["code", "rl"]
Verdict = Literal["pass", "revise", "move", "fail"]
TemplateKind = Literal["collect", "place", "make", "explore", "custom"]

NAME_RE = r"^[a-z][a-z0-9_]{0,47}$"


class Subtask(BaseModel):
    """One step of the plan: a Crafter task whose achievement must be unlocked."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(max_length=48, description="Crafter task name, e.g. 'collect_wood', 'place_table'")
    goal: str = Field(max_length=200, description="what this step achieves, in a few words")
    success_condition: str = Field(
        max_length=200, description="how success is measured, e.g. \"achievement 'collect_wood' unlocked\"")

    @field_validator("name")
    @classmethod
    def _known(cls, value: str) -> str:
        return get_task(value).name  # UnknownTaskError (a ValueError) lists close matches


class Plan(BaseModel):
    """Subtasks in tech-tree order; the last one is the task itself."""

    model_config = ConfigDict(extra="forbid")

    subtasks: list[Subtask] = Field(max_length=20, description="ordered subtasks, prerequisites first")
    reason: str = Field("", max_length=400, description="why this order")


class SubAction(BaseModel):
    """One piece of a subtask's solution, either coded or learned with RL."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=NAME_RE, description="snake_case name; for code, the function name")
    kind: Kind = Field(description="'code' (a program over the game API) or 'rl' (learned with PPO)")
    reason: str = Field(max_length=300, description="why code or RL for this sub-action")
    template: TemplateKind = Field(
        "custom", description="which few-shot example the code starts from: collect, place, make, explore")
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
    sub_actions: list[SubAction] = Field(min_length=1, max_length=8,
                                         description="sub-actions in order; the last one achieves the subtask")
    reason: str = Field("", max_length=400, description="what changed from the previous decomposition and why")

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
    verdict: Verdict = Field(description="pass: good enough; revise: fix code/config (inner loop); "
                                         "move: change code<->rl (outer loop); fail: give up on it")
    success_rate: float = Field(ge=0.0, le=1.0, description="measured success rate of this attempt")
    feedback: str = Field(max_length=600, description="what went wrong and what to change, concretely")
    move_to: Kind | None = Field(None, description="with verdict 'move': the kind to move the sub-action to")

    @model_validator(mode="after")
    def _move_needs_kind(self) -> Critique:
        if self.verdict == "move" and self.move_to is None:
            raise ValueError("verdict 'move' needs move_to ('code' or 'rl')")
        if self.verdict != "move" and self.move_to is not None:
            raise ValueError("move_to is only allowed with verdict 'move'")
        return self
