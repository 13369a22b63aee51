"""Published numbers the report shows beside ours, each with where it comes from.

None of these are our runs: the RL-GPT rows were measured in MineDojo (Minecraft), and the Crafter
rows are the published Crafter baselines at their own budgets (see /work/shared/MISSION.md).
"""
from __future__ import annotations

from dataclasses import dataclass

MINEDOJO = "published, MineDojo (Minecraft); not our run"
CRAFTER = "published, Crafter benchmark; not our run"
RLGPT_PAPER = "Liu et al. 2024 (RL-GPT), arXiv 2402.19299"


@dataclass(frozen=True)
class Published:
    method: str
    value: float | None        # success rate in [0, 1], or a Crafter score in percent
    samples: str               # budget as published ("3M", "100M", "-" when not stated)
    source: str                # the paper the number is from
    label: str                 # MINEDOJO or CRAFTER: marks the row as published, not ours
    note: str = ""


# Table 1 of the paper: ObtainDiamond in MineDojo.
DIAMOND: tuple[Published, ...] = (
    Published("DreamerV3", 0.02, "100M", RLGPT_PAPER + ", Table 1", MINEDOJO),
    Published("VPT", 0.20, "16.8B", RLGPT_PAPER + ", Table 1", MINEDOJO),
    Published("DEPS-Oracle", 0.60, "-", RLGPT_PAPER + ", Table 1", MINEDOJO, "hand-written sub-policies"),
    Published("Plan4MC", 0.00, "7M", RLGPT_PAPER + ", Table 1", MINEDOJO),
    Published("RL-GPT", 0.08, "3M", RLGPT_PAPER + ", Table 1", MINEDOJO),
)

# Table 2 of the paper: RL-GPT's success on MineDojo tasks, keyed by our Crafter task where one
# corresponds (a crafting table is placed in Crafter, so "crafting table" maps to place_table).
TECH_TREE_RLGPT: dict[str, Published] = {
    "place_table": Published("RL-GPT (crafting table)", 0.65, "-", RLGPT_PAPER + ", Table 2", MINEDOJO),
    "make_wood_pickaxe": Published("RL-GPT (wooden pickaxe)", 0.67, "-", RLGPT_PAPER + ", Table 2", MINEDOJO),
    "collect_stone": Published("RL-GPT (stone)", 0.67, "-", RLGPT_PAPER + ", Table 2", MINEDOJO),
    "make_stone_pickaxe": Published("RL-GPT (stone pickaxe)", 0.64, "-", RLGPT_PAPER + ", Table 2", MINEDOJO),
    "place_furnace": Published("RL-GPT (furnace)", 0.56, "-", RLGPT_PAPER + ", Table 2", MINEDOJO),
}

# The paper's harvest-log figure: only its end points are quoted in our mission.
HARVEST_LOG_ITERATIONS: tuple[tuple[int, float], ...] = ((0, 0.00), (3, 0.58))
HARVEST_LOG_SOURCE = RLGPT_PAPER + ", harvest-log iterations figure"

# Crafter scores (percent) of published agents at the benchmark's standard budget (1M steps).
CRAFTER_SCORES: tuple[Published, ...] = (
    Published("Human experts", 50.5, "-", "Hafner 2021 (Crafter)", CRAFTER),
    Published("SPRING (GPT-4 reads the paper)", 27.3, "-", "Wu et al. 2023 (SPRING)", CRAFTER),
    Published("Achievement Distillation", 21.8, "1M", "Moon et al. 2023", CRAFTER),
    Published("PPO (tuned, ResNet)", 15.6, "1M", "Moon et al. 2023", CRAFTER),
    Published("DreamerV3", 14.5, "1M", "Hafner et al. 2023 (DreamerV3)", CRAFTER),
    Published("DreamerV2", 10.0, "1M", "Hafner 2021 (Crafter)", CRAFTER),
    # The benchmark paper's own PPO baseline: the untuned counterpart of our pure-RL row.
    Published("PPO (the benchmark paper's baseline)", 4.6, "1M", "Hafner 2021 (Crafter)", CRAFTER),
    Published("Random", 1.6, "-", "Hafner 2021 (Crafter)", CRAFTER),
)

# Published per-achievement figures that MISSION.md quotes (percent of episodes).
CRAFTER_ACHIEVEMENTS: dict[str, dict[str, float]] = {
    "Human experts": {"collect_diamond": 12.0, "make_iron_pickaxe": 26.0},
    "Random": {"collect_diamond": 0.0, "make_iron_pickaxe": 0.0},
    "DreamerV3": {"make_iron_pickaxe": 0.0},
}
