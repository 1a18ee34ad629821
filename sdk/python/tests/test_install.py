"""`pip install ./sdk/python` gives an importable `den` with no other
package. Offline, as the tests run here: pip builds with the system's
setuptools and wheel (--no-build-isolation) and may fetch nothing
(--no-index), which also shows the SDK needs nothing else. Needs no dend."""

from __future__ import annotations

import shutil
import subprocess
import sys

from conftest import REPO


def test_pip_install(tmp_path):
    src = tmp_path / "src"
    shutil.copytree(REPO / "sdk" / "python", src, ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    py = str(venv / "bin" / "python")
    out = subprocess.run([py, "-m", "pip", "install", "--no-index", "--no-build-isolation", "--no-deps", "-q", str(src)],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    got = subprocess.run([py, "-I", "-c", "import den, importlib.metadata as m; print(den.__file__); "
                          "print(m.version('den')); print(m.requires('den'))"],
                         capture_output=True, text=True, cwd=tmp_path, check=True).stdout.split("\n")
    assert got[0].startswith(str(venv)) and got[1] == "0.1.0" and got[2] == "None"
