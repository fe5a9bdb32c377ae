"""The test suite's own rules (issue 8): inputs come from fixtures/ or tests/builders.py, and a
test module never imports another test module (pytest may import it twice, under two names, and
its fixtures then run in modules that never asked for them).

Modules that still did when this check was added are listed in DEBT, each with what it takes;
the list may only shrink: a new import of a test module fails here, and so does an entry that
no longer imports one (remove it).
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent

# module -> the test modules it imports from (to move into builders.py or conftest.py).
DEBT: dict[str, set[str]] = {
    "test_browser_uploads": {"test_focus_ingest", "test_slurm_ingest"},
    "test_import_batch_paths": {"test_attribution_golden"},
    "test_inference_waste": {"test_attribution_service"},
    "test_lead_isolation": {"test_attribution_golden"},
    "test_page_charts": {"test_endpoints_pages", "test_overview_dashboard"},
    "test_pricing_list_cost": {"test_conservation_property"},
    "test_pricing_pages": {"test_pricing_comparison"},
}


def _imported_test_modules(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module:
            # `from tests.test_x import y` and `from tests import test_x` alike.
            names = [node.module]
            if node.module == "tests":
                names += [f"tests.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        for name in names:
            last = name.split(".")[-1]
            if name.startswith(("tests.test_", "test_")) or (
                name.startswith("tests.") and last.startswith("test_")
            ):
                found.add(last)
    return found


def test_no_test_module_imports_another_beyond_the_recorded_debt():
    imports = {path.stem: _imported_test_modules(path) for path in sorted(TESTS.glob("*.py"))}
    offenders = {module: names for module, names in imports.items() if names}
    new = {m: names - DEBT.get(m, set()) for m, names in offenders.items()}
    assert {m: n for m, n in new.items() if n} == {}, (
        "import shared inputs from tests/builders.py (or fixtures from conftest.py), "
        "not from another test module"
    )
    paid = {m for m in DEBT if not offenders.get(m)}
    assert paid == set(), f"no longer import a test module; remove them from DEBT: {paid}"
