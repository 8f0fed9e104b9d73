"""Build hook and package list.

The wheel carries the pipeline profiles of ``configs/`` and their prompt templates (``configs/prompts/``) inside the
package (``cast/configs/``), so that a non-editable ``pip install`` runs ``--config offline``; ``configs/`` stays the
one folder users edit.

The packages: ``cast`` and its subpackages, and those of the folders ``pyproject.toml``'s package-dir maps into it
(``index/`` is ``cast.index``). Everything else about the package is in ``pyproject.toml``.
"""

import tomllib
from pathlib import Path

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
PROFILES = ROOT / "configs"
MAPPED = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]


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


def packages() -> list[str]:
    found = find_packages(include=["cast", "cast.*"])
    for package, folder in MAPPED.items():
        found += [package, *(f"{package}.{sub}" for sub in find_packages(str(ROOT / folder)))]
    return found


setup(packages=packages(), cmdclass={"build_py": BuildWithProfiles})
