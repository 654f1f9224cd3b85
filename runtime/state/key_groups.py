"""Flink's ``KeyGroupRangeAssignment``, scalar and vectorised.

A key goes to key group ``murmurHash(key.hashCode()) % maxParallelism`` and a
key group to operator ``keyGroup * parallelism / maxParallelism``. Both must
agree with Java Flink exactly, so hashing goes through
:func:`runtime.state.java_hash.java_hash_code`.

``key_type`` says which Java value a key is: ``None`` for the key's own Java
value (a field key, as Java Flink hashes ``keyBy`` on a field); else the key
``key_by(selector, key_type)`` makes, PyFlink's ``Row.of(key)`` of the key as
``key_type``, ``Types.PICKLED_BYTE_ARRAY()`` when none was given
(:func:`runtime.state.java_hash.key_by_hash`). :func:`key_type_of` reads it
from a key selector.

The vectorised functions take pyarrow arrays (or chunked arrays), numpy
arrays or plain sequences and return ``int32`` numpy arrays equal, element by
element, to the scalar functions. Integer columns follow the scalar rule per
value, whatever the column width: a value fitting int32 hashes as a Java
``Integer``, otherwise as a ``Long`` (so an int64 column holding ``-1`` hashes
like the Python int ``-1``, not like ``Long.valueOf(-1)``).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import repeat
from operator import is_
from typing import ClassVar, Iterator

import numpy as np
import pyarrow as pa

from runtime.common.typeinfo import PickledBytesTypeInfo
from runtime.state.java_hash import java_hash_code, key_by_hash, murmur_hash, pickled_key

__all__ = [
    "DEFAULT_LOWER_BOUND_MAX_PARALLELISM",
    "KEY_HASHING",
    "UPPER_BOUND_MAX_PARALLELISM",
    "KeyGroupRange",
    "assign_key_groups",
    "assign_key_to_parallel_operator",
    "assign_operator_indexes",
    "assign_to_key_group",
    "check_parallelism_preconditions",
    "compute_default_max_parallelism",
    "compute_key_group_for_key_hash",
    "compute_key_group_range_for_operator_index",
    "compute_operator_index_for_key_group",
    "java_hash_codes",
    "key_hash_code",
    "key_hash_codes",
    "key_groups_of_hashes",
    "key_type_of",
    "murmur_hash_array",
]

# What a checkpoint records of how its keyed state's key groups were computed: keys of
# key_by(selector) as PyFlink 2.3 hashes them (key_by_hash), field keys as their Java values.
KEY_HASHING = "pyflink-2.3"

DEFAULT_LOWER_BOUND_MAX_PARALLELISM = 128
UPPER_BOUND_MAX_PARALLELISM = 32768

_NULL_KEY_MESSAGE = (
    "Assigned key must not be null! The key selector returned None for a record: "
    "filter such records out before key_by, or map them to a default key."
)


# --------------------------------------------------------------------------- ranges


@dataclass(frozen=True)
class KeyGroupRange:
    """An inclusive range of key groups, like Flink's ``KeyGroupRange``."""

    start_key_group: int
    end_key_group: int

    EMPTY: ClassVar[KeyGroupRange]

    def __post_init__(self) -> None:
        if (self.start_key_group, self.end_key_group) == (0, -1):
            return  # the canonical empty range
        if self.start_key_group < 0:
            raise ValueError(f"start_key_group must be >= 0, got {self.start_key_group}")
        if self.start_key_group > self.end_key_group:
            raise ValueError(
                f"start_key_group ({self.start_key_group}) must not exceed "
                f"end_key_group ({self.end_key_group}); use KeyGroupRange.EMPTY for no key groups"
            )

    @property
    def number_of_key_groups(self) -> int:
        return 1 + self.end_key_group - self.start_key_group

    def contains(self, key_group: int) -> bool:
        return self.start_key_group <= key_group <= self.end_key_group

    __contains__ = contains

    def __len__(self) -> int:
        return self.number_of_key_groups

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.start_key_group, self.end_key_group + 1))

    def intersection(self, other: KeyGroupRange) -> KeyGroupRange:
        start = max(self.start_key_group, other.start_key_group)
        end = min(self.end_key_group, other.end_key_group)
        return KeyGroupRange(start, end) if start <= end else KeyGroupRange.EMPTY

    def __str__(self) -> str:
        return f"KeyGroupRange{{startKeyGroup={self.start_key_group}, endKeyGroup={self.end_key_group}}}"


KeyGroupRange.EMPTY = KeyGroupRange(0, -1)


# --------------------------------------------------------------------------- scalar


def _check_int(name: str, value) -> None:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")


def _check_max_parallelism(max_parallelism) -> None:
    _check_int("max_parallelism", max_parallelism)
    if not 1 <= max_parallelism <= UPPER_BOUND_MAX_PARALLELISM:
        raise ValueError(
            f"max parallelism must be between 1 and {UPPER_BOUND_MAX_PARALLELISM}, got {max_parallelism}"
        )


def check_parallelism_preconditions(parallelism: int, max_parallelism: int) -> None:
    """Raise ``ValueError`` unless ``1 <= parallelism <= max_parallelism <= 32768``."""
    _check_max_parallelism(max_parallelism)
    _check_int("parallelism", parallelism)
    if not 1 <= parallelism <= max_parallelism:
        raise ValueError(
            f"parallelism must be between 1 and the max parallelism ({max_parallelism}), "
            f"got {parallelism}; raise the max parallelism or lower the parallelism"
        )


def _round_up_to_power_of_two(x: int) -> int:
    # Flink's bit trick, which maps 0 to 0.
    return 1 << (x - 1).bit_length() if x > 0 else 0


def compute_default_max_parallelism(parallelism: int) -> int:
    """Flink's default max parallelism: 1.5x parallelism rounded up to a power of two, in [128, 32768]."""
    _check_int("parallelism", parallelism)
    if not 1 <= parallelism <= UPPER_BOUND_MAX_PARALLELISM:
        raise ValueError(f"Operator parallelism not within bounds: {parallelism}")
    return min(
        max(_round_up_to_power_of_two(parallelism + parallelism // 2), DEFAULT_LOWER_BOUND_MAX_PARALLELISM),
        UPPER_BOUND_MAX_PARALLELISM,
    )


def compute_key_group_for_key_hash(key_hash: int, max_parallelism: int) -> int:
    """Key group of a key whose Java ``hashCode()`` is ``key_hash``."""
    return murmur_hash(key_hash) % max_parallelism


def compute_operator_index_for_key_group(max_parallelism: int, parallelism: int, key_group: int) -> int:
    """Index of the parallel operator instance that owns ``key_group``."""
    return key_group * parallelism // max_parallelism


def key_type_of(key_selector):
    """The ``key_type`` a key selector's keys are hashed as: what ``key_by`` gave it (PyFlink's
    ``PICKLED_BYTE_ARRAY`` when nothing), ``None`` for a field key (hashed as it is)."""
    return getattr(key_selector, "key_type", None)


def key_hash_code(key, key_type=None) -> int:
    """The Java hashCode Flink computes the key group of ``key`` from (see the module doc)."""
    return java_hash_code(key) if key_type is None else key_by_hash(key, key_type)


def assign_to_key_group(key, max_parallelism: int, key_type=None) -> int:
    """Key group of ``key``; ``None`` raises ``ValueError`` as in Flink."""
    if key is None:
        raise ValueError(_NULL_KEY_MESSAGE)
    return murmur_hash(key_hash_code(key, key_type)) % max_parallelism


def assign_key_to_parallel_operator(key, max_parallelism: int, parallelism: int, key_type=None) -> int:
    """Index of the parallel operator instance that owns ``key``."""
    return assign_to_key_group(key, max_parallelism, key_type) * parallelism // max_parallelism


def compute_key_group_range_for_operator_index(
    max_parallelism: int, parallelism: int, operator_index: int
) -> KeyGroupRange:
    """The key groups owned by operator instance ``operator_index``."""
    check_parallelism_preconditions(parallelism, max_parallelism)
    _check_int("operator_index", operator_index)
    if not 0 <= operator_index < parallelism:
        raise ValueError(f"operator_index must be between 0 and {parallelism - 1}, got {operator_index}")
    start = (operator_index * max_parallelism + parallelism - 1) // parallelism
    end = ((operator_index + 1) * max_parallelism - 1) // parallelism
    return KeyGroupRange(start, end)


# --------------------------------------------------------------------------- vectorised


def murmur_hash_array(codes) -> np.ndarray:
    """Element-wise :func:`murmur_hash`; returns a new non-negative ``int32`` array.

    Integer inputs wider than 32 bits are wrapped, as the scalar version does.
    """
    codes = np.asarray(codes)
    if codes.dtype.kind not in "iu":
        raise TypeError(f"murmur_hash_array needs an integer array, got dtype {codes.dtype}")
    # uint32 arithmetic wraps like Java int arithmetic; in-place ops keep it to one temporary.
    h = codes.astype(np.uint32)
    t = np.empty_like(h)
    h *= 0xCC9E2D51
    np.right_shift(h, 17, out=t)
    h <<= 15
    h |= t
    h *= 0x1B873593
    np.right_shift(h, 19, out=t)
    h <<= 13
    h |= t
    h *= 5
    h += 0xE6546B64
    h ^= 4
    np.right_shift(h, 16, out=t)
    h ^= t
    h *= 0x85EBCA6B
    np.right_shift(h, 13, out=t)
    h ^= t
    h *= 0xC2B2AE35
    np.right_shift(h, 16, out=t)
    h ^= t
    r = h.view(np.int32)
    # abs() leaves Integer.MIN_VALUE negative; Flink maps it to 0.
    np.abs(r, out=r)
    np.maximum(r, 0, out=r)
    return r


# Strings are hashed in chunks of about this many code units: big enough to
# amortise per-chunk overhead, small enough for the temporaries to stay in cache.
_CHUNK_UNITS = 1 << 18
_INV31 = pow(31, -1, 1 << 32)


class _Powers:
    """Cached ``31**k`` and ``31**-(k+1)`` modulo 2**32, grown on demand."""

    pow31 = np.ones(1, dtype=np.uint32)
    inv_pow31 = np.full(1, _INV31, dtype=np.uint32)

    @classmethod
    def ensure(cls, n: int) -> None:
        if len(cls.pow31) > n:
            return
        size = max(n + 1, 2 * len(cls.pow31), _CHUNK_UNITS + 1)
        pow31 = np.full(size, 31, dtype=np.uint32)
        pow31[0] = 1
        inv = np.full(size, _INV31, dtype=np.uint32)
        # Integer cumprod wraps modulo 2**32, which is exactly the arithmetic wanted.
        np.cumprod(pow31, out=pow31)
        np.cumprod(inv, out=inv)
        cls.pow31, cls.inv_pow31 = pow31, inv


def _polynomial_hashes(units: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """``sum(units[j] * 31**(end-1-j))`` mod 2**32 for each ``[offsets[i], offsets[i+1])``.

    ``units`` holds unsigned code units (uint8, uint16 or uint32) and
    ``offsets`` is monotonic, starting at 0. With ``W[j] = units[j] * 31**-(j+1)``,
    a string's hash is ``sum(W[start:end]) * 31**end``: two vectorised passes over the data
    instead of a loop per string.
    """
    n = len(offsets) - 1
    out = np.empty(n, dtype=np.uint32)
    if n == 0:
        return out
    max_len = int(np.max(np.diff(offsets)))
    _Powers.ensure(_CHUNK_UNITS + max_len)
    pow31, inv_pow31 = _Powers.pow31, _Powers.inv_pow31
    w = np.empty(_CHUNK_UNITS + max_len, dtype=np.uint32)
    c = np.empty(_CHUNK_UNITS + max_len + 1, dtype=np.uint32)     # _segment_sums' prefix sums
    # Chunk boundaries fall on string boundaries; a chunk holds at least one string.
    bounds = np.searchsorted(offsets, np.arange(0, int(offsets[-1]), _CHUNK_UNITS), side="right") - 1
    bounds = np.unique(np.concatenate(([0], bounds, [n])))
    lo = int(bounds[0])
    for hi in bounds[1:]:
        hi = int(hi)
        base = int(offsets[lo])
        m = int(offsets[hi]) - base
        local = offsets[lo : hi + 1] - base
        wm = w[:m]
        np.multiply(units[base : base + m], inv_pow31[:m], out=wm)
        seg = _segment_sums(wm, local, c) if m else np.zeros(hi - lo, dtype=np.uint32)
        seg *= pow31[local[1:]]
        out[lo:hi] = seg
        lo = hi
    return out


_SHORT_STRINGS = 4      # code units a string, on average, below which a prefix sum sums them


def _segment_sums(w: np.ndarray, offsets: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``sum(w[offsets[i]:offsets[i+1]])`` mod 2**32 for each i (``offsets`` from 0 to ``len(w)``;
    ``c``: room for ``len(w) + 1`` prefix sums).

    ``np.add.reduceat``, a string at a time, where strings are longer on average: against a
    prefix sum of every unit and two gathers of its differences it took 0.78x as long for
    strings of 8 units, 0.5x for 200-400, and the same for 4-6 or 1-12 units of varying length;
    for shorter ones (1-3 units of varying length) its loop per string took 1.25x, so they
    take the prefix sum."""
    m, starts, ends = len(w), offsets[:-1], offsets[1:]
    if m < _SHORT_STRINGS * len(starts):
        c = c[: m + 1]
        c[0] = 0
        np.cumsum(w, out=c[1:])
        seg = c[ends]
        seg -= c[starts]
        return seg
    # reduceat cannot start at m (empty strings at the end: 0), and gives an empty string
    # before them (start == end) the unit at its start: 0 too.
    seg = np.zeros(len(starts), dtype=np.uint32)
    inside = int(np.searchsorted(starts, m))
    seg[:inside] = np.add.reduceat(w, starts[:inside], dtype=np.uint32)
    seg[starts == ends] = 0
    return seg


def _arrow_offsets(arr: pa.Array) -> np.ndarray:
    dtype = np.int64 if pa.types.is_large_string(arr.type) or pa.types.is_large_binary(arr.type) else np.int32
    buf = arr.buffers()[1]
    offsets = np.frombuffer(buf, dtype=dtype, count=arr.offset + len(arr) + 1)[arr.offset :]
    return offsets.astype(np.int64)


def _arrow_data(arr: pa.Array, start: int, stop: int) -> np.ndarray:
    buf = arr.buffers()[2]
    if buf is None or stop == start:
        return np.empty(0, dtype=np.uint8)
    return np.frombuffer(buf, dtype=np.uint8, count=stop)[start:]


def _string_hashes(arr: pa.Array) -> np.ndarray:
    offsets = _arrow_offsets(arr)
    start, stop = int(offsets[0]), int(offsets[-1])
    data = _arrow_data(arr, start, stop)
    offsets -= start
    if len(data) == 0 or int(data.max()) < 0x80:
        # ASCII: UTF-8 bytes are exactly the UTF-16 code units.
        return _polynomial_hashes(data, offsets).view(np.int32)
    try:
        text = data.tobytes().decode("utf-8")
    except UnicodeDecodeError:
        # Only reachable through garbage bytes behind null slots.
        return _fallback_hashes(arr.to_pylist())
    units = np.frombuffer(text.encode("utf-16-le"), dtype=np.uint16)
    # Map byte offsets to UTF-16 offsets. Relative to one unit per byte, a
    # continuation byte adds none (-1) and a 4-byte sequence's lead byte adds a
    # surrogate pair (+1); only non-ASCII bytes need looking at.
    non_ascii = np.flatnonzero(data >= 0x80)
    lead = data[non_ascii]
    delta = (lead >= 0xF0).astype(np.int64)
    delta -= lead < 0xC0
    shift = np.zeros(len(non_ascii) + 1, dtype=np.int64)
    np.cumsum(delta, out=shift[1:])
    unit_offsets = offsets + shift[np.searchsorted(non_ascii, offsets)]
    return _polynomial_hashes(units, unit_offsets).view(np.int32)


def _binary_hashes(arr: pa.Array) -> np.ndarray:
    offsets = _arrow_offsets(arr)
    start, stop = int(offsets[0]), int(offsets[-1])
    offsets -= start
    # Arrays.hashCode(byte[]) = 31**len + polynomial over the signed bytes.
    # Sign-extend, then reinterpret: uint32 arithmetic wraps like Java's.
    signed = _arrow_data(arr, start, stop).view(np.int8).astype(np.int32).view(np.uint32)
    h = _polynomial_hashes(signed, offsets)
    _Powers.ensure(int(np.max(np.diff(offsets), initial=0)))
    h += _Powers.pow31[np.diff(offsets)]
    return h.view(np.int32)


def _int_hashes(values: np.ndarray) -> np.ndarray:
    values = values.astype(np.int64, copy=False)
    bits = values.view(np.uint64)
    long_hash = (bits ^ (bits >> np.uint64(32))).astype(np.uint32).view(np.int32)
    fits_int = (values >= -(1 << 31)) & (values < (1 << 31))
    return np.where(fits_int, values.astype(np.int32), long_hash)


def _uint_hashes(values: np.ndarray) -> np.ndarray:
    if values.dtype.itemsize < 8:
        return _int_hashes(values.astype(np.int64))
    big = values > np.uint64((1 << 63) - 1)
    out = _int_hashes(values.astype(np.int64))
    if big.any():
        out[big] = _fallback_hashes(values[big].tolist())
    return out


def _double_hashes(values: np.ndarray) -> np.ndarray:
    values = np.ascontiguousarray(values, dtype=np.float64)
    bits = values.view(np.uint64).copy()
    bits[np.isnan(values)] = 0x7FF8000000000000
    return (bits ^ (bits >> np.uint64(32))).astype(np.uint32).view(np.int32)


def _bool_hashes(values: np.ndarray) -> np.ndarray:
    return np.where(values, np.int32(1231), np.int32(1237))


def _fallback_hashes(values) -> np.ndarray:
    return np.fromiter((java_hash_code(v) for v in values), dtype=np.int32, count=len(values))


def _numeric_hashes(values: np.ndarray) -> np.ndarray | None:
    kind = values.dtype.kind
    if kind == "b":
        return _bool_hashes(values)
    if kind == "i":
        return values.astype(np.int32) if values.dtype.itemsize <= 4 else _int_hashes(values)
    if kind == "u":
        return _uint_hashes(values)
    if kind == "f":
        return _double_hashes(values)
    return None


def _hash_arrow(arr: pa.Array) -> np.ndarray:
    """Hashes of a pyarrow array, 0 for nulls."""
    t = arr.type
    if pa.types.is_dictionary(t):
        if len(arr.dictionary) == 0:
            return np.zeros(len(arr), dtype=np.int32)
        out = _hash_arrow(arr.dictionary)[arr.indices.fill_null(0).to_numpy(zero_copy_only=False)]
    elif pa.types.is_string(t) or pa.types.is_large_string(t):
        out = _string_hashes(arr)
    elif pa.types.is_string_view(t):
        out = _string_hashes(arr.cast(pa.large_string()))
    elif pa.types.is_binary(t) or pa.types.is_large_binary(t):
        out = _binary_hashes(arr)
    elif pa.types.is_binary_view(t):
        out = _binary_hashes(arr.cast(pa.large_binary()))
    elif pa.types.is_null(t):
        return np.zeros(len(arr), dtype=np.int32)
    elif pa.types.is_boolean(t) or pa.types.is_integer(t) or pa.types.is_floating(t):
        filled = arr.fill_null(False if pa.types.is_boolean(t) else 0) if arr.null_count else arr
        out = _numeric_hashes(filled.to_numpy(zero_copy_only=False))
    else:
        # Dates, timestamps, decimals, structs...: exact but per element.
        return _fallback_hashes(arr.to_pylist())
    if arr.null_count:
        out = np.where(arr.is_null().to_numpy(zero_copy_only=False), np.int32(0), out)
    return out.astype(np.int32, copy=False)


def _hash_values(values) -> tuple[np.ndarray, int]:
    """Hashes of any supported array-like, and how many of its values are null."""
    if isinstance(values, pa.ChunkedArray):
        parts = [_hash_arrow(chunk) for chunk in values.chunks]
        hashes = np.concatenate(parts) if parts else np.empty(0, dtype=np.int32)
        return hashes, values.null_count
    if isinstance(values, pa.Array):
        return _hash_arrow(values), values.null_count
    if not isinstance(values, (np.ndarray, list, tuple)) and hasattr(values, "__array__"):
        values = np.asarray(values)  # pandas Series and the like
    if not isinstance(values, np.ndarray):
        values = list(values)
        if values and set(map(type, values)) == {str}:
            return _str_hashes(values), 0
        return _fallback_hashes(values), sum(v is None for v in values)
    if values.ndim != 1:
        raise ValueError(f"expected a one-dimensional array of keys, got shape {values.shape}")
    hashes = _numeric_hashes(values)
    if hashes is not None:
        return hashes, 0
    if values.dtype.kind in "SM":
        arr = pa.array(values)
        return _hash_arrow(arr), arr.null_count
    return _hash_values(values.tolist())


def _str_hashes(values: list) -> np.ndarray:
    """Java hash codes of a list of ``str``: vectorised, or one by one when a lone surrogate (valid
    in Java and Python strings, not in Arrow) is among them."""
    try:
        return _string_hashes(pa.array(values, type=pa.large_string()))
    except UnicodeEncodeError:
        return _fallback_hashes(values)


def _binary_array(data: list) -> pa.Array:
    """``data`` (bytes) as an Arrow binary array, from one joined buffer (pa.array copies the
    objects one by one, twice as slow as pickling them)."""
    offsets = np.zeros(len(data) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, data), dtype=np.int64, count=len(data)), out=offsets[1:])
    return pa.Array.from_buffers(pa.large_binary(), len(data),
                                 [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(data))])


def _key_by_hashes(values, key_type) -> tuple[np.ndarray, int]:
    """:func:`key_by_hash` of each value, and how many are null. Pickled keys are pickled one
    by one, their bytes hashed vectorised; Row.of(x) adds 31 + 31 to x's hash for a scalar x."""
    if str(key_type) == "String" and isinstance(values, (pa.Array, pa.ChunkedArray)) and (
            pa.types.is_string(values.type) or pa.types.is_large_string(values.type)):
        # A string column hashes from its Arrow buffers, without a Python str per key.
        hashes, nulls = _hash_values(values)
        return (hashes.view(np.uint32) + np.uint32(62)).view(np.int32), nulls
    if not isinstance(values, list):
        values = values.to_pylist() if isinstance(values, (pa.Array, pa.ChunkedArray)) else list(values)
    nulls = sum(map(is_, values, repeat(None)))
    if isinstance(key_type, PickledBytesTypeInfo) and not nulls:
        hashes = _binary_hashes(_binary_array(list(map(pickled_key, values))))
    elif str(key_type) == "String" and values and set(map(type, values)) == {str}:
        hashes = _str_hashes(values)
    else:
        return np.fromiter((key_by_hash(v, key_type) for v in values), dtype=np.int32, count=len(values)), nulls
    return (hashes.view(np.uint32) + np.uint32(62)).view(np.int32), nulls


def _key_hashes(values, key_type) -> tuple[np.ndarray, int]:
    return _hash_values(values) if key_type is None else _key_by_hashes(values, key_type)


def java_hash_codes(values) -> np.ndarray:
    """Element-wise :func:`java_hash_code` as an ``int32`` array (nulls hash to 0).

    Strings, binaries, booleans, integers and floats (pyarrow or numpy) are
    vectorised: ASCII string data is hashed straight from the Arrow buffer, other
    string data after one bulk transcoding to UTF-16. Other types (dates,
    decimals, tuples, big ints...) are hashed per element.
    """
    return _hash_values(values)[0]


def key_hash_codes(values, key_type=None) -> np.ndarray:
    """Element-wise :func:`key_hash_code` as an ``int32`` array (null keys refused)."""
    hashes, null_count = _key_hashes(values, key_type)
    if null_count:
        raise ValueError(f"{_NULL_KEY_MESSAGE} ({null_count} of {len(hashes)} keys are null)")
    return hashes


def assign_key_groups(values, max_parallelism: int, key_type=None) -> np.ndarray:
    """Element-wise :func:`assign_to_key_group` as an ``int32`` array."""
    _check_max_parallelism(max_parallelism)
    return key_groups_of_hashes(key_hash_codes(values, key_type), max_parallelism)


def key_groups_of_hashes(hashes: np.ndarray, max_parallelism: int) -> np.ndarray:
    """Element-wise :func:`compute_key_group_for_key_hash` of :func:`key_hash_codes`' hashes."""
    key_groups = murmur_hash_array(hashes)
    if max_parallelism & (max_parallelism - 1) == 0:
        key_groups &= max_parallelism - 1  # same as % for non-negative values, and cheaper
    else:
        key_groups %= max_parallelism
    return key_groups


def assign_operator_indexes(values, max_parallelism: int, parallelism: int, key_type=None) -> np.ndarray:
    """Element-wise :func:`assign_key_to_parallel_operator` as an ``int32`` array."""
    check_parallelism_preconditions(parallelism, max_parallelism)
    indexes = assign_key_groups(values, max_parallelism, key_type)
    # key_group * parallelism < 2**30, so int32 cannot overflow.
    indexes *= parallelism
    indexes //= max_parallelism
    return indexes
