"""The optional parts of the install (pyproject.toml's extras) and the one line that says how to add a missing one.

A feature that needs an extra checks for it where the user asks for the feature (``--ray``, ``backend: openvino``,
``cast explore``, ``cast.pyterrier``, ``--topics irds:...``), before any other work, without importing it.

Example:
    >>> require_extra("irds", "--topics irds:...")  # doctest: +SKIP
    Traceback (most recent call last):
    cast.infra.extras.MissingExtraError: --topics irds:... needs ir_datasets, which is not installed: pip install 'cast-toolkit[irds]'
"""

from __future__ import annotations

import importlib.util

from cast.errors import CastError

# Each extra's importable modules, as pyproject.toml's [project.optional-dependencies] installs them.
EXTRAS: dict[str, tuple[str, ...]] = {
    "ray": ("ray",),
    "openvino": ("openvino",),
    "explorer": ("fastapi", "uvicorn"),
    "pyterrier": ("pyterrier", "ir_datasets"),
    "irds": ("ir_datasets",),
    "local-llm": ("gguf", "fastapi", "uvicorn", "openai"),
}


class MissingExtraError(CastError):
    """A feature needs an optional dependency that is not installed."""


def require_extra(extra: str, feature: str) -> None:
    """A :class:`MissingExtraError` naming ``feature`` and the ``pip install`` that adds ``extra``, unless all of
    the extra's modules can be imported (they are found, not imported)."""
    missing = [module for module in EXTRAS[extra] if importlib.util.find_spec(module) is None]
    if missing:
        raise MissingExtraError(
            f"{feature} needs {', '.join(missing)}, which {'is' if len(missing) == 1 else 'are'} not installed: "
            f"pip install 'cast-toolkit[{extra}]'"
        )
