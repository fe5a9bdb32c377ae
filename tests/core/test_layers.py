"""The layers of docs/architecture.md are the code's: every room of product code (a folder of
finops/, a module at its root, billing_ingest/, bench/) stands in the table, and each of its
imports of another room (at the top of a module or inside a function) goes to a lower floor."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TABLE_ROW = re.compile(r"^\| (\d+) \| (.*?) \|", re.MULTILINE)
PRODUCT = ("finops", "billing_ingest", "bench")
# Only hands names on (Celery's app for `celery -A finops`): drawn as no room.
FACES = {"finops/__init__.py"}


def floors_of(document: str) -> dict[str, int]:
    """{room: floor} from the layer table ("finops/web/" -> "finops/web")."""
    floors: dict[str, int] = {}
    for match in TABLE_ROW.finditer(document):
        for room in re.findall(r"`([^`]+)`", match.group(2)):
            floors[room.rstrip("/")] = int(match.group(1))
    return floors


def room_of(path: str) -> str:
    """finops/web/views.py -> finops/web; finops/text.py -> finops/text.py; bench/x.py -> bench."""
    parts = path.split("/")
    if parts[0] == "finops" and len(parts) > 2:
        return "/".join(parts[:2])
    return path if parts[0] == "finops" else parts[0]


def module_file(module: str) -> str | None:
    """The tree's file of a dotted module name, or None (a third-party module)."""
    base = module.replace(".", "/")
    for candidate in (f"{base}.py", f"{base}/__init__.py"):
        if (ROOT / candidate).is_file():
            return candidate
    return None


def imported_rooms(path: str, source: str) -> list[tuple[int, str]]:
    """(line, room) of each absolute import of the tree in the module."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules = [node.module]
        elif isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        else:
            continue
        for module in modules:
            target = module_file(module) if module.startswith(PRODUCT) else None
            if target is not None and room_of(target) != room_of(path):
                found.append((node.lineno, room_of(target)))
    return found


def product_modules() -> list[str]:
    return sorted(
        str(path.relative_to(ROOT))
        for top in PRODUCT
        for path in (ROOT / top).rglob("*.py")
        if "migrations" not in path.parts and str(path.relative_to(ROOT)) not in FACES
    )


def test_the_table_reads_as_floors() -> None:
    # The parser itself, on a hand-made table: rooms with and without the folder's slash.
    table = "| floor | rooms |\n|---|---|\n| 2 | `a/`, `b.py` | x |\n| 1 | `c/` | y |\n"
    assert floors_of(table) == {"a": 2, "b.py": 2, "c": 1}
    assert room_of("finops/web/views.py") == "finops/web"
    assert room_of("finops/text.py") == "finops/text.py"
    assert room_of("billing_ingest/parsers/focus.py") == "billing_ingest"


def test_every_room_is_in_the_table() -> None:
    floors = floors_of((ROOT / "docs" / "architecture.md").read_text(encoding="utf-8"))
    missing = sorted({room_of(path) for path in product_modules()} - set(floors))
    assert missing == [], f"rooms missing from docs/architecture.md's layer table: {missing}"


def test_no_import_runs_up_or_across_the_floors() -> None:
    floors = floors_of((ROOT / "docs" / "architecture.md").read_text(encoding="utf-8"))
    wrong = []
    for path in product_modules():
        room = room_of(path)
        for line, target in imported_rooms(path, (ROOT / path).read_text(encoding="utf-8")):
            if floors.get(target, 0) >= floors.get(room, 0):
                wrong.append(
                    f"{path}:{line} ({floors.get(room)}) -> {target} ({floors.get(target)})"
                )
    assert wrong == [], "imports that do not run down docs/architecture.md's floors:\n" + "\n".join(
        wrong
    )
