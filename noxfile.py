"""Developer and CI sessions: ``nox`` runs everything CI runs; ``nox -s NAME`` one session.

Every session installs the package with ``constraints.txt``, which pins the
CPU build of torch used in CI (an unpinned torch would pull a CUDA build of
several gigabytes). Virtual environments are reused between runs; pass
``-R`` to skip reinstalling altogether. Arguments after ``--`` go to the tool.
"""

import os
from pathlib import Path

import nox

nox.needs_version = ">=2024.10.9"
nox.options.default_venv_backend = "venv"
nox.options.reuse_existing_virtualenvs = True
nox.options.error_on_missing_interpreters = False
nox.options.sessions = ["lint", "typecheck", "tests", "property_tests", "docs"]

ROOT = Path(__file__).parent
PYPROJECT = nox.project.load_toml(ROOT / "pyproject.toml")
CONSTRAINTS = ("-c", str(ROOT / "constraints.txt"))


def _install(session: nox.Session, *groups: str, package: bool = True) -> None:
    """Install the package (editable) and the named dependency groups under the constraints."""
    requirements = [
        req for group in groups for req in nox.project.dependency_groups(PYPROJECT, group)
    ]
    targets = ["-e", "."] if package else []
    session.install(*CONSTRAINTS, *targets, *requirements)


@nox.session
def tests(session: nox.Session) -> None:
    """Unit, integration and doc tests with jaxtyping + beartype shape checks on."""
    _install(session, "test")
    session.run("pytest", *session.posargs)


@nox.session
def property_tests(session: nox.Session) -> None:
    """Hypothesis property tests: profile ``ci`` under CI, else ``dev``; HYPOTHESIS_PROFILE wins."""
    _install(session, "test")
    profile = os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev")
    session.run(
        "pytest",
        "property_tests",
        *session.posargs,
        env={"HYPOTHESIS_PROFILE": profile},
    )


@nox.session
def typecheck(session: nox.Session) -> None:
    """Run mypy --strict over src, tests (static type tests included), property_tests, noxfile."""
    _install(session, "typecheck")
    session.run("mypy", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """Run ruff lint and the ruff format check."""
    _install(session, "lint", package=False)
    session.run("ruff", "check", *session.posargs)
    session.run("ruff", "format", "--check")


@nox.session
def docs(session: nox.Session) -> None:
    """Build the HTML docs with warnings as errors (into docs/_build/html)."""
    _install(session, "docs")
    session.run(
        "sphinx-build",
        "-W",
        "--keep-going",
        "-b",
        "html",
        "docs",
        "docs/_build/html",
        *session.posargs,
    )
