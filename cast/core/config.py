"""Pipeline configs: YAML files under ``configs/``, with command-line overrides.

A config is chosen by path or by name (``offline`` means ``configs/offline.yaml``). Any value can be overridden
with ``--set dotted.key=value``; the value is read as YAML (``--set first_stage.mu=1500``,
``--set reranker.name=none``). A config may start from another with ``base: NAME``.

The ``--set`` rule (:func:`apply_overrides`; the explorer's stage choices follow it too, :func:`switch_stage`):

- the order of ``--set`` options does not matter; a mapping given for a section (``--set 'summarizer={name: x,
  words: 50}'``) is one ``--set`` per key it holds; a key given twice is warned about, and the last value holds;
- ``--set SECTION.name=OTHER`` switches the stage: of the profile's settings for that section, those OTHER
  declares are kept and the others are left out (``-v`` says which); every setting given with ``--set`` for the
  section applies to the stage finally named, and is checked against it;
- naming the profile's own stage gives the profile's section back, whatever was named before.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cast.core.config_keys import ConfigKeys
from cast.core.registry import STAGES, stage_class
from cast.errors import ConfigError, DataFormatError
from cast.formats.textfiles import parse_yaml, read_yaml

_PACKAGE = Path(__file__).resolve().parent.parent  # the cast package
# The profiles: a checkout's configs/ (the folder users edit; also what an editable install reads), else the copy
# that setup.py ships inside the installed package (cast/configs/).
CONFIG_DIR = (
    _PACKAGE.parent / "configs" if (_PACKAGE.parent / "pyproject.toml").is_file() else _PACKAGE / "configs"
)
DEFAULT_CONFIG = "offline"

log = logging.getLogger(__name__)


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

    try:
        data = read_yaml(path)
    except DataFormatError as e:
        raise ConfigError(str(e)) from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a config must be a YAML mapping")
    check_top_level_keys(data, str(path))
    return data


def check_top_level_keys(config: dict[str, Any], source: str) -> None:
    """A :class:`ConfigError` for a key that is neither a top-level setting (:class:`ConfigKeys`) nor a stage
    section (a typo, or a stale key), or a value of the wrong shape: a number or a list where a path is expected
    fails later, and obscurely. (The values themselves are checked when a pipeline is built.)"""
    known = (*ConfigKeys.declared(), *STAGES)
    unknown = sorted(str(key) for key in set(config) - set(known))  # YAML keys need not be strings
    if unknown:
        raise ConfigError(
            f"{source}: unknown top-level key(s) {', '.join(unknown)}; known: {', '.join(known)}"
        )
    for key, value in config.items():
        text = ConfigKeys.holds_text(key)
        if value is not None and not isinstance(value, str if text else dict):
            what = "a string (quote it: '...')" if text else "a mapping"
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

    key, sep, raw = assignment.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"--set expects KEY=VALUE (e.g. first_stage.mu=1500), got {assignment!r}")
    try:
        value = parse_yaml(raw, "--set") if raw.strip() else ""
    except DataFormatError as e:
        raise ConfigError(f"--set {assignment!r}: the value is {e.problem}") from None
    keys = key.strip().split(".")
    if len(keys) == 1 and ConfigKeys.holds_text(keys[0]) and isinstance(value, int | float | bool):
        # A path or tag that YAML reads as a number or a boolean (--index 2024, --set tag=yes).
        value = raw.strip()
    return keys, value


def override_paths(overrides: Sequence[str]) -> dict[tuple[str, ...], Any]:
    """The value each ``--set`` gives, by the dotted path it sets; a mapping given for a whole section
    (``summarizer={name: x, words: 50}``) sets each of its keys (``summarizer.name``, ``summarizer.words``).

    A path set twice is warned about (one line); the last value holds.

    Example:
        >>> override_paths(["first_stage.mu=1500", "summarizer={name: topk_trim, words: 30}"])
        {('first_stage', 'mu'): 1500, ('summarizer', 'name'): 'topk_trim', ('summarizer', 'words'): 30}
    """
    paths: dict[tuple[str, ...], Any] = {}
    given: dict[tuple[str, ...], str] = {}  # the --set that gave each path, for the warning
    for assignment in overrides:
        keys, value = parse_override(assignment)
        if keys[0] == "base":
            raise ConfigError(f"--set {assignment}: base is read with the config file; give --config instead")
        check_top_level_keys({keys[0]: value} if len(keys) == 1 else {keys[0]: {}}, f"--set {assignment}")
        pairs: list[tuple[tuple[str, ...], Any]]
        if len(keys) == 1 and isinstance(value, dict):
            pairs = [((keys[0], str(key)), item) for key, item in value.items()]
        else:
            pairs = [(tuple(keys), value)]
        for path, item in pairs:
            if path in given:
                log.warning(
                    "--set %s is given twice (%s, then %s): the last holds",
                    ".".join(path),
                    given[path],
                    assignment,
                )
            paths[path], given[path] = item, assignment
    return paths


def switch_stage(kind: str, section: dict[str, Any], name: str) -> tuple[dict[str, Any], list[str]]:
    """The ``kind`` section for the stage ``name``, from ``section`` (a profile's, perhaps for another stage), and
    the settings of ``section`` it leaves out.

    The same stage keeps its section. Another keeps those of the section's settings it declares (the selector's
    ``candidates`` and ``n`` from ``eg`` to ``o``) and leaves out the others; a stage that is not registered, or
    cannot be loaded here, keeps none (building it says why).
    """
    if name == section.get("name"):
        return copy.deepcopy(section), []
    try:
        declared = stage_class(kind, name).settings()
    except (ConfigError, ImportError):
        declared = {}
    kept = {key: copy.deepcopy(value) for key, value in section.items() if key in declared}
    return {"name": name, **kept}, [key for key in section if key != "name" and key not in kept]


def apply_overrides(profile: dict[str, Any], paths: Mapping[tuple[str, ...], Any]) -> dict[str, Any]:
    """``profile`` (a config as read, :func:`load_profile`) with the ``--set`` values ``paths``
    (:func:`override_paths`) applied by the rule of the module docstring."""
    config = copy.deepcopy(profile)
    for kind in dict.fromkeys(path[0] for path in paths if path[0] in STAGES and len(path) > 1):
        own = profile.get(kind)
        own = own if isinstance(own, dict) else {}
        name = paths.get((kind, "name"), own.get("name"))
        section, dropped = switch_stage(kind, own, name) if isinstance(name, str) else (dict(own), [])
        if dropped:
            log.info(
                "--set %s.name=%s: left out the config's %s setting(s) %s, which %s does not take",
                *(kind, name, own.get("name"), ", ".join(dropped), name),
            )
        config[kind] = section
    for path, value in paths.items():
        node = config
        for key in path[:-1]:
            child = node.setdefault(key, {})
            if not isinstance(child, dict):
                raise ConfigError(f"--set {'.'.join(path)}: {key!r} is a value, not a section")
            node = child
        node[path[-1]] = value
    return config


def load_config(name_or_path: str | Path = DEFAULT_CONFIG, overrides: Sequence[str] = ()) -> dict[str, Any]:
    """Read a config, resolve its ``base`` chain, and apply ``--set`` overrides.

    The result has ``tag`` (the run tag: the config's file name unless set).
    """
    return apply_overrides(load_profile(name_or_path), override_paths(overrides))


def load_profile(name_or_path: str | Path) -> dict[str, Any]:
    """A config as its file (and its ``base`` chain) gives it, with its ``tag``."""
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
    return config
