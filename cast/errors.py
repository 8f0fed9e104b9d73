"""Errors a user can act on. The CLI prints them as one line, without a traceback."""

from __future__ import annotations

from pathlib import Path


class CastError(Exception):
    """Base class: something the user can fix (a path, a file, a config value, a service)."""


class ConfigError(CastError):
    """A configuration file or value is wrong."""


class DataFormatError(CastError):
    """An input file is malformed. The message names the file, and the line where known."""

    def __init__(self, path: str | Path, message: str, line: int | None = None):
        where = f"{path}:{line}" if line is not None else str(path)
        super().__init__(f"{where}: {message}")
        self.path = str(path)
        self.line = line
        self.problem = message


def excerpt(value: object, limit: int = 80) -> str:
    """``repr(value)`` for an error message, cut after ``limit`` characters: a wrong file's line can be huge.

    Example:
        >>> excerpt("x" * 100, limit=10)
        "'xxxxxxxxx... (92 more characters)"
    """
    shown = repr(value)
    return shown if len(shown) <= limit else f"{shown[:limit]}... ({len(shown) - limit} more characters)"


class EmptyUtteranceError(CastError):
    """A turn has no text to search with."""


class IndexUnavailableError(CastError):
    """A Lucene index is missing, empty or incompatible."""


class ModelUnavailableError(CastError):
    """A model named in the config cannot be loaded here.

    Args:
        setting: the config key naming the model (e.g. ``reranker.model``), for the hints; added by
            :meth:`cast.stages.Stage.from_config`, which knows the stage.
        downloads_off: the model may be on the Hugging Face Hub, but downloads were not allowed: the message says
            which setting allows them.
    """

    def __init__(self, model: str, reason: str, setting: str | None = None, downloads_off: bool = False):
        section = setting.rpartition(".")[0] if setting else "STAGE"
        allow = f" (allow them with --set {section}.allow_download=true)" if downloads_off else ""
        point = f"--set {setting or 'STAGE.model'}=/path/to/model"
        if _is_local_path(model):  # a download command for a path would be no help
            how = f"Point the config at a folder that holds the model ({point})."
        else:
            how = (
                "Make it available by downloading it once on a machine with network (e.g. `huggingface-cli "
                f"download {model}`, which fills the Hugging Face cache), or point the config at a local folder "
                f"holding the model ({point})."
            )
        super().__init__(f"cannot load model {model!r}: {reason}{allow}. {how}")
        self.model = model
        self.reason = reason
        self.setting = setting
        self.downloads_off = downloads_off


def _is_local_path(model: str) -> bool:
    """A model named by a path (``/models/bart``, ``./bart``, ``~/bart``) rather than a Hub id (``org/name``)."""
    return model.startswith(("/", ".", "~")) or model.count("/") > 1


class ServiceUnavailableError(CastError):
    """A remote service (entity linker, knowledge base) cannot be reached."""
