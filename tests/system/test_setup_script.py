"""scripts/setup.sh re-runs exactly when one of its inputs changes (pyproject.toml, setup.py, the lock
constraints.txt, scripts/*.sh and scripts/*.txt)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
INPUTS = ("pyproject.toml", "setup.py", "constraints.txt", "scripts/setup.sh", "scripts/older-deps.txt")


def test_setup_reruns_when_any_input_changes(tmp_path: Path) -> None:
    (tmp_path / "scripts").mkdir()
    for name in INPUTS:
        shutil.copy2(REPO / name, tmp_path / name)
    # Stand-ins for the helpers and the venv's python: they only say that they ran.
    for helper in ("setup_wordnet.sh", "setup_browser.sh"):
        (tmp_path / "scripts" / helper).write_text("#!/usr/bin/env bash\n")
        (tmp_path / "scripts" / helper).chmod(0o755)
    python = tmp_path / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("#!/usr/bin/env bash\n")
    python.chmod(0o755)

    def set_up() -> bool:
        done = subprocess.run(
            ["bash", "scripts/setup.sh"], cwd=tmp_path, capture_output=True, text=True, check=True
        )
        return "set-up complete" in done.stdout

    assert set_up()
    assert not set_up()  # nothing changed
    for name in ("scripts/setup_wordnet.sh", *INPUTS):
        with (tmp_path / name).open("a") as f:
            f.write("\n# changed\n")
        assert set_up(), f"a change to {name} did not run the set-up again"
        assert not set_up()
