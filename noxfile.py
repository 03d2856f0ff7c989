"""Developer and CI sessions: ``nox`` runs everything CI runs; ``nox -s NAME`` one session.

Every session installs the package with ``constraints.txt``, which pins the
CPU build of torch used in CI (an unpinned torch would pull a CUDA build of
several gigabytes). Virtual environments are reused between runs; pass
``-R`` to skip reinstalling altogether. Arguments after ``--`` go to the tool.
"""

import os
import re
from pathlib import Path

import nox

nox.needs_version = ">=2024.10.9"
nox.options.default_venv_backend = "venv"
nox.options.reuse_existing_virtualenvs = True
nox.options.error_on_missing_interpreters = False
nox.options.sessions = ["lint", "typecheck", "tests", "lightning", "docs"]

ROOT = Path(__file__).parent
PYPROJECT = nox.project.load_toml(ROOT / "pyproject.toml")
CONSTRAINTS = ("-c", str(ROOT / "constraints.txt"))
PARALLEL = ("-n", "auto", "--dist", "worksteal")
"""pytest-xdist: one worker per core, idle workers taking queued tests from busy ones."""


def _install(session: nox.Session, *groups: str, package: bool = True) -> None:
    """Install the package (editable) and the named dependency groups under the constraints."""
    requirements = [
        req for group in groups for req in nox.project.dependency_groups(PYPROJECT, group)
    ]
    targets = ["-e", "."] if package else []
    session.install(*CONSTRAINTS, *targets, *requirements)


def _hypothesis_profile() -> dict[str, str]:
    """Hypothesis profile ``ci`` under CI, else ``dev``; a set HYPOTHESIS_PROFILE wins."""
    return {
        "HYPOTHESIS_PROFILE": os.environ.get(
            "HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"
        )
    }


@nox.session
def tests(session: nox.Session) -> None:
    """Unit, integration, doc and property tests, with jaxtyping + beartype shape checks on.

    One pytest run over ``tests``, ``property_tests`` and the doctests of ``src``
    (pyproject's ``testpaths``): one install and one pool of workers for both
    suites. Paths after ``--`` run those alone.
    """
    _install(session, "test")
    session.run(
        "pytest",
        *PARALLEL,
        "--ignore=tests/lightning_package",
        *session.posargs,
        env=_hypothesis_profile(),
    )


@nox.session
def lightning(session: nox.Session) -> None:
    """Tests that need the ``lightning`` package (tests/lightning_package/), in their own venv.

    With ``lightning`` installed, ``lightning_fabric`` imports torchmetrics in
    every process, which would slow each of the main suite's processes by 2-3 s.
    """
    _install(session, "lightning")
    session.run("pytest", "tests/lightning_package", "-p", "no:cacheprovider", *session.posargs)


@nox.session(default=False)
def property_tests(session: nox.Session) -> None:
    """Only the hypothesis property tests (the default ``tests`` session runs them too)."""
    _install(session, "test")
    session.run("pytest", "property_tests", *PARALLEL, *session.posargs, env=_hypothesis_profile())


@nox.session
def typecheck(session: nox.Session) -> None:
    """Run mypy --strict over pyproject's ``files``: src, the test folders, conftest.py, noxfile."""
    _install(session, "typecheck")
    session.run("mypy", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """Run ruff lint and the ruff format check."""
    _install(session, "lint", package=False)
    session.run("ruff", "check", *session.posargs)
    session.run("ruff", "format", "--check")


THIRDPARTY_ENVS = (
    "ale-py",
    "opencv-python-headless",
    "minigrid",
    "gymnasium[box2d]",
    "gymnasium-robotics",
    "highway-env",
    "shimmy[dm-control]",
    "envpool",
)
"""The env packages of the third-party matrix (docs/guides/gymnasium.rst); opencv for
Gymnasium's AtariPreprocessing. Never part of the ``test`` group."""


@nox.session(default=False)
def thirdparty(session: nox.Session) -> None:
    """The third-party env matrix: check-env and a short train per row (tests/thirdparty/).

    Installs the package, the test group and the matrix's env packages in one
    resolution under the constraints (the test group's MuJoCo pin then picks the
    dm_control release built for it), and runs the tests marked ``thirdparty``.
    """
    requirements = nox.project.dependency_groups(PYPROJECT, "test")
    session.install(*CONSTRAINTS, "-e", ".", *requirements, *THIRDPARTY_ENVS)
    session.run(
        "pytest", "tests/thirdparty", "-m", "thirdparty", "-p", "no:cacheprovider", *session.posargs
    )


ISAACLAB_RUNTIME = (
    "newton[sim]==1.6.1",
    "warp-lang==1.17.0",
    "usd-core",
    "newton-usd-schemas",
    "prettytable",
    "psutil",
    "trimesh",
    "einops",
    "lazy_loader",
    "Jinja2",
    "scipy",
    "h5py",
    "hydra-core",
    "toml",
)
"""Isaac Lab 3's kit-less runtime, installed by name: its wheel declares Python >= 3.12 and
torch 2.11.0, but runs on Python 3.11 with the pinned CPU torch."""


ISAACLAB_TOOLS = frozenset({"pytest", "hypothesis", "mypy", "ruff"})
"""What the isaaclab session installs from the dependency groups."""


def _install_step(session: nox.Session, what: str, *args: str) -> None:
    """Run one pip install; a failure ends the session with one line naming what is missing."""
    try:
        session.install(*args, silent=True)
    except nox.command.CommandFailed as err:
        session.error(f"isaaclab: could not install {what} ({err.reason}); see the pip log above")


@nox.session(python="3.11", default=False)
def isaaclab(session: nox.Session) -> None:
    """Real Isaac Lab 3 cartpole tasks, kit-less on Newton, on the CPU (own env, about 2 GB).

    Not part of the default run or of CI. Installs Isaac Lab's runtime by name, the
    ``isaaclab==3.0.0`` wheel without its declared dependencies, and typedrl; then runs
    mypy and ruff over tests_isaaclab/ and pytest on it: the conformance checker on both
    cartpole tasks, the step-by-step comparison with the raw env, and PPO trained to the
    task's solved level through the Python API and through ``typedrl train``.
    """
    for requirement in ISAACLAB_RUNTIME:
        _install_step(session, requirement, *CONSTRAINTS, requirement)
    _install_step(
        session,
        "isaaclab==3.0.0",
        *CONSTRAINTS,
        "--no-deps",
        "--ignore-requires-python",
        "isaaclab==3.0.0",
    )
    # Only the tools this session runs: other test extras pin packages (mujoco) that
    # Newton's MuJoCo-Warp solver needs at other versions.
    tools = [
        req
        for group in ("test", "typecheck", "lint")
        for req in nox.project.dependency_groups(PYPROJECT, group)
        if re.split(r"[<>=!~\[ ;]", req, maxsplit=1)[0] in ISAACLAB_TOOLS
    ]
    _install_step(session, "typedrl and its test tools", *CONSTRAINTS, "-e", ".", *tools)
    try:
        session.run("python", "-c", "import isaaclab_tasks, mujoco_warp, newton, warp", silent=True)
    except nox.command.CommandFailed:
        session.error(
            "isaaclab: Isaac Lab or its Newton physics does not import (isaaclab_tasks, "
            "mujoco_warp); remove .nox/isaaclab and run the session again"
        )
    session.run("mypy", "tests_isaaclab")
    session.run("ruff", "check", "tests_isaaclab")
    # One torch thread: PPO's updates slow down tenfold when OpenMP threads compete
    # for a loaded CPU; the simulation itself runs on one thread.
    session.run(
        "pytest",
        "tests_isaaclab",
        "-p",
        "no:cacheprovider",
        *session.posargs,
        env={"OMP_NUM_THREADS": "1"},
    )


NEWTON_TOOLS = frozenset({"pytest", "hypothesis", "mypy", "ruff"})
"""What the newton session installs from the dependency groups."""


@nox.session(default=False)
def newton(session: nox.Session) -> None:
    """Real Newton physics: typedrl.envs.newton's tasks and models (own env, about 1.7 GB).

    Not part of the default run or of CI. Installs typedrl with its ``newton`` and
    ``newton-usd`` extras (Newton 1.8 on Warp 1.19, OpenUSD) and the test tools, then
    runs mypy and ruff over tests_newton/ and pytest on it: the differentiable-env
    checker, gradients against central differences in contact, per-row independence,
    seeding, state_dict round trips, the float64 refusal and models read from URDF and
    USD. Warp compiles its kernels on first use (minutes;
    cached afterwards).
    """
    # Only the test tools: the test group's pins (mujoco) are not needed here.
    tools = [
        req
        for group in ("test", "typecheck", "lint")
        for req in nox.project.dependency_groups(PYPROJECT, group)
        if re.split(r"[<>=!~\[ ;]", req, maxsplit=1)[0] in NEWTON_TOOLS
    ]
    session.install(*CONSTRAINTS, "-e", ".[newton,newton-usd]", *tools)
    session.run("mypy", "tests_newton")
    session.run("ruff", "check", "tests_newton")
    session.run("pytest", "tests_newton", "-p", "no:cacheprovider", *session.posargs)


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


BENCHMARK_PEERS = ("stable-baselines3", "rsl-rl-lib", "matplotlib", "gymnasium[mujoco]")
"""The reference implementations and tools the benchmarks compare against or plot with;
installed in this session's env, never in the package's dependencies (stable-baselines3
is in the test group too: the tests train it on the built-in envs' Gymnasium ids)."""


@nox.session(default=False)
def benchmarks(session: nox.Session) -> None:
    """Run every benchmark and write docs/benchmark_report.rst (``-- --quick``: < 10 min)."""
    session.install(*CONSTRAINTS, "-e", ".[mujoco-torch]", *BENCHMARK_PEERS)
    session.run("python", "benchmarks/report.py", *session.posargs)
