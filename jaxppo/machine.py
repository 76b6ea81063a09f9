"""Name the machine a figure was measured on (for benchmark tables: a number without its
machine is not a benchmark)."""

from __future__ import annotations

import os
import platform

import jax


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            return next(line.split(":", 1)[1].strip() for line in f if "model name" in line)
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


def describe() -> str:
    """E.g. `AMD EPYC 7B13, 2 cores; JAX 0.10.2 (cpu)` or `NVIDIA H100 80GB HBM3; JAX ... (gpu)`."""
    cpu = f"{cpu_name()}, {os.cpu_count()} cores"
    dev = jax.devices()[0]
    where = cpu if dev.platform == "cpu" else f"{dev.device_kind} (host: {cpu})"
    return f"{where}; JAX {jax.__version__} ({dev.platform})"


def peak_device_bytes(device=None) -> int | None:
    """The accelerator's peak allocation so far in this process (GPU/TPU allocators report
    it; the CPU does not: None)."""
    device = device if device is not None else jax.devices()[0]
    try:
        return (device.memory_stats() or {}).get("peak_bytes_in_use")
    except Exception:  # noqa: BLE001 - backends without allocator statistics
        return None
