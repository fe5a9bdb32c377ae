"""Services queue tasks one way: by name, through finops.core.queue, never by importing tasks.

Tasks import services (a task is thin: take ids, call one service); a service importing a tasks
module would run the layers in a circle. This reads every service and selector module's imports
(the AST, so a lazy import inside a function counts too).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("billing_ingest", "finops")


def _service_modules() -> list[Path]:
    found: list[Path] = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).parts
            if "migrations" in parts:
                continue
            in_services = "services" in parts[:-1] or "selectors" in parts[:-1]
            if in_services or path.stem in {"services", "selectors", "enqueue"} or "core" in parts:
                found.append(path)
    return found


def _imported_modules(path: Path) -> list[str]:
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
            names.extend(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def test_the_scan_finds_the_services() -> None:
    paths = {p.relative_to(ROOT).as_posix() for p in _service_modules()}
    assert "billing_ingest/services/dispatch.py" in paths
    assert "finops/budgets/services.py" in paths
    assert "finops/core/queue.py" in paths


@pytest.mark.parametrize("path", _service_modules(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_a_service_never_imports_a_tasks_module(path: Path) -> None:
    tasks = [
        name
        for name in _imported_modules(path)
        if name.split(".")[-1] == "tasks" or ".tasks." in f"{name}."
    ]
    assert tasks == [], f"{path.relative_to(ROOT)} imports {tasks}: queue by name (core.queue)"
