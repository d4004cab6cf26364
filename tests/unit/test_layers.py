"""The layer check (tools/check_layers.py) passes on the package and fails on what it forbids."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tools.check_layers import LAYERS, LEAVES, main, problems, tool_problems

PACKAGE = Path(__file__).resolve().parents[2] / "zkconsumer"
TOOLS = PACKAGE.parent / "tools"


@pytest.fixture
def package(tmp_path: Path) -> Path:
    """A copy of the package's sources, to plant violations in."""
    copy = tmp_path / "zkconsumer"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    return copy


@pytest.fixture
def tools(tmp_path: Path) -> Path:
    """A copy of tools/'s Python files, to plant violations in."""
    copy = tmp_path / "tools"
    copy.mkdir()
    for path in TOOLS.glob("*.py"):
        shutil.copy(path, copy / path.name)
    return copy


def _plant(package: Path, module: str, line: str) -> None:
    path = package / module
    path.write_text(path.read_text(encoding="utf-8") + "\n" + line + "\n", encoding="utf-8")


def test_the_package_keeps_its_layers() -> None:
    assert problems(PACKAGE) == []
    assert main([str(PACKAGE)]) == 0


def test_every_module_is_in_a_layer() -> None:
    for path in PACKAGE.rglob("*.py"):
        top = path.relative_to(PACKAGE).parts[0].removesuffix(".py")
        assert top in LAYERS or top in LEAVES or top in ("__init__", "__main__"), path


def test_an_import_of_a_higher_layer_is_refused(package: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    _plant(package, "zk/paths.py", "from zkconsumer.consumer import stream  # noqa")
    assert main([str(package)]) == 1
    out = capsys.readouterr().out
    assert "zk/paths.py" in out and "imports zkconsumer.consumer.stream, on a higher layer" in out


def test_packages_of_one_layer_do_not_import_each_other(package: Path) -> None:
    _plant(package, "bridge/daemon.py", "from zkconsumer.ops import common  # noqa")
    assert any("zkconsumer.bridge.daemon imports zkconsumer.ops.common, on the same layer" in p
               for p in problems(package))


def test_the_operator_functions_do_not_import_the_migration(package: Path) -> None:
    # The migration builds on ops (delete_group, the Kafka store), not the reverse.
    _plant(package, "ops/groups.py", "from zkconsumer.migration import stores  # noqa")
    assert any("zkconsumer.ops.groups imports zkconsumer.migration.stores, on a higher layer"
               in p for p in problems(package))


def test_no_production_module_imports_the_development_stack(package: Path) -> None:
    # Below the stack the layers refuse it already; the CLI is above it, and only its
    # ``stack`` command (cli.app) may use it.
    _plant(package, "cli/groups.py", "from zkconsumer.stack import local  # noqa")
    _plant(package, "bridge/daemon.py", "from zkconsumer.stack import local  # noqa")
    found = problems(package)
    assert any("zkconsumer.cli.groups imports zkconsumer.stack.local, the development stack"
               in p for p in found)
    assert any("zkconsumer.bridge.daemon imports zkconsumer.stack.local, the development stack"
               in p for p in found)
    assert not any("zkconsumer.cli.app imports zkconsumer.stack" in p for p in found)


def test_a_leaf_imports_only_the_leaves_before_it(package: Path) -> None:
    _plant(package, "_types.py", "from zkconsumer import _config  # noqa")
    assert any("zkconsumer._types imports zkconsumer._config" in p for p in problems(package))


def test_nothing_imports_the_cli(package: Path) -> None:
    _plant(package, "ops/common.py", "import zkconsumer.cli.app  # noqa")
    assert any("imports zkconsumer.cli.app, on a higher layer" in p for p in problems(package))


def test_an_import_inside_a_function_is_refused(package: Path) -> None:
    _plant(package, "ops/common.py",
           "def _late() -> None:\n    from zkconsumer.zk.read import children  # noqa")
    assert any("zkconsumer.ops.common imports zkconsumer.zk.read inside a function" in p
               for p in problems(package))


def test_a_cycle_within_a_package_is_refused(package: Path) -> None:
    # consumer.stream imports consumer.partition; the reverse closes a cycle (same layer,
    # same package: only the cycle check sees it).
    _plant(package, "consumer/partition.py", "from zkconsumer.consumer import stream  # noqa")
    cycle = [p for p in problems(package) if p.startswith("import cycle:")]
    assert cycle and "zkconsumer.consumer.partition" in cycle[0]
    assert "zkconsumer.consumer.stream" in cycle[0]


def test_imports_for_type_checking_count_for_layers_and_cycles(package: Path) -> None:
    _plant(package, "consumer/partition.py",
           "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
           "    from zkconsumer.consumer import stream  # noqa")
    cycle = [p for p in problems(package) if p.startswith("import cycle:")]
    assert cycle and "zkconsumer.consumer.partition" in cycle[0]
    assert "zkconsumer.consumer.stream" in cycle[0]
    _plant(package, "zk/read.py", "if TYPE_CHECKING:\n    from zkconsumer.ops import common")
    assert any("zkconsumer.zk.read imports zkconsumer.ops.common" in p
               for p in problems(package))


def test_a_private_name_of_another_package_is_refused(package: Path) -> None:
    _plant(package, "ops/common.py", "from zkconsumer.zk.session import _no_chroot  # noqa")
    assert any("zkconsumer.ops.common imports _no_chroot from zkconsumer.zk.session: private "
               "to another package" in p for p in problems(package))
    # Within its own package it is the package's business.
    _plant(package, "zk/read.py", "from zkconsumer.zk.session import _no_chroot  # noqa")
    assert not any("zkconsumer.zk.read imports _no_chroot" in p for p in problems(package))


def test_the_tools_keep_their_rules() -> None:
    assert tool_problems(TOOLS) == []


def test_a_cycle_between_tools_is_refused(tools: Path) -> None:
    # tools.bench imports tools.bench_common; the reverse closes a cycle.
    _plant(tools, "bench_common.py", "from tools import bench  # noqa")
    cycle = [p for p in tool_problems(tools) if p.startswith("import cycle:")]
    assert cycle and "tools.bench" in cycle[0].split() and "tools.bench_common" in cycle[0]


def test_a_tool_importing_the_tests_is_refused(tools: Path) -> None:
    _plant(tools, "demo.py", "from tests.support import StackInfo  # noqa")
    assert any("tools.demo imports tests.support: tools never import the tests" in p
               for p in tool_problems(tools))


def test_a_tool_editing_sys_path_is_refused(tools: Path) -> None:
    _plant(tools, "demo.py", "sys.path.insert(0, str(ROOT))")
    _plant(tools, "soak.py", "sys.path = [str(ROOT), *sys.path]")
    found = tool_problems(tools)
    assert any("tools.demo edits sys.path" in p for p in found)
    assert any("tools.soak edits sys.path" in p for p in found)


def test_a_tool_import_inside_a_function_is_refused(tools: Path) -> None:
    _plant(tools, "demo.py", "def _late() -> None:\n    from tools import bench_procs  # noqa")
    _plant(tools, "soak.py",
           "def _late() -> None:\n    from zkconsumer.zk.read import children  # noqa")
    found = tool_problems(tools)
    assert any("tools.demo imports tools.bench_procs inside a function" in p for p in found)
    assert any("tools.soak imports zkconsumer.zk.read inside a function" in p for p in found)
    # A third-party module imported late (an optional or slow one) is the tool's business.
    _plant(tools, "bench.py", "def _late() -> None:\n    import pykafka  # noqa")
    assert not any("tools.bench imports pykafka" in p for p in tool_problems(tools))


def test_main_checks_the_tools_too(package: Path, tools: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    _plant(tools, "demo.py", "from tests import support  # noqa")
    assert main([str(package), str(tools)]) == 1
    assert "tools.demo imports tests.support" in capsys.readouterr().out
