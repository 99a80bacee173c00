"""The software a record was made with: the project's commit and the versions of the packages that
shape its numbers (kept with releases and experiments, not recomputed later)."""
from __future__ import annotations

import platform
import subprocess
from importlib import metadata
from pathlib import Path

SOFTWARE = ("django", "djangorestframework", "numpy", "scipy", "pyarrow", "torch", "opencv-python-headless",
            "transformers", "sentence-transformers", "faiss-cpu", "open_clip_torch", "celery")


def software_versions() -> dict:
    """``{"python", <package>: version, ..., "trajlab_commit"}``; the commit is ``""`` outside a git
    checkout, and ``trajlab_dirty`` says whether tracked files differ from it."""
    versions = {"python": platform.python_version()}
    for name in SOFTWARE:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    root = Path(__file__).resolve().parents[1]
    versions["trajlab_commit"] = _git(root, "rev-parse", "HEAD")
    if versions["trajlab_commit"]:
        versions["trajlab_dirty"] = bool(_git(root, "status", "--porcelain", "--untracked-files=no"))
    return versions


def _git(root: Path, *args: str) -> str:
    try:
        done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""
