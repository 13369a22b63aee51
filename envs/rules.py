"""Crafter's recipe facts (what making, placing and collecting need), as a player reads them in the manual.

They are a snapshot of the `make`, `place` and `collect` sections of Crafter's own data.yaml, kept in
`crafter_rules.json` so that the sandbox's game API can read them without importing the simulator
(importing `crafter` costs about half a second). The trusted side reads the installed Crafter through
`rules_from_crafter` (nodes.recipes, whose plans follow the game's own key order; the snapshot's keys are
sorted). `tests/test_recipe_sources.py` checks the snapshot against the installed Crafter;
`python -m envs.rules` rewrites it from there.
"""

from __future__ import annotations

import json
from pathlib import Path

RULES_FILE = Path(__file__).with_name("crafter_rules.json")

_RULES = json.loads(RULES_FILE.read_text())
MAKE: dict[str, dict] = _RULES["make"]
PLACE: dict[str, dict] = _RULES["place"]
COLLECT: dict[str, dict] = _RULES["collect"]


def rules_from_crafter() -> dict[str, dict]:
    """The `collect`, `make` and `place` sections of the installed Crafter's data, in its own order."""
    import crafter.constants  # the simulator: imported when called, never by the sandbox's game API

    return {"collect": crafter.constants.collect, "make": crafter.constants.make, "place": crafter.constants.place}


if __name__ == "__main__":
    RULES_FILE.write_text(json.dumps(rules_from_crafter(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {RULES_FILE}")
