"""Tests of the docs: every Python block runs, every ``typedrl`` command line parses."""

import argparse
import re
import shlex
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from typedrl import configs
from typedrl.cli._main import build_parser

ROOT = Path(__file__).resolve().parents[1]

_TINY_PPO = (("total_timesteps=100_000", "total_timesteps=512"),)
"""Substitutions of a page's budgets: the only changes made to a block before it runs."""

RUN: dict[str, tuple[tuple[str, str], ...]] = {
    "README.md": (*_TINY_PPO, ("total_timesteps=200_000", "total_timesteps=4096")),
    "docs/quickstart.rst": (),
    "docs/testing.rst": (),
    "docs/guides/buffers.rst": (),
    "docs/guides/normalization.rst": (),
    "docs/guides/gymnasium.rst": (
        ('device="cuda"', 'device="cpu"'),
        ('"typedrl/CartPole-v0", seed=0)', '"typedrl/CartPole-v0", n_steps=64, seed=0)'),
        ("total_timesteps=50_000", "total_timesteps=64"),
    ),
    "docs/guides/differentiable_envs.rst": (),
    "docs/guides/scheduled_envs.rst": (("total_updates=32", "total_updates=2"),),
    "docs/guides/apg_rollouts.rst": (
        ("total_updates=100", "total_updates=2"),
        ("total_updates=50", "total_updates=2"),
    ),
    "docs/guides/train_ppo.rst": (*_TINY_PPO, ("eval_every_steps=20_000", "eval_every_steps=256")),
    "docs/guides/train_apg.rst": (
        ("total_timesteps=200_000", "total_timesteps=4096"),
        ("total_timesteps=400_000", "total_timesteps=8192"),
        ("eval_every_steps=50_000", "eval_every_steps=2048"),
        ("cosine_run(100)", "cosine_run(2)"),
        ("cosine_run(200)", "cosine_run(4)"),
        ("total_timesteps=50_000", "total_timesteps=2048"),
    ),
    "docs/guides/shac.rst": (
        ("total_updates=400", "total_updates=2"),
        ("eval_episodes=64", "eval_episodes=8"),
    ),
    "docs/guides/ahac.rst": (("total_updates=20", "total_updates=2"),),
    "docs/guides/trainer_core.rst": (("iterations=200,", "iterations=4,"),),
    "docs/guides/own_policy.rst": (("total_timesteps=20_000", "total_timesteps=512"),),
    "docs/guides/partially_observed.rst": (*_TINY_PPO,),
}
"""Pages whose Python blocks run, in order and in one namespace, in a fresh folder."""

NOT_RUN: dict[str, str] = {
    "docs/contracts.rst": "fragments naming the contract's calls (env, policy: any implementation)",
    "docs/guides/check_env.rst": "MyVecEnv and MyDifferentiableEnv stand for the reader's own env",
    "docs/guides/checkpoints.rst": "fragments: the policy, optimizer and counters are the reader's",
    "docs/guides/isaaclab.rst": "needs Isaac Lab (the isaaclab nox session)",
    "docs/guides/differentiable_locomotion.rst": "needs Newton (the newton nox session)",
    "docs/guides/multiprocess.rst": "a script that launches its DDP processes (fabric.launch)",
    "docs/guides/cluster.rst": "a script that torchrun or srun starts on every node",
    "docs/guides/multiprocess_apg.rst": "a script that launches its DDP processes (fabric.launch)",
    "docs/guides/differentiable_mujoco.rst": "needs the mujoco extra and minutes of training",
    "docs/cli.rst": "runs onnxruntime on a policy.onnx exported by typedrl export",
    "docs/guides/own_trainer.rst": (
        "registers the reader's installed my_search package; its module is "
        "tests/cli/random_search.py, which tests/test_algorithms.py registers and "
        "tests/cli/test_own_trainer.py installs, trains, resumes, evaluates and exports"
    ),
}
"""Pages whose Python blocks are not programs, and why; every other block runs."""

SKIPPED: dict[str, str] = {
    "docs/guides/trainer_core.rst: from typedrl.ppo import PPOAgent": (
        "the arguments every trainer takes: env, config, fabric and eval_env are the reader's"
    ),
    "docs/guides/trainer_core.rst: agent = PPOAgent(": "resumes the reader's earlier PPO run",
    "docs/guides/gymnasium.rst: from gymnasium.utils.env_checker import check_env": (
        "check_env's advice is a warning, an error under pytest; "
        "tests/envs/builtin/test_gymnasium_env.py runs it on every light env"
    ),
}
"""Blocks of the pages in RUN that are fragments (``page: first line``), and why."""


@dataclass(frozen=True)
class Block:
    """One code block of a page."""

    page: str
    line: int
    language: str
    code: str


def _rst_blocks(page: str) -> list[Block]:
    lines = (ROOT / page).read_text().split("\n")
    blocks: list[Block] = []
    index = 0
    while index < len(lines):
        match = re.match(r"^(\s*)\.\. code-block:: (\w+)\s*$", lines[index])
        if match is None:
            index += 1
            continue
        indent, language = len(match.group(1)), match.group(2)
        start = index + 1
        while start < len(lines) and (not lines[start].strip() or ":" in lines[start][:8]):
            start += 1
        end = start
        while end < len(lines) and (
            not lines[end].strip() or len(lines[end]) - len(lines[end].lstrip()) > indent
        ):
            end += 1
        code = textwrap.dedent("\n".join(lines[start:end])).strip() + "\n"
        blocks.append(Block(page=page, line=start + 1, language=language, code=code))
        index = end
    return blocks


def _markdown_blocks(page: str) -> list[Block]:
    text = (ROOT / page).read_text()
    return [
        Block(page=page, line=text[: m.start()].count("\n") + 2, language=m[1], code=m[2])
        for m in re.finditer(r"^```(\w+)\n(.*?)^```", text, re.MULTILINE | re.DOTALL)
    ]


def _blocks(page: str) -> list[Block]:
    return _markdown_blocks(page) if page.endswith(".md") else _rst_blocks(page)


def _all_blocks() -> list[Block]:
    pages = sorted(str(path.relative_to(ROOT)) for path in (ROOT / "docs").rglob("*.rst"))
    blocks = [block for page in pages for block in _rst_blocks(page)]
    return [*blocks, *_markdown_blocks("README.md")]


def _python_pages() -> list[str]:
    return sorted({block.page for block in _all_blocks() if block.language == "python"})


def _key(block: Block) -> str:
    return f"{block.page}: {block.code.splitlines()[0]}"


def test_every_python_block_runs_or_says_why_not() -> None:
    """Each page with Python blocks is run here or listed with its reason."""
    pages = set(_python_pages())
    assert pages - set(RUN) - set(NOT_RUN) == set()
    assert set(RUN) & set(NOT_RUN) == set()
    assert set(RUN) | set(NOT_RUN) <= pages  # no stale entries
    keys = {_key(block) for block in _all_blocks() if block.page in RUN}
    assert set(SKIPPED) <= keys


@pytest.mark.parametrize("page", sorted(RUN))
def test_python_blocks_run(
    page: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The page's Python blocks run as a script, with only the budgets listed in RUN cut."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    blocks = [
        block
        for block in _blocks(page)
        if block.language == "python" and _key(block) not in SKIPPED
    ]
    source = "\n".join(block.code for block in blocks)
    for old, _ in RUN[page]:
        assert old in source, f"{page}: the substitution {old!r} names nothing"
    namespace: dict[str, object] = {"__name__": "__main__"}
    for block in blocks:
        code = block.code
        for old, new in RUN[page]:
            code = code.replace(old, new)
        exec(compile(code, f"{page}:{block.line}", "exec"), namespace)
    capsys.readouterr()


def _command_lines(block: Block) -> list[str]:
    """The command lines of a shell block: prompts, continuations and output removed.

    A console synopsis (``$ typedrl train [ENV] [--algo ...]``) keeps its
    continuation lines; ``<placeholder>`` and ``$variable`` stand for one word.
    """
    lines: list[str] = []
    for raw in block.code.replace("\\\n", " ").splitlines():
        text = re.sub(r"<(\S[^<>]*\S|\S)>", "PLACEHOLDER", raw.strip())
        text = re.sub(r"\$[a-z_]+", "0", text)
        if block.language != "console":
            lines.append(text)
        elif text.startswith("$ "):
            lines.append(text.removeprefix("$ "))
        elif lines and "[" in lines[-1] and text.startswith("["):
            lines[-1] += " " + text
    return lines


def _typedrl_invocations(line: str) -> list[list[str]]:
    _, typedrl, synopsis = line.partition("typedrl ")
    if typedrl and "[" in synopsis:  # a synopsis: its words, "|" standing for "or"
        return [synopsis.split()]
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    tokens = list(lexer)
    found: list[list[str]] = []
    for index, token in enumerate(tokens):
        if token != "typedrl":
            continue
        argv: list[str] = []
        for item in tokens[index + 1 :]:
            if item and set(item) <= set(";|&<>()"):
                break
            argv.append(item)
        found.append(argv)
    return found


def _shell_blocks() -> list[Block]:
    return [b for b in _all_blocks() if b.language in ("console", "bash", "shell", "sh")]


def _subparser(name: str) -> argparse.ArgumentParser:
    parser = build_parser()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            choices: dict[str, argparse.ArgumentParser] = action.choices
            return choices[name]
    raise AssertionError("typedrl has no subcommands")


def _is_synopsis(argv: list[str]) -> bool:
    return any(token.startswith("[") or token.endswith("]") for token in argv)


def _cases() -> list[tuple[str, list[str]]]:
    return [
        (f"{block.page}:{block.line}", argv)
        for block in _shell_blocks()
        for line in _command_lines(block)
        for argv in _typedrl_invocations(line)
    ]


def test_the_docs_show_typedrl_commands() -> None:
    """The extraction finds the command lines (a broken extractor would test nothing)."""
    argvs = [argv for _, argv in _cases()]
    assert ["train", "--algo", "shac"] in argvs
    assert ["plot", "runs/cp-0", "runs/cp-1", "runs/cp-2", "-o", "cartpole.png"] in argvs
    assert len(argvs) > 30


@pytest.mark.parametrize(
    ("where", "argv"), _cases(), ids=[f"{w}:{' '.join(a)[:40]}" for w, a in _cases()]
)
def test_typedrl_command_lines_parse(where: str, argv: list[str]) -> None:
    """Every ``typedrl`` command in a shell block parses; a synopsis names only real flags."""
    if _is_synopsis(argv):
        actions = _subparser(argv[0])._actions
        flags = {option for action in actions for option in action.option_strings}
        named = set(re.findall(r"(?<![\w-])--?[a-z][a-z-]*", " ".join(argv[1:])))
        assert named - flags == set(), f"{where}: typedrl {argv[0]} has no {named - flags}"
        return
    assert _exit_status(argv) == 0, f"{where}: typedrl {shlex.join(argv)} does not parse"


def _exit_status(argv: list[str]) -> int:
    """0 when ``argv`` parses (``--help`` and ``--version`` exit with 0), else argparse's 2."""
    try:
        build_parser().parse_args(argv)
    except SystemExit as exit_:
        return int(exit_.code or 0)
    return 0


def test_a_wrong_command_line_is_caught() -> None:
    """The parse check fails on an unknown flag and on a bad value."""
    assert _exit_status(["train", "--no-such-flag"]) == 2
    assert _exit_status(["train", "--seed", "x"]) == 2
    assert _exit_status(["train", "--algo", "apg"]) == 0


def test_the_apg_guide_lists_the_tuned_budgets() -> None:
    """Each APG preset row of the guide names the budget its shipped tuned file sets."""
    text = (ROOT / "docs/guides/train_apg.rst").read_text()
    for algo, env_id in configs.available("apg"):
        tuned = configs.load(algo, env_id)
        row = re.search(rf"\* - ``{re.escape(env_id)}``\n\s+- (\d+)\n\s+- (.*)", text)
        assert row is not None, f"train_apg.rst has no preset row for {env_id}"
        assert int(row[1]) == tuned.num_envs
        assert f"``total_timesteps={tuned.config['total_timesteps']:_}``" in row[2]
