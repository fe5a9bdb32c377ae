"""Apply a module-moves mapping (docs/renovation-moves.tsv) to a checkout.

Usage (from the repository root):
    python scripts/apply_moves.py docs/renovation-moves.tsv           # rewrite text only
    python scripts/apply_moves.py docs/renovation-moves.tsv --git-mv  # also move the files
    python scripts/apply_moves.py docs/renovation-moves.tsv \
        --symbols docs/renovation-symbol-moves.tsv                    # and names moved alone

The TSV has two columns: old dotted module path, new dotted module path. The symbols TSV has
the same two columns for names moved out of a module that stays
(``billing_ingest.models.money_field`` -> ``finops.core.money.money_field``): rewritten the
same way, never git-moved. The rewrite is one pass over each tracked text file (py, toml, md,
html, txt, yaml, cfg, ini, Makefile, ci/run):
- dotted paths, longest first, as whole names (``billing_ingest.months`` but not
  ``billing_ingest.months_x`` nor ``x.billing_ingest.months``): imports, mock.patch targets,
  settings and docs alike; what follows the module (``.month_parse``) is kept;
- file paths (``billing_ingest/months.py`` -> ``finops/core/months.py``);
- in Python, ``from PARENT import NAME`` where PARENT.NAME moved becomes
  ``from NEWPARENT import NEWLEAF as NAME`` (``as`` only when the leaf changed), so the call
  sites keep their name.
One pass means an old path that is a prefix of a new one (``finops.attribution.inputs`` ->
``finops.attribution.inputs.month``) is never rewritten twice. Run it once per checkout.
"""

from __future__ import annotations

import argparse
import ast
import re
import subprocess
import sys
from pathlib import Path

TEXT_SUFFIXES = {".py", ".toml", ".md", ".html", ".txt", ".yaml", ".yml", ".cfg", ".ini"}
TEXT_NAMES = {"Makefile", "run"}


def read_moves(path: Path) -> dict[str, str]:
    moves: dict[str, str] = {}
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split("\t")
        if len(parts) != 2:
            sys.exit(f"{path}: row {number}: expected two tab-separated columns")
        moves[parts[0].strip()] = parts[1].strip()
    return moves


def module_file(dotted: str) -> str:
    return dotted.replace(".", "/") + ".py"


def git_mv(moves: dict[str, str]) -> None:
    for old, new in moves.items():
        target = Path(module_file(new))
        target.parent.mkdir(parents=True, exist_ok=True)
        # Each new package gets an empty __init__.py (a moved module may have been one).
        package = target.parent
        while not (package / "__init__.py").exists():
            (package / "__init__.py").write_text("")
            subprocess.run(["git", "add", str(package / "__init__.py")], check=True)
            package = package.parent
        subprocess.run(["git", "mv", module_file(old), str(target)], check=True)


def new_children(moves: dict[str, str], old: str) -> set[str]:
    """The names under ``old`` that are new modules: ``finops.attribution.ledger`` was a module
    and is now a package of ``writer``, ``rows``...; ``finops.attribution.ledger.writer`` is new."""
    prefix = old + "."
    return {new[len(prefix) :].split(".")[0] for new in moves.values() if new.startswith(prefix)}


def dotted_pattern(moves: dict[str, str]) -> re.Pattern[str]:
    alternatives = []
    for name in sorted(moves, key=len, reverse=True):
        # An old module that became a package: its new children are new paths, left alone (so
        # a second run, or a tree already partly rewritten, changes nothing).
        children = "|".join(re.escape(c) for c in sorted(new_children(moves, name)))
        guard = rf"(?!\.(?:{children})(?![\w]))" if children else ""
        alternatives.append(rf"{re.escape(name)}(?![\w]){guard}")
    return re.compile(rf"(?<![\w.])({'|'.join(alternatives)})")


def protect_package_imports(text: str, moves: dict[str, str]) -> tuple[str, list[str]]:
    """``from PKG import a`` where PKG was a module and PKG.a is a new module (already the new
    layout): hide PKG from the dotted rewrite. Returns the text and the hidden names."""
    hidden: list[str] = []
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return text, hidden
    lines = text.splitlines(keepends=True)
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom) or node.level or node.module not in moves:
            continue
        children = new_children(moves, node.module)
        if not all(alias.name in children for alias in node.names):
            continue
        line = lines[node.lineno - 1]
        token = f"\x00{len(hidden)}\x00"
        lines[node.lineno - 1] = line.replace(
            f"from {node.module} import", f"from {token} import", 1
        )
        hidden.append(node.module)
    return "".join(lines), hidden


def path_pattern(moves: dict[str, str]) -> tuple[re.Pattern[str], dict[str, str]]:
    paths = {module_file(old): module_file(new) for old, new in moves.items()}
    alternatives = "|".join(re.escape(p) for p in sorted(paths, key=len, reverse=True))
    return re.compile(rf"(?<![\w/])({alternatives})(?![\w])"), paths


def rewrite_from_imports(text: str, moves: dict[str, str]) -> str:
    """``from PARENT import a, b`` where PARENT.a moved: split into statements of their own."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return text
    lines = text.splitlines(keepends=True)
    edits: list[tuple[int, int, str]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom) or node.level or not node.module:
            continue
        moved = [a for a in node.names if f"{node.module}.{a.name}" in moves]
        if not moved:
            continue
        indent = re.match(r"\s*", lines[node.lineno - 1]).group(0)  # type: ignore[union-attr]
        kept = [a for a in node.names if a not in moved]
        statements: list[str] = []
        if kept:
            names = ", ".join(a.name + (f" as {a.asname}" if a.asname else "") for a in kept)
            statements.append(f"{indent}from {node.module} import {names}\n")
        for alias in moved:
            parent, _, leaf = moves[f"{node.module}.{alias.name}"].rpartition(".")
            local = alias.asname or alias.name
            suffix = "" if local == leaf else f" as {local}"
            statements.append(f"{indent}from {parent} import {leaf}{suffix}\n")
        assert node.end_lineno is not None
        edits.append((node.lineno - 1, node.end_lineno, "".join(statements)))
    for start, end, replacement in sorted(edits, reverse=True):
        lines[start:end] = [replacement]
    return "".join(lines)


def rewrite(text: str, moves: dict[str, str], is_python: bool) -> str:
    hidden: list[str] = []
    if is_python:
        text, hidden = protect_package_imports(text, moves)
    dotted = dotted_pattern(moves)
    text = dotted.sub(lambda m: moves[m.group(1)], text)
    for index, module in enumerate(hidden):
        text = text.replace(f"\x00{index}\x00", module, 1)
    pattern, paths = path_pattern(moves)
    text = pattern.sub(lambda m: paths[m.group(1)], text)
    if is_python:
        text = rewrite_from_imports(text, moves)
    return text


def tracked_text_files() -> list[Path]:
    listed = subprocess.run(["git", "ls-files"], check=True, capture_output=True, text=True)
    files = []
    for name in listed.stdout.splitlines():
        path = Path(name)
        if (path.suffix in TEXT_SUFFIXES or path.name in TEXT_NAMES) and path.is_file():
            files.append(path)
    return files


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("moves", type=Path)
    parser.add_argument("--git-mv", action="store_true", help="also git mv the modules")
    parser.add_argument("--symbols", type=Path, help="names moved out of modules that stay")
    args = parser.parse_args()
    moves = read_moves(args.moves)
    if args.git_mv:
        git_mv(moves)
    skip = {args.moves.resolve()}
    if args.symbols:
        moves.update(read_moves(args.symbols))
        skip.add(args.symbols.resolve())
    changed = 0
    for path in tracked_text_files():
        # This script's own examples name old paths on purpose.
        if path.resolve() in skip or path.resolve() == Path(__file__).resolve():
            continue
        text = path.read_text()
        new = rewrite(text, moves, path.suffix == ".py")
        if new != text:
            path.write_text(new)
            changed += 1
    print(f"{changed} files rewritten")


if __name__ == "__main__":
    main()
