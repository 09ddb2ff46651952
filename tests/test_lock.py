"""requirements-lock.txt pins every requirement, and both install commands use it (scripts/lock.sh makes it)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REQUIREMENT_FILES = ("requirements.txt", "requirements-ray.txt", "requirements-dev.txt")


def _name(line: str) -> str:
    """The normalised project name of a requirement line (``ray[data]==2.60.0`` -> ``ray``)."""
    return re.sub(r"[-_.]+", "-", re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", line).group(0)).lower()


def _requirements(path: Path) -> list[str]:
    lines = (line.split("#")[0].strip() for line in path.read_text(encoding="utf-8").splitlines())
    return [line for line in lines if line and not line.startswith("-")]


def _pins() -> dict[str, str]:
    pins = {}
    for line in _requirements(ROOT / "requirements-lock.txt"):
        name, _, version = line.partition("==")
        pins[_name(name)] = version.strip()
    return pins


def test_every_requirement_is_pinned_to_one_version_in_the_lock():
    pins = _pins()
    assert all(version for version in pins.values()), "every line of the lock is name==version"
    missing = {_name(line) for f in REQUIREMENT_FILES for line in _requirements(ROOT / f)} - set(pins)
    assert not missing, f"not in requirements-lock.txt: {sorted(missing)}; run bash scripts/lock.sh"


def test_torch_is_locked_without_a_local_label_and_no_cuda_package_is():
    pins = _pins()
    # ==2.13.0 admits the CPU build and a CUDA build alike; +cpu would exist only on PyTorch's index
    assert pins["torch"] == "2.13.0"
    assert not [name for name in pins if name.startswith(("nvidia-", "triton"))]


def test_the_app_command_and_the_test_script_install_with_the_lock():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "pip install -r requirements.txt -c requirements-lock.txt" in readme
    test_script = (ROOT / "scripts" / "test.sh").read_text(encoding="utf-8")
    assert "-r requirements-dev.txt -c requirements-lock.txt" in test_script
