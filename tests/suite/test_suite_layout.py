"""The test suite's own rules (issue 8): inputs come from fixtures/ or tests/builders.py, and a
test module never imports another test module (pytest may import it twice, under two names, and
its fixtures then run in modules that never asked for them). Shared inputs live in the helper
modules beside the tests (builders.py, factories.py, strategies.py, attribution_inputs.py, ...),
shared fixtures in conftest.py.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def _imported_test_modules(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module:
            # `from tests.test_x import y` and `from tests import test_x` alike (and the same
            # from a folder: `from tests.api import test_api`).
            names = [node.module]
            if node.module == "tests" or node.module.startswith("tests."):
                names += [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] == "tests" or len(parts) == 1:
                found |= {part for part in parts if part.startswith("test_")}
    return found


def test_no_test_module_imports_another() -> None:
    imports = {
        path.relative_to(TESTS).as_posix(): _imported_test_modules(path)
        for path in sorted(TESTS.rglob("*.py"))
    }
    offenders = {module: names for module, names in imports.items() if names}
    assert offenders == {}, (
        "import shared inputs from tests/builders.py (or another helper module beside it), "
        "fixtures from conftest.py, not from another test module"
    )


def test_the_check_sees_both_spellings_of_a_test_module_import(tmp_path: Path) -> None:
    module = tmp_path / "test_x.py"
    module.write_text(
        "from tests.test_a import f\nfrom tests import test_b, builders\nimport tests.test_c\n"
        "from tests.builders import line\nfrom tests.api import test_d\n"
        "from tests.api.test_e import g\n"
    )
    assert _imported_test_modules(module) == {"test_a", "test_b", "test_c", "test_d", "test_e"}


def test_test_modules_live_in_a_folder_per_app() -> None:
    """tests/<app>/test_*.py (issue 26): a test module at the top of tests/ is in no room, and a
    folder without __init__.py would import its modules under their bare names, which two
    folders could share."""
    assert sorted(p.name for p in TESTS.glob("test_*.py")) == []
    folders = {p.parent for p in TESTS.rglob("test_*.py")}
    assert folders, "no test module found"
    assert sorted(str(f) for f in folders if not (f / "__init__.py").is_file()) == []
