"""Slot sharing groups with the resources their slots need (``pyflink.datastream.slot_sharing_group``).

    heavy = (SlotSharingGroup.builder("heavy")
             .set_cpu_cores(1.0).set_task_heap_memory_mb(512).set_managed_memory_mb(256).build())
    ds.map(score).slot_sharing_group(heavy)
    env.register_slot_sharing_group(heavy)      # or declare it once for the name

The values, their checks and their messages are Flink's (``SlotSharingGroup.Builder``,
``MemorySize``). The slot plan (runtime.scheduler.slots) grants a group's resources or refuses
the job: a Sluice slot is one core of a Spark executor.
"""
from __future__ import annotations

from typing import Optional

__all__ = ["MemorySize", "SlotSharingGroup"]

_INT_MASK = 0xFFFFFFFF
# Flink's MemoryUnit order and names: toString picks the largest unit that divides the size.
_UNITS = ((1, "bytes"), (1 << 10, "kb"), (1 << 20, "mb"), (1 << 30, "gb"), (1 << 40, "tb"))


class MemorySize:
    """A number of bytes, viewable in other units (Flink's ``MemorySize``)."""

    def __init__(self, j_memory_size=None, bytes_size: Optional[int] = None):
        # PyFlink's first argument wraps a Java object; here the size is the bytes only.
        size = bytes_size if j_memory_size is None else j_memory_size
        if not isinstance(size, int) or isinstance(size, bool):
            raise TypeError(f"MemorySize takes a number of bytes, got {size!r}")
        if size < 0:
            raise ValueError(f"bytes must be >= 0, got {size}")
        self._bytes = size

    @staticmethod
    def of_mebi_bytes(mebi_bytes: int) -> "MemorySize":
        if not isinstance(mebi_bytes, int) or isinstance(mebi_bytes, bool):
            raise TypeError(f"MemorySize.of_mebi_bytes() takes a whole number of MiB, got {mebi_bytes!r}")
        return MemorySize(bytes_size=mebi_bytes << 20)

    def get_bytes(self) -> int:
        return self._bytes

    def get_kibi_bytes(self) -> int:
        return self._bytes >> 10

    def get_mebi_bytes(self) -> int:
        return self._bytes >> 20

    def get_gibi_bytes(self) -> int:
        return self._bytes >> 30

    def get_tebi_bytes(self) -> int:
        return self._bytes >> 40

    def __eq__(self, other):
        return isinstance(other, self.__class__) and self._bytes == other._bytes

    def __hash__(self):
        # Java's MemorySize.hashCode, (int) (bytes ^ (bytes >>> 32)), as PyFlink returns it.
        h = (self._bytes ^ (self._bytes >> 32)) & _INT_MASK
        return h - (1 << 32) if h >= 1 << 31 else h

    def __lt__(self, other: "MemorySize"):
        if not isinstance(other, MemorySize):
            raise TypeError("Does not support comparison with non-MemorySize %s" % other)
        return self._bytes < other._bytes

    def __le__(self, other: "MemorySize"):
        return self.__eq__(other) or self.__lt__(other)

    def __str__(self):
        # Java's formatToString: the unit before the first that does not divide the size
        # (bytes when none or all divide it, so 3 TiB prints as bytes, as Flink's does).
        first = next((i for i, (m, _) in enumerate(_UNITS) if self._bytes % m), None)
        multiplier, unit = _UNITS[first - 1] if first else _UNITS[0]
        return f"{self._bytes // multiplier} {unit}"

    def __repr__(self):
        return f"MemorySize({self})"


def _memory(memory: MemorySize, setter: str) -> MemorySize:
    if not isinstance(memory, MemorySize):
        raise TypeError(f"{setter}() takes a MemorySize, e.g. MemorySize.of_mebi_bytes(512), got {memory!r}")
    return memory


class SlotSharingGroup:
    """A slot sharing group's name and the resources each of its slots needs.

    As Flink's, two groups are equal when their resources are (the name is not compared).
    """

    def __init__(self, name: str, cpu_cores: Optional[float] = None,
                 task_heap_memory: Optional[MemorySize] = None, task_off_heap_memory: Optional[MemorySize] = None,
                 managed_memory: Optional[MemorySize] = None, external_resources: Optional[dict] = None):
        self._name = name
        self._cpu_cores = cpu_cores
        self._task_heap_memory = task_heap_memory
        self._task_off_heap_memory = task_off_heap_memory
        self._managed_memory = managed_memory
        self._external_resources = dict(external_resources or {})

    def get_name(self) -> str:
        return self._name

    def get_managed_memory(self) -> Optional[MemorySize]:
        return self._managed_memory

    def get_task_heap_memory(self) -> Optional[MemorySize]:
        return self._task_heap_memory

    def get_task_off_heap_memory(self) -> Optional[MemorySize]:
        return self._task_off_heap_memory

    def get_cpu_cores(self) -> Optional[float]:
        return self._cpu_cores

    def get_external_resources(self) -> dict:
        return dict(self._external_resources)

    def has_resources(self) -> bool:
        """Whether the group declares resources (Flink: its ResourceSpec is not UNKNOWN)."""
        return self._cpu_cores is not None

    @staticmethod
    def builder(name: str) -> "SlotSharingGroup.Builder":
        if not isinstance(name, str):
            raise TypeError(f"SlotSharingGroup.builder() takes the group's name, got {name!r}")
        return SlotSharingGroup.Builder(name)

    def _resources(self) -> tuple:
        return (self._cpu_cores, self._task_heap_memory, self._task_off_heap_memory, self._managed_memory,
                tuple(sorted(self._external_resources.items())))

    def __eq__(self, other):
        return isinstance(other, self.__class__) and self._resources() == other._resources()

    def __hash__(self):
        return hash(self._resources())

    def __repr__(self):
        if not self.has_resources():
            return f"SlotSharingGroup({self._name!r})"
        extra = "".join(f", {k}={v}" for k, v in sorted(self._external_resources.items()))
        return (f"SlotSharingGroup({self._name!r}, cpu_cores={self._cpu_cores}, "
                f"task_heap_memory={self._task_heap_memory}, task_off_heap_memory={self._task_off_heap_memory}, "
                f"managed_memory={self._managed_memory}{extra})")

    class Builder:
        """Builds a SlotSharingGroup: a group with resources needs cpu cores and task heap memory."""

        def __init__(self, name: str):
            self._name = name
            self._cpu_cores: Optional[float] = None
            self._task_heap_memory: Optional[MemorySize] = None
            self._task_off_heap_memory: Optional[MemorySize] = None
            self._managed_memory: Optional[MemorySize] = None
            self._external_resources: dict = {}

        def set_cpu_cores(self, cpu_cores: float) -> "SlotSharingGroup.Builder":
            if not isinstance(cpu_cores, (int, float)) or isinstance(cpu_cores, bool):
                raise TypeError(f"set_cpu_cores() takes a number of cores such as 1.0, got {cpu_cores!r}")
            if not cpu_cores > 0:
                raise ValueError("The cpu cores should be positive.")
            self._cpu_cores = float(cpu_cores)
            return self

        def set_task_heap_memory(self, task_heap_memory: MemorySize) -> "SlotSharingGroup.Builder":
            if _memory(task_heap_memory, "set_task_heap_memory").get_bytes() <= 0:
                raise ValueError("The task heap memory should be positive.")
            self._task_heap_memory = task_heap_memory
            return self

        def set_task_heap_memory_mb(self, task_heap_memory_mb: int) -> "SlotSharingGroup.Builder":
            if isinstance(task_heap_memory_mb, int) and task_heap_memory_mb <= 0:
                raise ValueError("The task heap memory should be positive.")
            return self.set_task_heap_memory(MemorySize.of_mebi_bytes(task_heap_memory_mb))

        def set_task_off_heap_memory(self, task_off_heap_memory: MemorySize) -> "SlotSharingGroup.Builder":
            self._task_off_heap_memory = _memory(task_off_heap_memory, "set_task_off_heap_memory")
            return self

        def set_task_off_heap_memory_mb(self, task_off_heap_memory_mb: int) -> "SlotSharingGroup.Builder":
            return self.set_task_off_heap_memory(MemorySize.of_mebi_bytes(task_off_heap_memory_mb))

        def set_managed_memory(self, managed_memory: MemorySize) -> "SlotSharingGroup.Builder":
            self._managed_memory = _memory(managed_memory, "set_managed_memory")
            return self

        def set_managed_memory_mb(self, managed_memory_mb: int) -> "SlotSharingGroup.Builder":
            return self.set_managed_memory(MemorySize.of_mebi_bytes(managed_memory_mb))

        def set_external_resource(self, name: str, value: float) -> "SlotSharingGroup.Builder":
            """Adds (or replaces) an external resource such as a GPU."""
            if not isinstance(name, str) or not isinstance(value, (int, float)) or isinstance(value, bool):
                raise TypeError(f"set_external_resource() takes a name and an amount, got {name!r}, {value!r}")
            self._external_resources[name] = float(value)
            return self

        def build(self) -> "SlotSharingGroup":
            if self._cpu_cores is not None and self._task_heap_memory is not None:
                zero = MemorySize(bytes_size=0)     # Flink's default of the optional memories
                return SlotSharingGroup(self._name, self._cpu_cores, self._task_heap_memory,
                                        self._task_off_heap_memory or zero, self._managed_memory or zero,
                                        self._external_resources)
            if (self._cpu_cores, self._task_heap_memory, self._task_off_heap_memory,
                    self._managed_memory) != (None,) * 4 or self._external_resources:
                raise ValueError(
                    "The cpu cores and task heap memory are required when specifying the resource of a "
                    "slot sharing group. You need to explicitly configure them with positive value. "
                    f"(group '{self._name}': call set_cpu_cores(...) and set_task_heap_memory_mb(...))")
            return SlotSharingGroup(self._name)
