"""Translation drift: a Spanish page records the hash of the English page it was translated
from; the check lists the pages whose English changed since. CI runs the check on docs/ and
fails on drift (README, "Translations")."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

from minikernel.site import drift

ROOT = Path(__file__).resolve().parents[1]


def _pair(docs: Path, name: str, en: str, es: str) -> tuple[Path, Path]:
    (docs / name).parent.mkdir(parents=True, exist_ok=True)
    english, spanish = docs / f"{name}.md", docs / f"{name}.es.md"
    english.write_text(en)
    spanish.write_text(es)
    return english, spanish


def test_the_hash_is_the_one_the_page_brief_gives(tmp_path: Path) -> None:
    page = tmp_path / "p.md"
    page.write_bytes("# Título\n\nkernel\r\n".encode())
    assert drift.english_hash(page) == hashlib.sha256(page.read_bytes()).hexdigest()[:12]


def test_a_page_whose_english_changed_is_listed_until_stamped(tmp_path: Path) -> None:
    en, es = _pair(tmp_path, "a/page", "# Page\n", "---\nrender_macros: true\n---\n# Página\n")
    _pair(tmp_path, "b", "# B\n", "# B\n")
    assert {d.page for d in drift.check(tmp_path)} == {es, tmp_path / "b.es.md"}  # none stamped
    assert drift.main(["--docs", str(tmp_path), "--stamp-all"]) == 0
    assert drift.check(tmp_path) == []
    assert es.read_text() == (
        f"---\nrender_macros: true\ntranslation_of: {drift.english_hash(en)}\n---\n# Página\n"
    )
    assert (tmp_path / "b.es.md").read_text().startswith("---\ntranslation_of: ")

    en.write_text("# Page\n\nA new paragraph.\n")  # the English moves on
    (stale,) = drift.check(tmp_path)
    assert stale.page == es and stale.current == drift.english_hash(en)
    assert "translated from" in stale.describe(tmp_path)
    assert drift.main(["--docs", str(tmp_path)]) == 1

    drift.main(["--docs", str(tmp_path), "--stamp", str(en)])  # the English name finds its twin
    assert drift.check(tmp_path) == []
    assert es.read_text().count("translation_of") == 1  # replaced, not added


def test_generated_notebook_pages_and_missing_twins(tmp_path: Path) -> None:
    _pair(tmp_path, "lab-notebook", "x", "y")  # generated from one lab file: never drifts
    (tmp_path / "orphan.es.md").write_text("---\ntranslation_of: 000000000000\n---\n")
    (orphan,) = drift.check(tmp_path)
    assert orphan.current is None and "no English twin" in orphan.describe(tmp_path)


def test_no_spanish_page_of_the_site_has_drifted() -> None:
    """What CI enforces: after editing an English page, update its Spanish twin and run
    ``python -m minikernel.site.drift --stamp docs/<page>.es.md``."""
    proc = subprocess.run(
        [sys.executable, "-m", "minikernel.site.drift"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT / "src")),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert drift.check() == []
