"""print() shows what PyFlink 2.3 prints. Every expected text below is what PyFlink 2.3.0 (on
Java 17) printed for the same value and declared type, from ``from_collection(values,
type_info=t).print()`` and ``.map(f, output_type=t).print()``: Java's toString for typed records
(Flink's Tuple, the JDK's numbers and times, Flink's Row nested in a Tuple, HashMap order), PyFlink's
own ``+I[a,b]`` for a ROW type, Python's str for untyped (pickled) values."""
import datetime
from decimal import Decimal

import pytest

from runtime.common import Row, RowKind, Types
from runtime.connectors.java_strings import printed_text
from runtime_env import job_env

T = Types


@pytest.mark.parametrize("value, type_info, text", [
    (("hi", 1, 30, 7), T.TUPLE([T.STRING(), T.INT(), T.LONG(), T.LONG()]), "(hi,1,30,7)"),
    (("a", None), T.TUPLE([T.STRING(), T.STRING()]), "(a,null)"),
    (("a", Row(1, True), [1, 2], {"k": 1.5}),
     T.TUPLE([T.STRING(), T.ROW([T.INT(), T.BOOLEAN()]), T.PRIMITIVE_ARRAY(T.INT()), T.MAP(T.STRING(), T.DOUBLE())]),
     "(a,+I[1, true],[1, 2],{k=1.5})"),
    # A ROW type: PyFlink's Python map, items by Python's str, no space after the comma.
    (Row("x", 0, None), T.ROW([T.STRING(), T.INT(), T.STRING()]), "+I[x,0,None]"),
    (Row(name="x", n=2.5, b=True), T.ROW_NAMED(["name", "n", "b"], [T.STRING(), T.DOUBLE(), T.BOOLEAN()]),
     "+I[x,2.5,True]"),
    (Row(1e7, 0.0001, None), T.ROW([T.DOUBLE(), T.DOUBLE(), T.STRING()]), "+I[10000000.0,0.0001,None]"),
    (Row("a", Row(1, True), (1, 2)), T.ROW([T.STRING(), T.ROW([T.INT(), T.BOOLEAN()]), T.TUPLE([T.INT(), T.INT()])]),
     "+I[a,<Row(1, True)>,(1, 2)]"),
    # Java's HashMap order: buckets by the spread String/Integer hash, a bucket in insertion order.
    ({"a": 1.5, "b": 2.0, "zz": 3.0, "q": 1.0}, T.MAP(T.STRING(), T.DOUBLE()), "{zz=3.0, a=1.5, q=1.0, b=2.0}"),
    ({17: "x", 1: "y", 33: "z"}, T.MAP(T.INT(), T.STRING()), "{17=x, 1=y, 33=z}"),
    (1, T.INT(), "1"),
    (-5, T.INT(), "-5"),
    ("a b", T.STRING(), "a b"),
    (True, T.BOOLEAN(), "true"),
    (False, T.BOOLEAN(), "false"),
    (1.0, T.DOUBLE(), "1.0"),
    (100.0, T.DOUBLE(), "100.0"),
    (0.001, T.DOUBLE(), "0.001"),
    (0.002, T.DOUBLE(), "0.002"),
    (0.0001, T.DOUBLE(), "1.0E-4"),
    (12345678.9, T.DOUBLE(), "1.23456789E7"),
    (1e7, T.DOUBLE(), "1.0E7"),
    (9999999.0, T.DOUBLE(), "9999999.0"),
    (123456789012.0, T.DOUBLE(), "1.23456789012E11"),
    (-2.5e-5, T.DOUBLE(), "-2.5E-5"),
    (float("nan"), T.DOUBLE(), "NaN"),
    (float("-inf"), T.DOUBLE(), "-Infinity"),
    (163.3, T.FLOAT(), "163.3"),
    (0.1, T.FLOAT(), "0.1"),
    (1e7, T.FLOAT(), "1.0E7"),
    (3.4e38, T.FLOAT(), "3.4E38"),
    (1e-5, T.FLOAT(), "1.0E-5"),
    (Decimal("1E+3"), T.BIG_DEC(), "1E+3"),
    (Decimal("1.50"), T.BIG_DEC(), "1.50"),
    (Decimal("0.0000001"), T.BIG_DEC(), "1E-7"),
    (datetime.date(2024, 1, 2), T.SQL_DATE(), "2024-01-02"),
    (datetime.time(3, 4, 5), T.SQL_TIME(), "03:04:05"),
    (datetime.datetime(2024, 1, 2, 3, 4, 5), T.SQL_TIMESTAMP(), "2024-01-02 03:04:05.0"),
    (datetime.datetime(2024, 1, 2, 3, 4, 5, 120000), T.SQL_TIMESTAMP(), "2024-01-02 03:04:05.12"),
    (datetime.datetime(2024, 1, 2, 3, 4, tzinfo=datetime.timezone.utc), T.INSTANT(), "2024-01-02T03:04:00Z"),
    (datetime.datetime(2024, 1, 2, 3, 4, 5, 120000, tzinfo=datetime.timezone.utc), T.INSTANT(),
     "2024-01-02T03:04:05.120Z"),
])
def test_a_typed_record_prints_as_pyflink_prints_it(value, type_info, text):
    assert printed_text(value, type_info) == text


@pytest.mark.parametrize("value, text", [
    (("c", 2.5), "('c', 2.5)"),
    (Row("x", 1), "<Row('x', 1)>"),
    (Row(a=1, b="q"), "Row(a=1, b='q')"),
    ("s", "s"),
    ([1, None], "[1, None]"),
    ({"k": 1.5}, "{'k': 1.5}"),
    (1e7, "10000000.0"),
    (True, "True"),
])
def test_an_untyped_record_prints_as_python_str(value, text):
    assert printed_text(value, None) == text
    assert printed_text(value, T.PICKLED_BYTE_ARRAY()) == text


def test_a_row_of_another_kind_says_so():
    row = Row("x", 1)
    row.set_row_kind(RowKind.UPDATE_AFTER)
    assert printed_text(row, T.ROW([T.STRING(), T.INT()])) == "+U[x,1]"
    nested = T.TUPLE([T.ROW([T.STRING(), T.INT()])])
    assert printed_text((row,), nested) == "(+U[x, 1])"


def test_java_times_follow_the_jdk(value=datetime.datetime(2024, 1, 2, 3, 4)):
    # LocalDateTime/LocalTime.toString leave out zero seconds and group the fraction by three.
    assert printed_text(value, T.LOCAL_DATE_TIME()) == "2024-01-02T03:04"
    assert printed_text(value.replace(second=5, microsecond=500000), T.LOCAL_DATE_TIME()) == "2024-01-02T03:04:05.500"
    assert printed_text(datetime.time(10, 15, 0, 1000), T.LOCAL_TIME()) == "10:15:00.001"
    assert printed_text(datetime.time(10, 15, 0, 123456), T.LOCAL_TIME()) == "10:15:00.123456"


def test_print_of_a_job_shows_each_stream_as_pyflink_does(spark, tmp_path):
    env = job_env(tmp_path, 1)
    pair = T.TUPLE([T.STRING(), T.DOUBLE()])
    env.from_collection([("a", 1.0), ("b", 1e7)], type_info=pair).print("tuple")
    env.from_collection([("c", 2.5)]).print("untyped")
    rows = env.from_collection([Row("d", 3)], type_info=T.ROW([T.STRING(), T.INT()]))
    rows.print("row")
    rows.map(lambda r: (r[0], r[1] * 0.5), output_type=pair).print("mapped")
    (env.from_collection([("k", 1), ("k", 2)], type_info=T.TUPLE([T.STRING(), T.LONG()]))
        .key_by(lambda t: t[0]).sum(1).print("sum"))
    result = env.execute("print formats")
    assert sorted(result.printed) == sorted([
        "tuple> (a,1.0)", "tuple> (b,1.0E7)", "untyped> ('c', 2.5)", "row> +I[d,3]", "mapped> (d,1.5)",
        "sum> (k,1)", "sum> (k,3)"])
