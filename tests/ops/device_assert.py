"""Running a CUDA script with ``WARPFORGE_CHECKS=1`` in a new process, for the tests of the
device-side target check: a device assert leaves its CUDA context unusable, so it cannot fail
inside the test process."""

from __future__ import annotations

import os
import subprocess
import sys


def assert_stops_on_bad_target(code: str) -> None:
    """``code`` (which makes a call with a target out of range, then synchronises) must end in
    the target check's device assertion."""
    env = {**os.environ, "WARPFORGE_CHECKS": "1"}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert result.returncode != 0, result.stdout
    assert "target outside" in result.stderr or "device-side assert" in result.stderr
