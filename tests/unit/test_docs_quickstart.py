"""README.md's Quickstart is exactly two commands, the app's and the tests', and the test command is the one CI runs:
.ci/run (read here, never run) greps README for its line marked '# the tests' and runs it as written, so a quickstart
reworded past its pattern would leave CI with nothing to run."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def quickstart_commands():
    """The lines of the Quickstart section's first ```bash block."""
    section = re.search(r"^## Quickstart\n(.*?)^## ", (ROOT / "README.md").read_text(encoding="utf-8"), re.S | re.M)
    block = re.search(r"^```bash\n(.*?)^```", section.group(1), re.S | re.M)
    return [line for line in block.group(1).splitlines() if line.strip()]


def test_the_quickstart_is_two_commands_the_app_then_the_tests():
    app, tests = quickstart_commands()
    assert app.split("#")[0].rstrip().endswith("python app.py") and "# the app" in app
    assert tests.split("#")[0].rstrip().endswith("python -m pytest") and "# the tests" in tests


def test_ci_finds_the_quickstarts_test_command():
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    pattern = re.search(r"grep -E '([^']+)' README\.md", script).group(1)  # the line .ci/run takes as its tests
    found = [line for line in (ROOT / "README.md").read_text(encoding="utf-8").splitlines() if re.search(pattern, line)]
    assert found and found[0] == quickstart_commands()[1], found
    assert re.sub(r" *#.*$", "", found[0]).endswith("&& python -m pytest")  # what .ci/run's sed leaves: the command
