"""The package as users get it: fast imports, a registry that everything lists from, layers that
import only downwards (docs/architecture.md), and (marked ``training``) a wheel installed outside the
checkout that runs fairseq-train with its own user dir and imports the Hugging Face callback."""

import ast
import contextlib
import io
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import nbest_eval
from nbest_eval.cli import build_parser
from nbest_eval.metrics import REGISTRY, is_metric_key
from nbest_eval.metrics.registry import markdown_table

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "nbest_eval"
HEAVY = ("torch", "fairseq", "transformers", "scipy", "matplotlib")
#: the layers, bottom first (docs/architecture.md): a module imports from its own folder (or, at the top of
#: the package, itself) and from lower layers only. A name is a top-level module or a folder of nbest_eval.
LAYERS = (
    ("version", "wording", "data", "stats"),
    ("prompt", "files"),
    ("metrics", "formats"),
    ("scorer",),
    ("significance", "processes"),
    ("signature",),
    ("api", "training"),
    ("__init__",),  # the package's face: what `import nbest_eval` gives
    ("analysis",),
    ("selection",),
    ("fairseq", "hf"),
    ("cli",),
    ("__main__",),
)
MAX_TOP_MODULES = 10


def test_import_and_help_load_no_framework():
    code = ("import contextlib, io, sys, nbest_eval, nbest_eval.cli\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    try:\n"
            "        nbest_eval.cli.main(['--help'])\n"
            "    except SystemExit:\n"
            "        pass\n"
            f"loaded = [m for m in {HEAVY!r} if m in sys.modules]\n"
            "sys.exit(f'loaded {loaded}' if loaded else 0)")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_help_points_to_the_metric_definitions():
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        build_parser().parse_args(["score", "--help"])
    assert "docs/metrics.md" in out.getvalue() and (REPO / "docs" / "metrics.md").is_file()


def test_readme_metric_table_is_the_registry():
    assert markdown_table() in (REPO / "README.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("key, known", [("map", True), ("p10", True), ("p0", False), ("bleu_allx5", True),
                                        ("bleu_0x1", False), ("ndcg", False), ("nope", False)])
def test_is_metric_key(key, known):
    assert is_metric_key(key) is known


def test_every_registered_key_is_documented():
    text = (REPO / "docs" / "metrics.md").read_text(encoding="utf-8")
    for spec in REGISTRY:
        assert f"`{spec.pattern}`" in text, spec.pattern


def _modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(REPO).with_suffix("").parts
        yield ".".join(parts[:-1] if parts[-1] == "__init__" else parts), path


def test_every_folder_is_a_package_that_ships():
    """find_packages() (setup.py) skips a folder without __init__.py: the wheel would lack it."""
    folders = {path.parent for path in PACKAGE.rglob("*.py")}
    assert not [str(f.relative_to(REPO)) for f in folders if not (f / "__init__.py").exists()]


def test_the_top_of_the_package_is_a_small_core():
    top = sorted(path.name for path in PACKAGE.glob("*.py"))
    assert len(top) <= MAX_TOP_MODULES, top


def _unit(module: str) -> str:
    """The layer unit of a module: its folder under nbest_eval, or its own name at the top."""
    parts = module.split(".")
    return "__init__" if len(parts) == 1 else parts[1]


def test_every_module_has_a_layer():
    placed = {unit for layer in LAYERS for unit in layer}
    assert not {_unit(name) for name, _ in _modules()} - placed


def _imports(name: str, path: Path):
    """nbest_eval modules that ``name`` imports anywhere in its file (function-level imports too)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    modules = {m for m, _ in _modules()}
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
        else:
            continue
        yield from (t for t in targets if t in modules and t != name)


def test_no_import_cycle_inside_the_package():
    graph = {name: set(_imports(name, path)) for name, path in _modules()}
    state = {}

    def visit(node, stack):
        state[node] = "open"
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                pytest.fail("import cycle: " + " -> ".join(stack[stack.index(nxt):] + [nxt]))
            if nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])


def test_layers_import_only_downwards():
    level = {unit: n for n, layer in enumerate(LAYERS) for unit in layer}
    upward = sorted(f"{name} imports {target}" for name, path in _modules() for target in _imports(name, path)
                    if _unit(name) != _unit(target) and level[_unit(target)] >= level[_unit(name)])
    assert not upward


def test_python_dash_m_is_the_cli():
    result = subprocess.run([sys.executable, "-m", "nbest_eval", "metrics"], capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout.startswith("map ")


# -- a wheel installed outside the checkout ----------------------------------------------------------------

@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """The package built as a wheel from a copy of the checkout and installed into a folder of its own
    (pip --target), with the frameworks taken from this environment."""
    pytest.importorskip("fairseq", reason="fairseq is not installed (make venv installs it)")
    root = tmp_path_factory.mktemp("wheel")
    source = root / "source"
    shutil.copytree(PACKAGE, source / "nbest_eval", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("setup.py", "pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input"]
    subprocess.run(pip + ["wheel", "--no-deps", "--no-build-isolation", "-w", str(root / "dist"), str(source)],
                   check=True, capture_output=True)
    wheel = next((root / "dist").glob("nbest_eval-*.whl"))
    subprocess.run(pip + ["install", "--no-deps", "--target", str(root / "site"), str(wheel)], check=True,
                   capture_output=True)
    work = root / "work"
    work.mkdir()
    env = {**os.environ, "PYTHONPATH": str(root / "site"), "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
    return root / "site", work, env


@pytest.mark.training
def test_installed_wheel_runs_fairseq_with_its_user_dir(installed):
    site, work, env = installed

    def python(*args, **kwargs):
        return subprocess.run([sys.executable, *args], cwd=work, env=env, capture_output=True, text=True,
                              check=True, **kwargs).stdout

    user_dir = python("-m", "nbest_eval", "user-dir").strip()
    assert Path(user_dir).is_dir() and Path(user_dir).is_relative_to(site)
    assert python("-c", "import nbest_eval.hf as h; print(h.__file__); print(h.NBestEvalCallback.__name__)"
                  ).split() == [str(site / "nbest_eval" / "hf" / "__init__.py"), "NBestEvalCallback"]
    python("-m", "nbest_eval", "synth", "data", "--train-pairs", "400", "--valid-prompts", "12")
    bin_dir = Path(sys.executable).parent
    subprocess.run([str(bin_dir / "fairseq-preprocess"), "--source-lang", "src", "--target-lang", "tgt",
                    "--trainpref", "data/train", "--validpref", "data/valid", "--destdir", "bin", "--workers", "1",
                    "--joined-dictionary"],
                   cwd=work, env=env, check=True, capture_output=True)
    args = shlex.split((REPO / "configs" / "tiny_transformer.args").read_text(), comments=True)
    train = subprocess.run([str(bin_dir / "fairseq-train"), "bin", "--user-dir", user_dir, *args,
                            "--nbest-gold", "data/valid.gold.txt", "--max-epoch", "1", "--save-dir", "ckpt"],
                           cwd=work, env=env, capture_output=True, text=True)
    assert train.returncode == 0, train.stdout[-3000:] + train.stderr[-3000:]
    log = train.stdout + train.stderr
    assert '"valid_map"' in log and '"valid_nbest_gen_s"' in log  # the valid line (--log-format json)
    assert str(REPO) not in log  # nothing came from the checkout


@pytest.mark.parametrize("old, new", sorted(nbest_eval.MOVED.items()))
def test_a_moved_module_imports_by_its_old_path_for_one_release(old, new):
    """The old path gives the very module of the new one (a monkeypatch through either reaches both), and
    says where it went; in a fresh process, so that neither path was imported before."""
    code = (f"import importlib, warnings\n"
            f"with warnings.catch_warnings(record=True) as caught:\n"
            f"    warnings.simplefilter('always')\n"
            f"    old = importlib.import_module('nbest_eval.{old}')\n"
            f"assert old is importlib.import_module('nbest_eval.{new}'), old\n"
            f"assert any('nbest_eval.{new}' in str(w.message) and w.category is DeprecationWarning "
            f"for w in caught), [str(w.message) for w in caught]\n")
    subprocess.run([sys.executable, "-c", code], check=True)
