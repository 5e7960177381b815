"""The README's two commands stay true: CI runs the README's test line, the examples run."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[1]


def readme_commands():
    block = re.search(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(), re.S).group(1)
    return [line for line in block.splitlines() if line.strip()]


def test_readme_opens_with_two_commands():
    demo, tests = readme_commands()
    assert "pip install" in demo and demo.endswith("optplan demo")
    assert "pip install" in tests and "pytest -rs" in tests


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    assert readme_commands()[1] in ci.splitlines()


def test_example_runs():
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "plan_cowan3.py")],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert "agree=True" in out.stdout and "policy [0 1 0]" in out.stdout
