"""What a build records beside its index (``cast-build.json``): read back, the identity of the index's content
that outputs record, and the command that builds the index again (advice in errors)."""

from __future__ import annotations

import hashlib
import json
import shlex
from pathlib import Path
from typing import Any

from cast.errors import DataFormatError
from cast.formats.textfiles import RECORD_BYTES, read_json

# What a build read, kept in the index folder (Lucene leaves files not named like its own alone): how many
# documents it holds, for `cast index embed` to check its inputs against without starting the JVM.
BUILD_RECORD = "cast-build.json"


def build_record(index_dir: str | Path) -> dict[str, Any] | None:
    """What :func:`build_index` recorded of the build of ``index_dir`` (``documents``, ``empty``, ``inputs``,
    ``stemmer``, ``duplicates``), or ``None`` for an index built otherwise.

    Raises:
        DataFormatError: the record is not one (damaged, or edited by hand).
    """

    path = Path(index_dir).expanduser() / BUILD_RECORD
    if not path.is_file():
        return None
    fix = (
        f"rebuild the index with `{index_command(index_dir, 'build')}`, or delete the file (it only records how "
        "the index was built)"
    )
    try:
        record = read_json(path, RECORD_BYTES, "build record")
    except DataFormatError as e:
        raise DataFormatError(path, f"{e.problem}; {fix}") from None
    # Records of older builds may lack the optional ones.
    required, optional = {"documents": int, "inputs": list}, {"empty": int, "stemmer": str}
    wrong = (
        [key for key, kind in required.items() if not isinstance(record.get(key), kind)]
        + [key for key, kind in optional.items() if key in record and not isinstance(record[key], kind)]
        if isinstance(record, dict)
        else ["all"]
    )
    if wrong or not all(isinstance(i, str) for i in record["inputs"]):
        raise DataFormatError(
            path, f"not a build record (wrong or missing: {', '.join(wrong or ['inputs'])}); {fix}"
        )
    return record


def index_command(index_dir: str | Path, verb: str) -> str:
    """The ``cast index build`` (or ``embed``) command that builds ``index_dir`` again, from the inputs its build
    recorded where they can be read (else ``FILES...``), to give as advice that works when followed literally."""
    try:
        record = read_json(Path(index_dir).expanduser() / BUILD_RECORD, RECORD_BYTES, "build record")
        inputs = [shlex.quote(i) for i in record["inputs"] if isinstance(i, str)] or ["FILES..."]
        extra = [f"--duplicates {shlex.quote(record['duplicates'])}"] if record.get("duplicates") else []
        if verb == "build" and record.get("stemmer", "krovetz") != "krovetz":
            extra.append(f"--stemmer {shlex.quote(record['stemmer'])}")
    except (DataFormatError, TypeError, KeyError, AttributeError):
        inputs, extra = ["FILES..."], []
    return " ".join(
        [
            "cast index",
            verb,
            "--input",
            *inputs,
            "--index",
            shlex.quote(str(index_dir)),
            *extra,
            "--overwrite",
        ]
    )


def index_identity(index_dir: str | Path) -> str:
    """What identifies an index's content, for outputs made from it to record and check (a run resumed, or
    prepared turns finished, with another index would mix two collections): its passage count and a digest of its
    files' names and sizes and of its build record. Its path is left out, so that a copied index is the same."""
    folder = Path(index_dir).expanduser()
    try:
        files = sorted(
            (f.name, f.stat().st_size) for f in folder.iterdir() if f.is_file() and f.name != "write.lock"
        )
        built = (folder / BUILD_RECORD).read_bytes() if (folder / BUILD_RECORD).is_file() else b""
    except OSError:
        return "unreadable"
    digest = hashlib.sha256(json.dumps(files).encode() + built).hexdigest()[:16]
    record = build_record(folder)
    return f"{record['documents']} passages, {digest}" if record else digest
