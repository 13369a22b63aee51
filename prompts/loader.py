"""Loads the prompt texts kept beside the agents (prompts/*.md) and fills their placeholders.

Placeholders use `string.Template` syntax: `$name` or `${name}`, and `$$` for a literal dollar sign.
Every placeholder of a text must be given a value: a missing one raises `PromptTemplateError` naming
the file and each missing name, so a renamed placeholder fails loudly instead of reaching a model as
"$name". Values a text does not use are ignored, so one set of values can serve several texts.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from string import Template

PROMPTS_DIR = Path(__file__).parent


class PromptTemplateError(ValueError):
    """A prompt text that cannot be filled: unknown file, missing values or a malformed placeholder."""


@cache
def template(name: str) -> Template:
    """The text prompts/<name>.md as a template, read once."""
    path = PROMPTS_DIR / f"{name}.md"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in PROMPTS_DIR.glob("*.md")))
        raise PromptTemplateError(f"no prompt text prompts/{name}.md; texts: {known}")
    text = Template(path.read_text())
    if not text.is_valid():
        raise PromptTemplateError(f"prompts/{name}.md has a malformed placeholder (write $$ for a dollar sign)")
    return text


def placeholders(name: str) -> list[str]:
    """The placeholder names prompts/<name>.md uses, in order of first use."""
    return template(name).get_identifiers()


def render(name: str, /, **values: object) -> str:
    """prompts/<name>.md with every placeholder replaced by str(value)."""
    missing = [key for key in placeholders(name) if key not in values]
    if missing:
        raise PromptTemplateError(
            f"prompts/{name}.md needs a value for {', '.join('$' + k for k in missing)}")
    return template(name).substitute({key: str(value) for key, value in values.items()}).strip() + "\n"
