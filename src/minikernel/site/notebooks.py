"""Lab notebooks for the site, generated from the one source of each lab: ``labs/NN_op.py``.

A lab is a jupytext "percent" script whose markdown cells are written twice, tagged
``lang="en"`` and ``lang="es"``; code cells are shared. For each language this writes

- ``docs/<page>-notebook[.es].md``: a jupytext Markdown notebook, which mkdocs-jupyter renders
  as a notebook page (with the i18n plugin on, it renders ``.ipynb`` and ``.py`` as raw files:
  mkdocs-static-i18n issue #198; jupytext Markdown works), and
- ``docs/<page-folder>/<lab>[.es].ipynb``: the notebook to download and run.

The generated files are ignored by git; they are rewritten only when their content changes, so
``mkdocs serve`` does not rebuild in a loop.
"""

from __future__ import annotations

from pathlib import Path

LANGS = ("en", "es")


def _filtered(nb, lang: str):  # type: ignore[no-untyped-def]
    """The notebook in one language: its shared cells and the markdown cells tagged ``lang``."""
    import nbformat

    out = nbformat.v4.new_notebook()
    out.metadata = nbformat.from_dict({"kernelspec": dict(nb.metadata.get("kernelspec", {}))})
    for cell in nb.cells:
        if cell.metadata.get("lang", lang) != lang:
            continue
        meta = {k: v for k, v in cell.metadata.items() if k != "lang"}
        if cell.cell_type == "markdown":
            new = nbformat.v4.new_markdown_cell(cell.source, metadata=meta)
        else:
            new = nbformat.v4.new_code_cell(cell.source, metadata=meta)
        out.cells.append(new)
    return out


def to_jupytext_markdown(nb) -> str:  # type: ignore[no-untyped-def]
    """The notebook in jupytext's Markdown format: a YAML header, then markdown cells as text
    and code cells as fenced ``python`` blocks. (Written here rather than by jupytext.writes,
    whose YAML dump refuses nbformat's dict subclass for nested metadata.)"""
    import yaml

    header = {"jupyter": {"kernelspec": {k: str(v) for k, v in nb.metadata["kernelspec"].items()}}}
    parts = ["---\n" + yaml.safe_dump(header, sort_keys=True) + "---\n"]
    for cell in nb.cells:
        src = cell.source.rstrip("\n")
        parts.append(src if cell.cell_type == "markdown" else f"```python\n{src}\n```")
    return "\n\n".join(parts) + "\n"


def _write_if_changed(path: Path, text: str) -> bool:
    if path.exists() and path.read_text() == text:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return True


def lab_notebooks(labs_dir: Path) -> list[tuple[Path, str]]:
    """(lab file, page) for every lab that names its page in its metadata."""
    import jupytext

    found = []
    for lab in sorted(labs_dir.glob("[0-9][0-9]_*.py")):
        nb = jupytext.read(lab)
        page = nb.metadata.get("minikernel", {}).get("page")
        if page:
            found.append((lab, page))
    return found


def generate(labs_dir: Path, docs_dir: Path) -> list[Path]:
    """Write every lab's notebook pages and downloads; return the paths written."""
    import jupytext
    import nbformat

    written = []
    for lab, page in lab_notebooks(labs_dir):
        nb = jupytext.read(lab)
        for lang in LANGS:
            suffix = "" if lang == "en" else f".{lang}"
            localized = _filtered(nb, lang)
            md = docs_dir / f"{page}-notebook{suffix}.md"
            if _write_if_changed(md, to_jupytext_markdown(localized)):
                written.append(md)
            ipynb = docs_dir / Path(page).parent / f"{lab.stem}{suffix}.ipynb"
            if _write_if_changed(ipynb, nbformat.writes(localized) + "\n"):
                written.append(ipynb)
    return written
