"""Repository-wide pytest configuration: GPU tests skip cleanly without a device."""

from __future__ import annotations

import shutil
import subprocess

import pytest


def _cuda_device_present() -> bool:
    if shutil.which("nvidia-smi") is None:
        return False
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return False
    return out.returncode == 0 and "GPU" in out.stdout


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gpu_items = [item for item in items if item.get_closest_marker("gpu")]
    if not gpu_items or _cuda_device_present():
        return
    skip = pytest.mark.skip(reason="needs a CUDA driver and an NVIDIA GPU (none found)")
    for item in gpu_items:
        item.add_marker(skip)
