"""Memory available to this process: the default budgets of capture and of synthetic inputs."""
from __future__ import annotations

import os


def available_memory() -> int:
    """Bytes of memory available now (MemAvailable on Linux; total physical memory elsewhere)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 8 << 30
