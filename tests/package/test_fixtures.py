"""Each fixture name has one meaning across the suite (conftest.py's promise): no name is defined as a
fixture in two test files, so a test never gets another folder's fixture of the same name by accident."""

import ast
from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def is_fixture(decorator: ast.expr) -> bool:
    """``@pytest.fixture`` or ``@pytest.fixture(...)``."""
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    return isinstance(target, ast.Attribute) and target.attr == "fixture"


def fixture_name(function: ast.FunctionDef) -> str:
    """The name a test asks for: ``name=`` of the decorator if given, else the function's name."""
    for decorator in function.decorator_list:
        if isinstance(decorator, ast.Call):
            for keyword in decorator.keywords:
                if keyword.arg == "name" and isinstance(keyword.value, ast.Constant):
                    return keyword.value.value
    return function.name


def fixtures(source: str) -> set:
    """The fixture names a test module defines."""
    return {fixture_name(node) for node in ast.walk(ast.parse(source))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(map(is_fixture, node.decorator_list))}


def defined_twice(sources: dict) -> dict:
    """{fixture name: the files defining it} for each name that more than one file defines."""
    where = defaultdict(list)
    for path, source in sources.items():
        for name in fixtures(source):
            where[name].append(path)
    return {name: paths for name, paths in where.items() if len(paths) > 1}


def test_no_fixture_is_defined_in_two_files():
    sources = {str(path.relative_to(TESTS)): path.read_text(encoding="utf-8") for path in sorted(TESTS.rglob("*.py"))}
    assert defined_twice(sources) == {}


def test_a_fixture_defined_twice_is_found():
    first = ("import pytest\n\n@pytest.fixture\ndef gold():\n    pass\n\n"
             "@pytest.fixture(scope='module')\ndef run():\n    pass\n")
    second = "import pytest\n\nclass T:\n    @pytest.fixture(name='run')\n    def other(self):\n        pass\n"
    plain = "def gold():\n    pass\n"  # a helper of the same name is no fixture
    assert defined_twice({"a.py": first, "b.py": second, "c.py": plain}) == {"run": ["a.py", "b.py"]}
