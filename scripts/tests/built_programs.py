"""The built programs the script tests run (CROSSREG_BIN, default build/bin); a test whose
program is not built skips with the path it looked at."""
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("CROSSREG_BIN", os.path.join(ROOT, "build/bin"))


def program(name):
    path = os.path.join(BIN, name)
    if not os.access(path, os.X_OK):
        pytest.skip(f"{path} is not built")
    return path
