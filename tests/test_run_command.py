"""tests/run, the test command of the README and CI, on a machine where the browser cannot be installed."""

import shutil
import subprocess
from pathlib import Path

RUN = Path(__file__).with_name("run")


def test_without_chromium_and_a_way_to_install_it_the_command_stops_in_one_line_before_any_test(tmp_path):
    # A PATH with only what the script needs before its browser check: no chromium, apt-get, sudo or python.
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "dirname").symlink_to(shutil.which("dirname"))
    result = subprocess.run(
        [shutil.which("bash"), str(RUN)],
        env={"PATH": str(tools)},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 3
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and "Chromium" in lines[0] and "sudo apt-get install chromium" in lines[0]
