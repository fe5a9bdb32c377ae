"""The test suite's own rules (issue 8): inputs come from fixtures/ or tests/builders.py, and a
test module never imports another test module (pytest may import it twice, under two names, and
its fixtures then run in modules that never asked for them). Shared inputs live in the helper
modules beside the tests (builders.py, factories.py, strategies.py, attribution_inputs.py, ...),
shared fixtures in conftest.py.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def _imported_test_modules(path: Path) -> set[str]:
    found: set[str] = set()
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


def test_no_test_module_imports_another() -> None:
    imports = {path.stem: _imported_test_modules(path) for path in sorted(TESTS.glob("*.py"))}
    offenders = {module: names for module, names in imports.items() if names}
    assert offenders == {}, (
        "import shared inputs from tests/builders.py (or another helper module beside it), "
        "fixtures from conftest.py, not from another test module"
    )


def test_the_check_sees_both_spellings_of_a_test_module_import(tmp_path: Path) -> None:
    module = tmp_path / "test_x.py"
    module.write_text(
        "from tests.test_a import f\nfrom tests import test_b, builders\nimport tests.test_c\n"
        "from tests.builders import line\n"
    )
    assert _imported_test_modules(module) == {"test_a", "test_b", "test_c"}
