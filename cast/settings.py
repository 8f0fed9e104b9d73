"""A stage's settings, declared once: the typed parameters of its ``__init__``, their limits, their docs.

A stage states each setting as a keyword parameter of its constructor, its limits in the annotation and its
meaning in the class docstring's ``Args:``::

    def __init__(self, gamma: Annotated[float, Range(0, 1)] = 0.25, batch_size: Annotated[int, Runtime()] = 32):

From that declaration come: validation with one message style (:func:`check_value`, for a config section before
anything is built and for every construction), the frozen values a built stage records
(``Stage.setting_values``), its ``describe()``, what a resumed run compares (everything but :class:`Runtime`
settings), the explorer's controls and ``cast stages``.
"""

from __future__ import annotations

import functools
import inspect
import math
import re
import sys
import types
import typing
from dataclasses import dataclass
from typing import Any

from cast.errors import ConfigError

REQUIRED = inspect.Parameter.empty


@dataclass(frozen=True)
class Range:
    """The value lies between ``low`` and ``high`` (inclusive unless ``open_low`` / ``open_high``)."""

    low: float | None = None
    high: float | None = None
    open_low: bool = False
    open_high: bool = False

    def allows(self, value: float) -> bool:
        if self.low is not None and (value <= self.low if self.open_low else value < self.low):
            return False
        return not (self.high is not None and (value >= self.high if self.open_high else value > self.high))

    def __str__(self) -> str:
        if self.high is None:
            return f"{'above' if self.open_low else 'at least'} {self.low:g}"
        if self.low is None:
            return f"{'below' if self.open_high else 'at most'} {self.high:g}"
        return (
            f"in {'(' if self.open_low else '['}{self.low:g}, {self.high:g}{')' if self.open_high else ']'}"
        )


class OneOf:
    """The value is one of ``choices``."""

    def __init__(self, *choices: str):
        self.choices = choices

    def allows(self, value: Any) -> bool:
        return value in self.choices

    def __str__(self) -> str:
        return "one of " + ", ".join(map(str, self.choices))

    def __repr__(self) -> str:
        return f"OneOf{self.choices!r}"


@dataclass(frozen=True)
class Runtime:
    """The setting changes how a stage runs (speed, memory, downloads), not what it outputs: a run may resume
    under another value."""


@dataclass(frozen=True)
class Setting:
    """One setting of a stage, as its constructor declares it.

    Attributes:
        type: the annotation without its limits, e.g. ``"float"``, ``"int | None"``.
        default: the default value (:data:`REQUIRED`: none).
        limits: the :class:`Range` / :class:`OneOf` the value must meet (``None`` always passes).
        runtime: a :class:`Runtime` setting.
        doc: its line in the class docstring's ``Args:`` ("" where there is none).
    """

    name: str
    type: str
    default: Any
    limits: tuple[Any, ...] = ()
    runtime: bool = False
    doc: str = ""

    @property
    def required(self) -> bool:
        return self.default is REQUIRED


def stage_settings(cls: type) -> dict[str, Setting]:
    """The settings of a stage class: the parameters of its ``__init__``, and of the base classes' where it passes
    ``**settings`` on to them (``resources`` is the pipeline's, not a setting)."""
    return dict(_declared(cls))


@functools.cache
def _declared(cls: type) -> tuple[tuple[str, Setting], ...]:
    # Read once per class: every construction, every resume comparison and every explorer request asks.
    return tuple(_read_declarations(cls).items())


def _read_declarations(cls: type) -> dict[str, Setting]:
    docs = _docs(cls)
    found: dict[str, Setting] = {}
    for klass in cls.__mro__:
        if "__init__" not in klass.__dict__:
            continue
        init = klass.__dict__["__init__"]
        parameters = inspect.signature(init).parameters
        namespace = vars(sys.modules[klass.__module__])
        for name, parameter in parameters.items():
            if name in ("self", "resources") or name in found:
                continue
            if parameter.kind in (parameter.VAR_KEYWORD, parameter.VAR_POSITIONAL):
                continue
            kind, markers = _annotation(parameter.annotation, namespace)
            found[name] = Setting(
                name=name,
                type=kind,
                default=parameter.default,
                limits=tuple(m for m in markers if isinstance(m, (Range, OneOf))),
                runtime=any(isinstance(m, Runtime) for m in markers),
                doc=docs.get(name, ""),
            )
        if klass is object or not any(p.kind is p.VAR_KEYWORD for p in parameters.values()):
            break
    return found


_SIMPLE_TYPES: dict[str, type] = {"int": int, "float": float, "bool": bool, "str": str}


def check_value(stage_kind: str, setting: Setting, value: Any) -> None:
    """A :class:`ConfigError` when ``value`` does not fit ``setting``: ``{kind}.{setting} must be ..., got ...``.

    Types: ``int``, ``float``, ``bool`` and ``str``, each optionally ``| None``, are checked (other annotations are
    left to the stage). An int is a float, but a bool is not an int: ``--set first_stage.k=true`` is a slip. An int
    without a :class:`Range` is a count or a length, so it must not be negative.

    Example:
        >>> check_value("selector", Setting("gamma", "float", 0.25, (Range(0, 1),)), 1.5)
        Traceback (most recent call last):
        cast.errors.ConfigError: selector.gamma must be in [0, 1], got 1.5
    """
    where = f"{stage_kind}.{setting.name}"
    names = [part.strip() for part in setting.type.split("|")]
    optional = "None" in names
    names = [n for n in names if n != "None"]
    if value is None and optional:
        return
    if isinstance(value, float) and not math.isfinite(value):  # NaN passes every comparison with a limit
        raise ConfigError(f"{where} must be a finite number, got {value!r}")
    if len(names) == 1 and names[0] in _SIMPLE_TYPES:
        expected = _SIMPLE_TYPES[names[0]]
        if value is None:
            fits = False
        elif isinstance(value, bool):
            fits = expected is bool
        else:
            fits = isinstance(value, expected) or (expected is float and isinstance(value, int))
        if not fits:
            raise ConfigError(f"{where} must be {names[0]}{' or null' if optional else ''}, got {value!r}")
        limits = setting.limits or ((Range(0),) if expected is int else ())
    else:
        limits = setting.limits
    for limit in limits:
        if isinstance(limit, Range) and not isinstance(value, (int, float)):
            continue
        if not limit.allows(value):
            raise ConfigError(f"{where} must be {limit}, got {value!r}")


def type_text(annotation: Any) -> str:
    """An annotation as a short text: ``float``, ``int | None``."""
    if isinstance(annotation, str):
        return annotation
    if annotation is type(None):
        return "None"
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return " | ".join(type_text(a) for a in typing.get_args(annotation))
    return getattr(annotation, "__name__", str(annotation))


def _annotation(annotation: Any, namespace: dict[str, Any]) -> tuple[str, tuple[Any, ...]]:
    """The type text and the markers of a parameter's annotation (a string under ``from __future__ import
    annotations``; evaluated where it carries markers)."""
    if annotation is inspect.Parameter.empty:
        return "", ()
    if isinstance(annotation, str):
        if not annotation.startswith("Annotated["):
            return annotation, ()
        try:
            annotation = eval(annotation, dict(namespace))  # noqa: S307  (the stage module's own annotation)
        except NameError as e:
            raise TypeError(f"cannot read the annotation {annotation!r}: {e}") from e
    if typing.get_origin(annotation) is typing.Annotated:
        base, *markers = typing.get_args(annotation)
        return type_text(base), tuple(markers)
    return type_text(annotation), ()


_ARG = re.compile(r"(\w+(?:, \w+)*)(?: \([^)]*\))?: (.+)$")  # "name: text", "a, b: text"


def _docs(cls: type) -> dict[str, str]:
    """Each setting's description in the ``Args:`` sections of ``cls``'s docstring and its bases' (a description
    continued on more deeply indented lines is joined into one line)."""
    docs: dict[str, str] = {}
    for klass in cls.__mro__:
        text = klass.__dict__.get("__doc__") or ""
        if "Args:" not in text:
            continue
        indent: int | None = None
        described: dict[str, str] = {}
        names: list[str] = []  # the settings the line at hand describes
        for line in text.split("Args:", 1)[1].splitlines()[1:]:
            if not line.strip():
                continue
            width = len(line) - len(line.lstrip())
            indent = width if indent is None else indent
            if width < indent:
                break  # the next section (Raises:, Example:)
            if width > indent:
                for name in names:
                    described[name] += " " + line.strip()
                continue
            found = _ARG.match(line.strip())
            names = found[1].split(", ") if found else []
            if found:
                described.update(dict.fromkeys(names, found[2].strip()))
        for name, doc in described.items():
            docs.setdefault(name, doc)
    return docs
