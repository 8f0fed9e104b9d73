"""Pipeline configs: YAML files under ``configs/``, with command-line overrides.

A config is chosen by path or by name (``offline`` means ``configs/offline.yaml``). Any value can be overridden
with ``--set dotted.key=value``; the value is read as YAML (``--set first_stage.mu=1500``,
``--set reranker.name=none``). A config may start from another with ``base: NAME``.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cast.errors import ConfigError, DataFormatError

_PACKAGE = Path(__file__).resolve().parent
# The profiles: a checkout's configs/ (the folder users edit; also what an editable install reads), else the copy
# that setup.py ships inside the installed package (cast/configs/).
CONFIG_DIR = (
    _PACKAGE.parent / "configs" if (_PACKAGE.parent / "pyproject.toml").is_file() else _PACKAGE / "configs"
)
DEFAULT_CONFIG = "offline"
# Top-level keys besides the stage sections (cast.registry.STAGES).
SETTINGS = ("index", "stemmer", "cache_dir", "device", "tag", "base", "history_responses", "encoder")
# What each of them must be (or null): a number or a list where a path is expected fails later, and obscurely.
_SETTING_TYPES: dict[str, type] = {key: str for key in SETTINGS} | {"encoder": dict}


def config_path(name_or_path: str | Path, referrer: Path | None = None) -> Path:
    """The file for a config name (``offline``) or path (``configs/offline.yaml``).

    Args:
        referrer: the config whose ``base:`` names this one: a relative path is then read from its folder,
            and an error names it.
    """
    candidate = Path(name_or_path).expanduser()
    if referrer is not None and not candidate.is_absolute():
        candidate = referrer.parent / candidate
    if candidate.is_file():
        return candidate
    named = CONFIG_DIR / f"{name_or_path}.yaml"
    if named.is_file():
        return named
    known = ", ".join(sorted(p.stem for p in CONFIG_DIR.glob("*.yaml")))
    where = f"{referrer}: base: " if referrer is not None else ""
    raise ConfigError(f"{where}no config {str(name_or_path)!r}: give a YAML file or one of: {known}")


def _read_yaml(path: Path) -> dict[str, Any]:
    from cast.textfiles import read_yaml

    try:
        data = read_yaml(path)
    except DataFormatError as e:
        raise ConfigError(str(e)) from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a config must be a YAML mapping")
    check_top_level_keys(data, str(path))
    return data


def check_top_level_keys(config: dict[str, Any], source: str) -> None:
    """A :class:`ConfigError` for a key that is neither a setting nor a stage section (a typo, or a stale key)."""
    from cast.registry import STAGES

    known = (*SETTINGS, *STAGES)
    unknown = sorted(str(key) for key in set(config) - set(known))  # YAML keys need not be strings
    if unknown:
        raise ConfigError(
            f"{source}: unknown top-level key(s) {', '.join(unknown)}; known: {', '.join(known)}"
        )
    for key, value in config.items():
        expected = dict if key in STAGES else _SETTING_TYPES[key]
        if value is not None and not isinstance(value, expected):
            what = "a mapping" if expected is dict else "a string (quote it: '...')"
            raise ConfigError(f"{source}: {key} must be {what}, got {value!r}")


def merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """Deep-merge ``override`` into a copy of ``base`` (a stage section whose ``name`` changes is replaced)."""
    merged = copy.deepcopy(base)
    for key, value in override.items():
        old = merged.get(key)
        if (
            isinstance(old, dict)
            and isinstance(value, dict)
            and value.get("name", old.get("name")) == old.get("name")
        ):
            merged[key] = merge(old, value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def parse_override(assignment: str) -> tuple[list[str], Any]:
    """``"a.b=1"`` -> ``(["a", "b"], 1)``; the value is parsed as YAML."""
    from cast.textfiles import parse_yaml

    key, sep, raw = assignment.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"--set expects KEY=VALUE (e.g. first_stage.mu=1500), got {assignment!r}")
    try:
        value = parse_yaml(raw, "--set") if raw.strip() else ""
    except DataFormatError as e:
        raise ConfigError(f"--set {assignment!r}: the value is {e.problem}") from None
    keys = key.strip().split(".")
    if len(keys) == 1 and _SETTING_TYPES.get(keys[0]) is str and isinstance(value, int | float | bool):
        # A path or tag that YAML reads as a number or a boolean (--index 2024, --set tag=yes).
        value = raw.strip()
    return keys, value


def apply_override(config: dict[str, Any], keys: list[str], value: Any) -> None:
    node = config
    for key in keys[:-1]:
        child = node.setdefault(key, {})
        if not isinstance(child, dict):
            raise ConfigError(f"--set {'.'.join(keys)}: {key!r} is a value, not a section")
        node = child
    if keys[-1] == "name" and node.get("name") not in (None, value):
        # A different stage: its settings do not carry over.
        node.clear()
    node[keys[-1]] = value


def load_config(name_or_path: str | Path = DEFAULT_CONFIG, overrides: Sequence[str] = ()) -> dict[str, Any]:
    """Read a config, resolve its ``base`` chain, and apply ``--set`` overrides.

    The result has ``tag`` (the run tag: the config's file name unless set).
    """
    path = config_path(name_or_path)
    config = _read_yaml(path)
    seen = {path.resolve()}
    referrer = path
    while "base" in config:
        base = config.pop("base")
        if not isinstance(base, str):  # also null: a key without a value
            raise ConfigError(f"{referrer}: base must be a config name or path, got {base!r}")
        base_path = config_path(base, referrer)
        if base_path.resolve() in seen:
            raise ConfigError(f"{referrer}: config 'base' chain loops at {base_path}")
        seen.add(base_path.resolve())
        config = merge(_read_yaml(base_path), config)
        referrer = base_path
    config.setdefault("tag", path.stem)
    parsed = [(assignment, *parse_override(assignment)) for assignment in overrides]
    # A section's stage first: choosing another stage resets its section, which must not drop the settings given
    # for it beside (--set linker.entities_dir=X --set linker.name=dictionary).
    parsed.sort(key=lambda item: item[1][1:] != ["name"])
    for assignment, keys, value in parsed:
        if keys[0] == "base":
            raise ConfigError(f"--set {assignment}: base is read with the config file; give --config instead")
        check_top_level_keys({keys[0]: value} if len(keys) == 1 else {keys[0]: {}}, f"--set {assignment}")
        apply_override(config, keys, value)
    return config
