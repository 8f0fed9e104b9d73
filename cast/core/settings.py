"""Settings, declared once as fields of pydantic models: each stage's (its nested ``Settings`` class), the config's
``encoder`` section and the config's top-level keys (:class:`cast.core.config_keys.ConfigKeys`).

A field states its type, its limits and its meaning::

    class Settings(SelectorSettings):
        gamma: Annotated[float, Field(ge=0, le=1, description="the query entities' weight in MapE (eq. 7)")] = 0.25
        batch_size: Annotated[int, Field(ge=1, description="turns scored together"), Runtime()] = 32

``Literal[...]`` gives a choice of values, :class:`Runtime` marks a setting that changes how a stage runs (speed,
memory, downloads), not what it outputs. A subclass changes a default by declaring the field again with the same
type (the module's ``Annotated`` alias) and the new default; every other field it inherits.

From the declaration come: validation through pydantic, with one message style (``selector.gamma must be in
[0, 1], got 1.5``) for a config section before anything is built and for every construction
(:meth:`Settings.of`); the values a built stage holds and ``describe()``s (``Stage.setting_values``, exactly as
given: an int stays an int); what a resumed run compares (every setting but the :class:`Runtime` ones); the
explorer's controls; and ``cast stages``.
"""

from __future__ import annotations

import functools
import math
import types
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal, Self

import annotated_types
from pydantic import (
    BaseModel,
    ConfigDict,
    Strict,
    TypeAdapter,
    ValidationError,
    ValidatorFunctionWrapHandler,
    model_validator,
)
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from cast.errors import ConfigError

# The default of a setting that has none: it must be given.
REQUIRED = PydanticUndefined

_SCALARS = (int, float, bool, str, type(None))


@dataclass(frozen=True)
class Runtime:
    """The setting changes how a stage runs (speed, memory, downloads), not what it outputs: a run may resume
    under another value."""


@dataclass(frozen=True)
class Setting:
    """One declared setting.

    Attributes:
        annotation: its type (``float``, ``int | None``, ``Literal["sum", "mean"]``).
        default: its default (:data:`REQUIRED`: none).
        field: its limits and description (pydantic's ``Field``), if declared.
        runtime: a :class:`Runtime` setting.
    """

    name: str
    annotation: Any
    default: Any = REQUIRED
    field: FieldInfo | None = None
    runtime: bool = False

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    @property
    def doc(self) -> str:
        """Its meaning (the field's ``description``)."""
        return (self.field.description if self.field is not None else None) or ""

    @property
    def type(self) -> str:
        """The type as a short text: ``float``, ``int | None``; a choice of values is its values' type."""
        return _type_text(self.annotation)

    @property
    def bounds(self) -> tuple[float | None, float | None, bool, bool]:
        """``(low, high, open_low, open_high)`` of a number as declared (``None``: no bound)."""
        return _bounds(self._declared_limits)

    @property
    def choices(self) -> tuple[Any, ...]:
        """The values a choice allows (``Literal[...]``), else ``()``."""
        return tuple(
            value
            for member in _union_members(self.annotation)
            if typing.get_origin(member) is Literal
            for value in typing.get_args(member)
        )

    @property
    def limits(self) -> str:
        """What the value must be besides its type, as declared: ``in [0, 1]``, ``one of sum, mean``, or ``""``."""
        return self._limits_text(self._declared_limits)

    @property
    def _declared_limits(self) -> list[Any]:
        return [
            m
            for m in (self.field.metadata if self.field is not None else ())
            if not isinstance(m, Runtime | Strict) and m is not _COUNT
        ]

    @property
    def _checked_limits(self) -> list[Any]:
        """The limits a value is checked against: the declared ones and the implied ones (:func:`_implied`)."""
        declared = self._declared_limits
        return [*declared, *(m for m in _implied(self.annotation, declared) if m is _COUNT)]

    def _limits_text(self, limits: list[Any]) -> str:
        if self.choices:
            return "one of " + ", ".join(map(str, self.choices))
        low, high, open_low, open_high = _bounds(limits)
        if low is not None and high is not None:
            return f"in {'(' if open_low else '['}{_bound(low)}, {_bound(high)}{')' if open_high else ']'}"
        if low is not None:
            return f"{'above' if open_low else 'at least'} {_bound(low)}"
        if high is not None:
            return f"{'below' if open_high else 'at most'} {_bound(high)}"
        return ""

    @functools.cached_property
    def _adapter(self) -> TypeAdapter[Any]:
        limits = [*self._declared_limits, *_implied(self.annotation, self._declared_limits)]
        annotation: Any = Annotated[self.annotation, *limits] if limits else self.annotation
        return TypeAdapter(annotation, config=ConfigDict(allow_inf_nan=False))


def check_value(where: str, setting: Setting, value: Any) -> None:
    """A :class:`ConfigError` when ``value`` does not fit ``setting``: ``{where}.{setting} must be ..., got ...``.

    A number may be an int or a float where a float is declared, but a bool is not a number
    (``--set first_stage.k=true`` is a slip); NaN and infinities are no settings.

    Example:
        >>> from pydantic import Field
        >>> check_value("selector", Setting("gamma", float, 0.25, Field(ge=0, le=1)), 1.5)
        Traceback (most recent call last):
        cast.errors.ConfigError: selector.gamma must be in [0, 1], got 1.5
    """
    try:
        setting._adapter.validate_python(value)
    except ValidationError as e:
        raise ConfigError(_refusal(where, setting, value, e.errors())) from None


class Settings(BaseModel):
    """A group of settings (a stage's, the ``encoder`` section's): each a field with its type, limits and
    description. An instance holds the values as they were given, checked, read-only (also as a mapping:
    ``settings["gamma"]``, ``dict(settings)``).

    pydantic checks them, with the declarations' rules and two more of the project's (:func:`_implied`): a
    number, a flag or a text is never read from another type (``"1.5"`` is no float, ``1`` no bool), and an int
    declared without limits is a count (at least 0)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    # How messages name the group: ``selector`` (``selector.gamma must be ...``), ``encoder``...
    section: ClassVar[str] = "settings"

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        for info in cls.model_fields.values():
            declared = [m for m in info.metadata if not isinstance(m, Runtime | Strict) and m is not _COUNT]
            info.metadata.extend(m for m in _implied(info.annotation, declared) if not _has(info.metadata, m))
        cls.model_rebuild(force=True)

    @model_validator(mode="wrap")
    @classmethod
    def _checked_together(cls, values: Any, handler: ValidatorFunctionWrapHandler) -> Self:
        settings = handler(values)
        if isinstance(values, Mapping):
            cls.check_together(values)
        return typing.cast(Self, settings)

    @classmethod
    def declared(cls) -> dict[str, Setting]:
        """Every setting of the group, in declaration order."""
        return dict(_declared(cls))

    @classmethod
    def of(cls, values: Mapping[str, Any], *, section: str | None = None, where: str | None = None) -> Self:
        """The settings ``values`` give (the others at their defaults), checked. ``section`` names a value in
        messages (``selector`` in ``selector.gamma must be ...``; by default :attr:`section`), ``where`` the group
        (``selector eg``; by default the section).

        Raises:
            ConfigError: an unknown setting (naming the allowed ones), a missing required one, or a value that
                does not fit its declaration, in one line.
        """
        settings = cls(**values, _names=(section, where))
        # pydantic makes a float of an int given for a float; a config's values are kept as written (a stage
        # records them so).
        settings.__dict__.update(values)
        return settings

    @classmethod
    def check(cls, key: str, value: Any, section: str | None = None) -> None:
        """A :class:`ConfigError` when ``value`` does not fit the setting ``key`` (one the group declares)."""
        check_value(section or cls.section, cls.declared()[key], value)

    @classmethod
    def check_together(cls, values: Mapping[str, Any]) -> None:
        """Checks that involve several settings (each already fits its own declaration; see :meth:`resolved`);
        none by default."""

    @classmethod
    def resolved(cls, values: Mapping[str, Any]) -> dict[str, Any]:
        """Every setting's value: the given ones, the defaults for the others."""
        return {name: values.get(name, setting.default) for name, setting in cls.declared().items()}

    @classmethod
    def _refusal(
        cls, values: Mapping[str, Any], error: ValidationError, section: str | None, where: str | None
    ) -> ConfigError:
        """pydantic's refusal as one line: the unknown settings, else the missing ones, else the first given value
        that does not fit, worded as :meth:`check` words it."""
        section = section or cls.section
        errors = error.errors()
        unknown = sorted(str(e["loc"][0]) for e in errors if e["type"] == "extra_forbidden")
        if unknown:
            return ConfigError(
                f"{where or section}: unknown setting(s) {', '.join(unknown)}; "
                f"allowed: {', '.join(sorted(cls.declared())) or 'none'}"
            )
        missing = [str(e["loc"][0]) for e in errors if e["type"] == "missing"]
        if missing:
            return ConfigError(f"{where or section}: give {', '.join(missing)}")
        order = list(values)
        name = min((str(e["loc"][0]) for e in errors), key=order.index)
        try:
            cls.check(name, values[name], section)
        except ConfigError as refusal:
            return refusal
        # A check overridden to let the value pass (none does): pydantic's own words.
        return ConfigError(f"{section}.{name}: {errors[0]['msg']}")

    def __init__(
        self, *args: Any, _names: tuple[str | None, str | None] = (None, None), **values: Any
    ) -> None:
        """Settings from values (positional ones in declaration order), checked; ``_names``: the section and
        group that messages name (:meth:`of`)."""
        values = {**dict(zip(type(self).declared(), args, strict=False)), **values}
        try:
            super().__init__(**values)
        except ValidationError as e:
            raise type(self)._refusal(values, e, *_names) from None

    def __getitem__(self, name: str) -> Any:
        return getattr(self, name)

    def __iter__(self) -> Iterator[tuple[str, Any]]:  # type: ignore[override]
        return ((name, getattr(self, name)) for name in type(self).declared())

    def keys(self) -> list[str]:
        return list(type(self).declared())


@functools.cache
def _declared(cls: type[BaseModel]) -> tuple[tuple[str, Setting], ...]:
    # Read once per class: every construction, every resume comparison and every explorer request asks. A
    # group's own settings come first, then those it inherits (the order in which stages record them).
    order: dict[str, None] = {}
    for klass in cls.__mro__:
        order.update(
            dict.fromkeys(n for n in klass.__dict__.get("__annotations__", {}) if n in cls.model_fields)
        )
    return tuple(
        (
            name,
            Setting(
                name=name,
                annotation=info.annotation,
                default=info.default,
                field=info,
                runtime=any(isinstance(m, Runtime) for m in info.metadata),
            ),
        )
        for name, info in ((name, cls.model_fields[name]) for name in order)
    )


def _bound(value: float) -> str:
    """A bound as a message shows it: a whole number in full (``2147483647``, not ``2.14748e+09``)."""
    return str(int(value)) if value.is_integer() else f"{value:g}"


def _bounds(limits: list[Any]) -> tuple[float | None, float | None, bool, bool]:
    low: float | None = None
    high: float | None = None
    open_low = open_high = False
    for limit in limits:
        if isinstance(limit, annotated_types.Ge):
            low, open_low = float(limit.ge), False  # type: ignore[arg-type]
        elif isinstance(limit, annotated_types.Gt):
            low, open_low = float(limit.gt), True  # type: ignore[arg-type]
        elif isinstance(limit, annotated_types.Le):
            high, open_high = float(limit.le), False  # type: ignore[arg-type]
        elif isinstance(limit, annotated_types.Lt):
            high, open_high = float(limit.lt), True  # type: ignore[arg-type]
    return low, high, open_low, open_high


def _union_members(annotation: Any) -> tuple[Any, ...]:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return typing.get_args(annotation)
    return (annotation,)


def _members(annotation: Any) -> set[Any]:
    """The types a value may have: ``int | None`` -> {int, NoneType}; a choice -> its values' types."""
    found: set[Any] = set()
    for member in _union_members(annotation):
        if typing.get_origin(member) is Literal:
            found.update(type(value) for value in typing.get_args(member))
        else:
            found.add(member)
    return found


def _type_text(annotation: Any) -> str:
    names: list[str] = []
    for member in _union_members(annotation):
        if typing.get_origin(member) is Literal:
            names.extend(dict.fromkeys(type(value).__name__ for value in typing.get_args(member)))
        elif member is type(None):
            names.append("None")
        else:
            names.append(getattr(member, "__name__", str(member)))
    return " | ".join(dict.fromkeys(names))


# The limit every int declared without any has: it counts or measures something.
_COUNT = annotated_types.Ge(0)


def _implied(annotation: Any, declared: list[Any]) -> list[Any]:
    """The project's rules beyond a setting's declaration: a value of scalar types only (numbers, flags, texts)
    is read strictly (``"1.5"`` is no float, ``1`` no bool; other types are left to pydantic's own rules), and
    an int declared without limits is at least 0."""
    members = _members(annotation)
    # A choice of values (``Literal``) takes exactly its values already.
    strict = members <= set(_SCALARS) and typing.get_origin(annotation) is not Literal
    implied: list[Any] = [Strict()] if strict else []
    if members - {type(None)} == {int} and _bounds(declared) == (None, None, False, False):
        implied.append(_COUNT)
    return implied


def _has(metadata: list[Any], rule: Any) -> bool:
    return (
        any(m is rule for m in metadata)
        if rule is _COUNT
        else any(isinstance(m, type(rule)) for m in metadata)
    )


def _refusal(where: str, setting: Setting, value: Any, errors: list[Any]) -> str:
    """``{where}.{setting} must be ..., got ...`` for a value pydantic refused with ``errors``: its limits where
    the value was of the right type, else its type; a finite number where it was NaN or infinite (NaN passes
    every comparison with a limit)."""
    name = f"{where}.{setting.name}" if where else setting.name
    if isinstance(value, float) and not math.isfinite(value):
        return f"{name} must be a finite number, got {value!r}"
    kinds = {detail["type"] for detail in errors}
    limits = setting._limits_text(setting._checked_limits)
    if limits and kinds & {
        "greater_than",
        "greater_than_equal",
        "less_than",
        "less_than_equal",
        "literal_error",
    }:
        expected = limits
    else:
        names = [n for n in setting.type.split(" | ") if n != "None"]
        expected = " | ".join(names) + (" or null" if type(None) in _members(setting.annotation) else "")
    return f"{name} must be {expected}, got {value!r}"


class StageSettings(Settings):
    """Base of every stage's settings (a stage with none declares none: ``raw``, ``none``)."""
