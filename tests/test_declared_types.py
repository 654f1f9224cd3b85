"""``from_collection(..., type_info=...)`` gives the records the declared type at the source, as
PyFlink's serializers do: tuples declared as a ROW become Rows (``.word`` works), ints declared
DOUBLE become floats, and FLOAT is 32 bits (163.3 reads back as float32(163.3)). The answers come
from those rules (``struct`` does the 32-bit rounding here, independently of the engine).
"""
import struct

import pytest

from runtime.common import Row, Types
from runtime_env import job_env

WORDS = Types.ROW_NAMED(["word", "price"], [Types.STRING(), Types.FLOAT()])


def f32(x: float) -> float:
    return struct.unpack("f", struct.pack("f", x))[0]


@pytest.mark.parametrize("records_per_epoch", [None, 1])
def test_tuples_declared_as_named_rows_are_rows_with_32_bit_floats(spark, tmp_path, records_per_epoch):
    settings = {"epoch__max_records_per_split": records_per_epoch} if records_per_epoch else {}
    env = job_env(tmp_path, **settings)
    rows = env.from_collection([("apple", 163.3), ("pear", 0.1), ("apple", 2)], type_info=WORDS)
    got = list(rows.map(lambda r: (type(r).__name__, r.word, r["price"]),
                        output_type=Types.TUPLE([Types.STRING(), Types.STRING(), Types.DOUBLE()]))
               .execute_and_collect("types"))
    assert got == [("Row", "apple", f32(163.3)), ("Row", "pear", f32(0.1)), ("Row", "apple", 2.0)]
    assert f32(163.3) != 163.3 and f32(163.3) == 163.3000030517578


def test_a_sum_of_floats_adds_the_32_bit_values(spark, tmp_path):
    env = job_env(tmp_path)
    got = list(env.from_collection([("a", 163.3), ("a", 0.1)], type_info=WORDS)
               .key_by(lambda r: r.word).reduce(lambda a, b: Row(word=a.word, price=a.price + b.price))
               .map(lambda r: r.price, output_type=Types.DOUBLE()).execute_and_collect("sum"))
    assert got == [f32(163.3), f32(163.3) + f32(0.1)]


def test_ints_declared_double_are_floats_and_lists_declared_tuples_are_tuples(env):
    assert env.from_collection([1, 2], type_info=Types.DOUBLE())._t.operator.source.items == (1.0, 2.0)
    pairs = env.from_collection([["a", 1]], type_info=Types.TUPLE([Types.STRING(), Types.LONG()]))
    assert pairs._t.operator.source.items == (("a", 1),)
    # Tuples already of their fields' exact types stay as they are; any other value is converted.
    mixed = Types.TUPLE([Types.STRING(), Types.LONG(), Types.DOUBLE(), Types.BOOLEAN()])
    exact = [("a", 1, 0.5, True), ("b", 2, -0.0, False)]
    items = env.from_collection(exact, type_info=mixed)._t.operator.source.items
    assert items == tuple(exact) and all(a is b for a, b in zip(items, exact))
    items = env.from_collection([("a", 1, 1, False)], type_info=mixed)._t.operator.source.items
    assert items == (("a", 1, 1.0, False),) and [type(v) for v in items[0]] == [str, int, float, bool]
    with pytest.raises(TypeError, match=r"record 0, \('a', 2147483648\), does not fit"):
        env.from_collection([("a", 2 ** 31)], type_info=Types.TUPLE([Types.STRING(), Types.INT()]))


def test_a_record_that_does_not_fit_its_type_fails_when_the_job_is_built(env):
    with pytest.raises(TypeError, match=r"from_collection\(\): record 1, 'x', does not fit its declared type Long"):
        env.from_collection([1, "x", 3], type_info=Types.LONG())
    with pytest.raises(TypeError, match=r"from_collection\(\): record 1, \('pear',\), does not fit its declared "
                                        r"type Row\(word: String, price: Float\): \('pear',\) has 1 fields"):
        env.from_collection([("apple", 1.0), ("pear",)], type_info=WORDS)


def test_records_of_their_fields_exact_types_are_checked_as_the_conversion_checks_them(env):
    # Checked a column at a time without Arrow (arrow._fit_as_they_are): the ranges, encodings,
    # lengths and bools Arrow's conversion refuses are refused the same way, naming the record.
    ints = Types.TUPLE([Types.STRING(), Types.LONG(), Types.INT(), Types.SHORT(), Types.BYTE()])
    fit = [("a", 2 ** 63 - 1, 2 ** 31 - 1, 2 ** 15 - 1, 127), ("é", -2 ** 63, -2 ** 31, -2 ** 15, -128)]
    items = env.from_collection(fit, type_info=ints)._t.operator.source.items
    assert items == tuple(fit) and all(a is b for a, b in zip(items, fit))
    for misfit in (("b", 2 ** 63, 0, 0, 0), ("b", 0, -2 ** 31 - 1, 0, 0), ("b", 0, 0, 2 ** 15, 0),
                   ("b", 0, 0, 0, 128), ("\ud800", 0, 0, 0, 0), ("b", 0, 0, 0), ("b", 0, 0, 0, True)):
        with pytest.raises(TypeError, match=r"from_collection\(\): record 1, .* does not fit its declared type"):
            env.from_collection([fit[0], misfit], type_info=ints)
