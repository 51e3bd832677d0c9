"""Host (CPU) memory: keep a process's RSS at what its live tensors need, and measure its peak.

glibc serves a large allocation with its own mmap and unmaps it on free, but after the first such
free it raises its mmap threshold to that size (up to 32 MiB). From then on activation-sized
tensors come from the heap, whose freed pages stay resident behind live ones: a CPU training
process then keeps a few hundred MB after each long step, and its peak RSS says more about
fragmentation than about the activations. Fixing the threshold at 1 MiB returns every
sequence-length-sized tensor on free; the heap keeps up to 32 MiB at its top (glibc's own ceiling
for its dynamic trim threshold), so small allocations do not move the break on every step. On the
embedded tiny model this costs about 5% of a 2k step and nothing measurable at 16k / 32k.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import resource

import psutil

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3     # mallopt parameter numbers, from glibc's malloc.h
MMAP_THRESHOLD = 1 << 20
TRIM_THRESHOLD = 32 << 20


def return_freed_memory(mmap_threshold: int = MMAP_THRESHOLD, trim_threshold: int = TRIM_THRESHOLD) -> bool:
    """Serve allocations of `mmap_threshold` bytes and more by mmap from now on, so that freeing
    them returns their pages to the system. False where the C library is not glibc (nothing
    changes)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"))
        return bool(libc.mallopt(M_MMAP_THRESHOLD, mmap_threshold)) and bool(
            libc.mallopt(M_TRIM_THRESHOLD, trim_threshold))
    except (OSError, AttributeError, TypeError):
        return False


def current_rss() -> int:
    """This process's resident set size in bytes."""
    return psutil.Process().memory_info().rss


def peak_rss() -> int:
    """This process's peak RSS in bytes since it started or since `reset_peak_rss`. Linux's VmHWM
    belongs to the current address space, while ru_maxrss carries over the parent's peak across
    fork + exec (so a worker spawned by a large parent would report the parent's size)."""
    kib = _status_kib("VmHWM")
    return kib * 1024 if kib else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def reset_peak_rss() -> bool:
    """Set the peak RSS back to the current RSS (Linux >= 4.0); False where that is not possible."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _status_kib(field: str) -> int:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0
