"""The C library's allocator, as a Python worker that holds a large state needs it (glibc).

glibc keeps what a process frees in its heap for the next allocations, and serves buffers of a
size it has seen freed from the heap too: a worker that read a large epoch or settled a large
state kept that peak for its life. ``return_freed_memory`` gives the free pages back (after every
task, and after a packed state map settles); ``map_large_buffers`` has buffers of 1 MiB and more
mapped on their own, so that a growing array is remapped by realloc, never copied beside itself
(runtime.state.state_map), and goes back to the system when freed. Nothing where there is no glibc.
"""
from __future__ import annotations

_LIBC = None
_M_MMAP_THRESHOLD = -3


def _libc():
    global _LIBC
    if _LIBC is None:
        try:
            import ctypes
            _LIBC = ctypes.CDLL("libc.so.6")
            _LIBC.malloc_trim       # noqa: B018  (not glibc: no such function)
        except (OSError, AttributeError):
            _LIBC = False
    return _LIBC or None


def return_freed_memory() -> None:
    """Give the heap's free pages back to the system (well under a millisecond)."""
    libc = _libc()
    if libc:
        libc.malloc_trim(0)


_mapping = False


def map_large_buffers() -> None:
    """From now on, buffers of 1 MiB and more are mmapped (once per process)."""
    global _mapping
    libc = _libc()
    if libc and not _mapping:
        libc.mallopt(_M_MMAP_THRESHOLD, 1 << 20)
        _mapping = True
