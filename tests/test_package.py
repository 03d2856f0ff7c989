"""Tests of the package surface: explicit re-exports, lazy imports and typing marker."""

import importlib
import importlib.resources
import json
import subprocess
import sys

import pytest
import torch

import typedrl

_LAZY_PACKAGES = ("typedrl", "typedrl.ppo", "typedrl.apg", "typedrl.shac", "typedrl.policies")
# Gymnasium is light: import typedrl imports it to register the built-in envs.
_HEAVY = ("torch", "tensordict", "lightning", "lightning_fabric")


def test_all_names_resolve() -> None:
    """Every name in typedrl.__all__ exists."""
    missing = [name for name in typedrl.__all__ if not hasattr(typedrl, name)]
    assert missing == []


@pytest.mark.parametrize("package", _LAZY_PACKAGES)
def test_lazy_packages_export_every_name(package: str) -> None:
    """Each lazily re-exporting package serves and lists every name of its __all__."""
    module = importlib.import_module(package)
    names: list[str] = module.__all__
    assert [name for name in names if not hasattr(module, name)] == []
    assert set(names) <= set(dir(module))
    with pytest.raises(AttributeError, match="no attribute 'not_a_name'"):
        _ = module.not_a_name


def _heavy_modules_after(code: str) -> list[str]:
    """Run ``code`` in a fresh interpreter and list the heavy packages it imported."""
    report = f"import json, sys; print(json.dumps([m for m in {_HEAVY!r} if m in sys.modules]))"
    result = subprocess.run(
        [sys.executable, "-c", f"{code}\n{report}"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    found: list[str] = json.loads(result.stdout.strip().splitlines()[-1])
    return found


def test_importing_the_command_imports_no_torch() -> None:
    """``import typedrl.cli._main`` (every subcommand's parser) loads no torch stack."""
    assert _heavy_modules_after("import typedrl.cli._main") == []


@pytest.mark.parametrize("argv", [["--version"], ["--help"], ["train", "--help"]])
def test_version_and_help_import_no_torch(argv: list[str]) -> None:
    """``typedrl --version`` / ``--help`` print without importing torch or tensordict."""
    code = (
        "import contextlib, io\n"
        "from typedrl.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        f"    main({argv!r})"
    )
    assert _heavy_modules_after(code) == []


def test_info_imports_torch_alone_and_only_for_a_gpu_build() -> None:
    """``typedrl info`` imports neither tensordict nor Lightning, and torch only to count GPUs.

    A CPU build of torch is known from its version file, so nothing heavy loads.
    """
    code = (
        "import contextlib, io\n"
        "from typedrl.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    main(['info'])"
    )
    gpu_build = torch.version.cuda is not None or torch.version.hip is not None
    assert _heavy_modules_after(code) == (["torch"] if gpu_build else [])


def test_reading_a_tuned_config_imports_no_torch() -> None:
    """The tuned configs and their dataclasses load without torch (the parser reads them)."""
    code = "from typedrl import configs; configs.load('ppo', 'CartPole-v1')"
    assert _heavy_modules_after(code) == []


def test_ships_py_typed() -> None:
    """The package ships the PEP 561 marker so users' type checkers read its types."""
    assert importlib.resources.files("typedrl").joinpath("py.typed").is_file()
