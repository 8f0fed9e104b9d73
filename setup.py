"""Build hook: the wheel carries the pipeline profiles of ``configs/`` and their prompt templates
(``configs/prompts/``) inside the package (``cast/configs/``), so that a non-editable ``pip install`` runs
``--config offline``; ``configs/`` stays the one folder users edit.

Everything else about the package is in ``pyproject.toml``.
"""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

PROFILES = Path(__file__).resolve().parent / "configs"


class BuildWithProfiles(build_py):
    def run(self) -> None:
        super().run()
        target = Path(self.build_lib) / "cast" / "configs"
        self.mkpath(str(target))
        for profile in sorted(PROFILES.glob("*.yaml")):
            self.copy_file(str(profile), str(target / profile.name))
        self.mkpath(str(target / "prompts"))
        for template in sorted((PROFILES / "prompts").glob("*.txt")):
            self.copy_file(str(template), str(target / "prompts" / template.name))


setup(cmdclass={"build_py": BuildWithProfiles})
