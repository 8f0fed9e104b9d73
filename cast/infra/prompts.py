"""Prompt templates for the chat-model stages: text files under ``configs/prompts/``, recorded by name and hash.

A template is a sequence of chat messages, each opened by a line ``=== system ===``, ``=== user ===`` or
``=== assistant ===`` (few-shot examples are user/assistant pairs); text before the first such line is a comment
(where the examples come from) and is not sent. ``{{name}}`` marks where a stage puts a value; each stage names
the values it fills, and a template that asks for another, or lacks one the stage needs, is refused when the
stage is built. A stage's ``describe()`` records the template's name and the sha256 of its file, so that an edited
template cannot pass for the one a run used.

Example:
    >>> template = PromptTemplate.parse("t", "=== user ===\\nRewrite: {{question}}", {"question"})
    >>> template.render(question="Is it far?")
    [{'role': 'user', 'content': 'Rewrite: Is it far?'}]
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Set
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from pydantic import Field

from cast.core.config import CONFIG_DIR
from cast.errors import ConfigError, DataFormatError
from cast.formats.textfiles import decode_text

PROMPT_DIR = CONFIG_DIR / "prompts"
# The setting that names a chat stage's template (each stage gives its own default).
PromptName = Annotated[
    str,
    Field(
        description="the prompt template: a name under ``configs/prompts/`` or a file (recorded with its sha256)."
    ),
]
ROLES = ("system", "user", "assistant")
_MARK = re.compile(r"^=== (\w+) ===[ \t]*$", re.MULTILINE)
_PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")


@dataclass(frozen=True)
class PromptTemplate:
    """A chat prompt with ``{{name}}`` placeholders.

    Attributes:
        name: the template's name (its file name without ``.txt``, or the path given).
        sha256: the hash of its file's bytes.
        messages: ``(role, text)`` pairs in order.
    """

    name: str
    sha256: str
    messages: tuple[tuple[str, str], ...]

    @classmethod
    def load(cls, name_or_path: str, needed: Set[str], optional: Set[str] = frozenset()) -> PromptTemplate:
        """The template ``name_or_path``: a name under ``configs/prompts/`` (``rewrite``) or a file path.

        Args:
            needed: the placeholders the template must use.
            optional: the placeholders it may use besides.

        Raises:
            ConfigError: no such template, or one whose placeholders or messages do not fit.
        """
        path = prompt_path(name_or_path)
        data = path.read_bytes()
        try:
            text = decode_text(data, path)
        except DataFormatError as e:
            raise ConfigError(f"prompt template {e}") from None
        return cls.parse(
            name_or_path, text, needed, optional, sha256=hashlib.sha256(data).hexdigest(), where=path
        )

    @classmethod
    def parse(
        cls,
        name: str,
        text: str,
        needed: Set[str],
        optional: Set[str] = frozenset(),
        *,
        sha256: str | None = None,
        where: str | Path | None = None,
    ) -> PromptTemplate:
        """A template from its text (see the module docstring)."""
        where = where or name
        marks = list(_MARK.finditer(text))
        if not marks:
            raise ConfigError(
                f"prompt template {where}: no message; open each with a line '=== user ===' (or system)"
            )
        messages = []
        for mark, following in zip(marks, [*marks[1:], None], strict=True):
            role = mark[1]
            if role not in ROLES:
                raise ConfigError(f"prompt template {where}: unknown role {role!r}; use {', '.join(ROLES)}")
            body = text[mark.end() : following.start() if following else len(text)].strip("\n")
            messages.append((role, body))
        if messages[-1][0] != "user":
            raise ConfigError(f"prompt template {where}: the last message must be the user's")
        used = {found for _, body in messages for found in _PLACEHOLDER.findall(body)}
        unknown, missing = used - set(needed) - set(optional), set(needed) - used
        if unknown or missing:
            problems = [f"unknown {{{{{n}}}}}" for n in sorted(unknown)] + [
                f"no {{{{{n}}}}}" for n in sorted(missing)
            ]
            raise ConfigError(
                f"prompt template {where}: {', '.join(problems)}; it may use "
                f"{', '.join('{{' + n + '}}' for n in sorted({*needed, *optional}))}"
            )
        digest = sha256 or hashlib.sha256(text.encode("utf-8")).hexdigest()
        return cls(name=name, sha256=digest, messages=tuple(messages))

    def render(self, **values: str) -> list[dict[str, str]]:
        """The chat messages with every placeholder replaced (a value is put in as it is, never re-read)."""
        return [
            {"role": role, "content": _PLACEHOLDER.sub(lambda m: values.get(m[1], m[0]), body)}
            for role, body in self.messages
        ]


def prompt_path(name_or_path: str) -> Path:
    """The file of a template: an existing path, else ``configs/prompts/NAME.txt``."""
    candidate = Path(name_or_path).expanduser()
    if candidate.is_file():
        return candidate
    named = PROMPT_DIR / f"{name_or_path}.txt"
    if named.is_file():
        return named
    known = ", ".join(sorted(p.stem for p in PROMPT_DIR.glob("*.txt"))) or "none"
    raise ConfigError(f"no prompt template {name_or_path!r}: give a file or one of: {known}")
