"""The tests, benchmarks and scripts reach only names that warpforge's modules define.

GPU tests skip on machines without a GPU, CI's included, so a renamed or removed module
constant that only a GPU test reads would pass CI and fail on the first GPU run (the
seventeenth session folded ``cross_entropy._FLAG_WORDS_MAX_CHUNKS`` into ``_split_rows`` and
ten GPU tests still read it). This reads every test file's syntax tree and checks each
``module.NAME`` and ``monkeypatch.setattr(module, "NAME", ...)`` whose ``module`` is a
warpforge module imported under that name (by ``import``, ``from ... import`` or
``importlib.import_module``) and never rebound in the file.
"""

from __future__ import annotations

import ast
import importlib
import re
import types
from pathlib import Path

import pytest

TESTS = Path(__file__).parent


def _module(name: str) -> types.ModuleType | None:
    try:
        module = importlib.import_module(name)
    except ImportError:
        return None
    return module


def _module_aliases(tree: ast.Module) -> dict[str, str]:
    """Local name -> the warpforge module it names, for names bound only by imports."""
    aliases: dict[str, str] = {}
    rebound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("warpforge"):
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                if _module(full) is not None:
                    aliases[alias.asname or alias.name] = full
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("warpforge") and alias.asname:
                    aliases[alias.asname] = alias.name
        elif isinstance(node, ast.Assign):
            value = node.value
            imported = (
                isinstance(value, ast.Call)
                and isinstance(value.func, ast.Attribute)
                and value.func.attr == "import_module"
                and value.args
                and isinstance(value.args[0], ast.Constant)
                and str(value.args[0].value).startswith("warpforge")
            )
            for target in node.targets:
                if isinstance(target, ast.Name):
                    if imported and len(node.targets) == 1:
                        aliases[target.id] = str(value.args[0].value)  # type: ignore[union-attr]
                    else:
                        rebound.add(target.id)
        elif isinstance(
            node,
            (ast.For, ast.comprehension, ast.With, ast.AugAssign, ast.AnnAssign, ast.NamedExpr),
        ):
            targets = [node.target] if hasattr(node, "target") else []
            if isinstance(node, ast.With):
                targets = [item.optional_vars for item in node.items if item.optional_vars]
            rebound.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, ast.arg):
            rebound.add(node.arg)
    return {name: module for name, module in aliases.items() if name not in rebound}


def _missing_names(path: Path, root: Path = TESTS) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    aliases = _module_aliases(tree)
    missing = []
    for node in ast.walk(tree):
        reached: tuple[str, str] | None = None
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            reached = (node.value.id, node.attr)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "setattr"
            and len(node.args) >= 2
            and isinstance(node.args[0], ast.Name)
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
        ):
            reached = (node.args[0].id, node.args[1].value)
        if reached is None or reached[0] not in aliases:
            continue
        module = _module(aliases[reached[0]])
        if module is not None and not hasattr(module, reached[1]):
            name = f"{aliases[reached[0]]}.{reached[1]}"
            missing.append(f"{path.relative_to(root)}:{node.lineno}: {name}")
    return missing


ROOT = TESTS.parent
GPU_SCRIPTS = sorted([*(ROOT / "benchmarks").rglob("*.py"), *(ROOT / "scripts").rglob("*.py")])
"""The benchmarks and scripts, most of which run only on the GPU machine, rot the same way."""


@pytest.mark.parametrize(
    "path", sorted(TESTS.rglob("test_*.py")), ids=lambda p: str(p.relative_to(TESTS))
)
def test_tests_reach_only_defined_names(path: Path) -> None:
    assert _missing_names(path) == []


@pytest.mark.parametrize("path", GPU_SCRIPTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_benchmarks_and_scripts_reach_only_defined_names(path: Path) -> None:
    assert _missing_names(path, ROOT) == []


def test_a_removed_name_is_found(tmp_path: Path) -> None:
    """The check itself: a stale constant, read directly and through monkeypatch, is reported;
    a defined one and a rebound alias are not."""
    source = (
        "import importlib\n"
        "ce = importlib.import_module('warpforge.ops.cross_entropy')\n"
        "from warpforge.ops import _split_rows as rows\n"
        "def test_x(monkeypatch):\n"
        "    assert ce._NO_SUCH_CONSTANT\n"
        "    monkeypatch.setattr(rows, 'NO_SUCH_PLAN', 1)\n"
        "    assert rows.FLAG_WORDS_MAX_CHUNKS\n"
        "from warpforge.ops import norm as kernels\n"
        "def test_y():\n"
        "    kernels = {}\n"
        "    kernels.get('x')\n"
        "from warpforge.blueprint import problems as p\n"
        "names = [p.name for p in []]\n"
    )
    path = tmp_path / "_stale_probe_test.py"
    path.write_text(source)
    assert _missing_names(path, tmp_path) == [
        "_stale_probe_test.py:5: warpforge.ops.cross_entropy._NO_SUCH_CONSTANT",
        "_stale_probe_test.py:6: warpforge.ops._split_rows.NO_SUCH_PLAN",
    ]


def _planned_call_scripts() -> list[Path]:
    """The device-call scripts that will run again: every script but the sessions' call plans,
    and the newest plan (older plans record what ran then, against the files of then)."""
    scripts = sorted((ROOT / "scripts").rglob("*.sh"))
    plans = [p for p in scripts if re.fullmatch(r"session\d+_calls\.sh", p.name)]
    newest = max(plans, key=lambda p: int(re.sub(r"\D", "", p.name)), default=None)
    return [p for p in scripts if p not in plans or p == newest]


REPO_PATH = re.compile(r"\b(?:tests|benchmarks|scripts)/[\w./-]+\.(?:py|sh)\b")


@pytest.mark.parametrize("path", _planned_call_scripts(), ids=lambda p: str(p.relative_to(ROOT)))
def test_device_scripts_name_only_existing_files(path: Path) -> None:
    """A device call that names a missing test file runs nothing and still costs its start-up
    (the nineteenth session lost one to ``tests/ops/test_norm_fwd_split.py``)."""
    named = sorted(set(REPO_PATH.findall(path.read_text())))
    assert [name for name in named if not (ROOT / name).exists()] == []
