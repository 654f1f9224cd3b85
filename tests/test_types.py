"""Row, RowKind, TypeInformation/Types, type inference and the Arrow record conversion."""
import copy
import datetime
import enum
import pickle
from collections import namedtuple
from decimal import Decimal

import pyarrow as pa
import pytest

from runtime.common.arrow import arrow_schema, arrow_to_records, records_to_arrow
from runtime.common.typeinfo import RowTypeInfo, TupleTypeInfo, TypeInformation, Types, infer_type_info
from runtime.common.types import Row, RowKind


class Point:
    """A module-level class, so pickled values of it can be loaded again."""

    def __init__(self, x, y):
        self.x, self.y = x, y

    def __eq__(self, other):
        return isinstance(other, Point) and (self.x, self.y) == (other.x, other.y)

    def __repr__(self):
        return f"Point({self.x}, {self.y})"


class Color(enum.IntEnum):
    RED = 1


Pair = namedtuple("Pair", "a b")


def roundtrip(records, type_info):
    return arrow_to_records(records_to_arrow(records, type_info), type_info)


# --------------------------------------------------------------------------- RowKind


def test_row_kind_short_strings_and_values():
    assert [k.short_string() for k in RowKind] == ["+I", "-U", "+U", "-D"]
    assert [str(k) for k in RowKind] == ["+I", "-U", "+U", "-D"]
    assert [k.value for k in RowKind] == [0, 1, 2, 3]
    assert RowKind.from_byte_value(3) is RowKind.DELETE
    assert RowKind.from_short_string("-U") is RowKind.UPDATE_BEFORE
    with pytest.raises(ValueError, match=r"'\*X'"):
        RowKind.from_short_string("*X")


# --------------------------------------------------------------------------- Row


def test_positional_row():
    row = Row("a", 1)
    assert isinstance(row, tuple)
    assert row[0] == "a" and row[1] == 1 and row[-1] == 1
    assert row[0:1] == ("a",)
    assert len(row) == 2
    assert tuple(row) == ("a", 1)
    word, count = row
    assert (word, count) == ("a", 1)
    assert repr(row) == "<Row('a', 1)>"  # PyFlink's repr
    assert str(row) == "<Row('a', 1)>"
    assert not hasattr(row, "_fields")
    assert row.get_row_kind() is RowKind.INSERT


def test_named_row_keeps_given_order():
    row = Row(word="a", count=1)
    assert tuple(row) == ("a", 1)
    assert row._fields == ["word", "count"]
    assert repr(row) == "Row(word='a', count=1)"
    assert Row(b=1, a=2)._fields == ["b", "a"]


def test_named_row_field_access():
    row = Row(word="a", count=1)
    assert row.word == "a"
    assert row["word"] == "a"
    assert row[1] == 1
    # ``count``/``index`` are tuple methods; a field of that name wins.
    assert row.count == 1
    assert row["count"] == 1
    assert Row("x", "x").count("x") == 2
    assert Row(word="a").index("a") == 0
    with pytest.raises(AttributeError):
        row.missing


def test_missing_field_name_error_names_field_and_fields():
    row = Row(word="a", count=1)
    with pytest.raises(KeyError) as err:
        row["cnt"]
    assert "'cnt'" in str(err.value) and "'word', 'count'" in str(err.value)
    # PyFlink raises ValueError here; both kinds of handler work.
    with pytest.raises(ValueError):
        row["cnt"]
    with pytest.raises(KeyError, match="no field names"):
        Row("a")["word"]


def test_row_is_immutable_and_has_no_ad_hoc_attributes():
    row = Row(word="a")
    with pytest.raises(TypeError, match="immutable"):
        row[0] = "b"
    with pytest.raises(AttributeError):
        row.other = 1


def test_row_factory():
    Person = Row("name", "age")
    assert repr(Person) == "<Row('name', 'age')>"
    alice = Person("Alice", 11)
    assert alice == Row(name="Alice", age=11)
    assert repr(alice) == "Row(name='Alice', age=11)"
    assert alice.name == "Alice" and alice.age == 11
    with pytest.raises(ValueError, match="expected 2 values"):
        Person("Alice", 11, "extra")
    with pytest.raises(ValueError, match="expected 2 values"):
        Person("Alice")
    with pytest.raises(TypeError, match="not a row factory"):
        Row("a", 1)("x", "y")


def test_row_args_and_kwargs_together_rejected():
    with pytest.raises(ValueError, match="both args and kwargs"):
        Row(1, b=2)


def test_row_equality_and_hash():
    assert Row("a", 1) == Row("a", 1)
    assert Row(word="a", count=1) == Row(word="a", count=1)
    assert not (Row(word="a", count=1) != Row(word="a", count=1))
    assert Row(word="a", count=1) != Row("a", 1)
    assert Row(word="a", count=1) != Row(w="a", count=1)
    assert Row("a", 1) != Row("a", 2)
    # A Row is not equal to a plain tuple, in either direction (as PyFlink).
    assert Row("a", 1) != ("a", 1)
    assert ("a", 1) != Row("a", 1)
    assert hash(Row("a", 1)) == hash(("a", 1))
    assert hash(Row(word="a", count=1)) == hash(("a", 1))
    assert len({Row("a", 1), Row("a", 1), Row("b", 1)}) == 2
    assert sorted([Row(2, "b"), Row(1, "z")]) == [Row(1, "z"), Row(2, "b")]


def test_row_kind_is_part_of_equality():
    deleted = Row.of_kind(RowKind.DELETE, "a", 1)
    assert deleted.get_row_kind() is RowKind.DELETE
    assert deleted != Row("a", 1)
    row = Row("a", 1)
    row.set_row_kind(RowKind.DELETE)
    assert row == deleted
    with pytest.raises(TypeError):
        row.set_row_kind("-D")


def test_set_field_names():
    row = Row("a", 1)
    row.set_field_names(["word", "count"])
    assert row == Row(word="a", count=1)
    assert row.word == "a"
    with pytest.raises(ValueError, match="1 field names"):
        row.set_field_names(["only"])


def test_as_dict():
    row = Row(key=1, value=Row(name="a", age=2), items=[Row(x=1)], by={"k": Row(y=2)})
    assert row.as_dict() == {"key": 1, "value": Row(name="a", age=2), "items": [Row(x=1)],
                             "by": {"k": Row(y=2)}}
    assert row.as_dict(recursive=True) == {"key": 1, "value": {"name": "a", "age": 2},
                                           "items": [{"x": 1}], "by": {"k": {"y": 2}}}
    with pytest.raises(TypeError):
        Row(1, 2).as_dict()


@pytest.mark.parametrize("protocol", range(2, pickle.HIGHEST_PROTOCOL + 1))
def test_row_pickles(protocol):
    named = Row.of_kind(RowKind.UPDATE_AFTER, word="a", count=1)
    for row in (Row("a", 1), named, Row(outer=Row("in", [1, 2])), Row()):
        back = pickle.loads(pickle.dumps(row, protocol))
        assert back == row
        assert type(back) is Row
        assert repr(back) == repr(row)
        assert back.get_row_kind() is row.get_row_kind()
    assert pickle.loads(pickle.dumps(named, protocol)).word == "a"


def test_row_copies():
    row = Row(word="a", items=[1])
    deep = copy.deepcopy(row)
    assert deep == row and deep.items is not row.items
    assert copy.copy(row) == row


# --------------------------------------------------------------------------- Types


def test_type_reprs():
    reprs = {
        Types.STRING(): "String",
        Types.BYTE(): "Byte",
        Types.BOOLEAN(): "Boolean",
        Types.SHORT(): "Short",
        Types.INT(): "Integer",
        Types.LONG(): "Long",
        Types.FLOAT(): "Float",
        Types.DOUBLE(): "Double",
        Types.CHAR(): "Char",
        Types.BIG_INT(): "BigInteger",
        Types.BIG_DEC(): "BigDecimal",
        Types.INSTANT(): "Instant",
        Types.SQL_DATE(): "Date",
        Types.SQL_TIME(): "Time",
        Types.SQL_TIMESTAMP(): "Timestamp",
        Types.LOCAL_DATE(): "LocalDate",
        Types.LOCAL_TIME(): "LocalTime",
        Types.LOCAL_DATE_TIME(): "LocalDateTime",
        Types.PICKLED_BYTE_ARRAY(): "PickledByteArray",
        Types.PRIMITIVE_ARRAY(Types.INT()): "PrimitiveArray<Integer>",
        Types.BASIC_ARRAY(Types.STRING()): "BasicArray<String>",
        Types.OBJECT_ARRAY(Types.ROW([Types.LONG()])): "ObjectArray<Row(Long)>",
        Types.LIST(Types.STRING()): "List<String>",
        Types.MAP(Types.STRING(), Types.LONG()): "Map<String, Long>",
        Types.TUPLE([Types.STRING(), Types.LONG()]): "Tuple2<String, Long>",
        Types.TUPLE([]): "Tuple0<>",
        Types.ROW([Types.STRING(), Types.LONG()]): "Row(String, Long)",
        Types.ROW_NAMED(["word", "count"], [Types.STRING(), Types.LONG()]):
            "Row(word: String, count: Long)",
        Types.LIST(Types.MAP(Types.STRING(), Types.TUPLE([Types.INT(), Types.DOUBLE()]))):
            "List<Map<String, Tuple2<Integer, Double>>>",
    }
    for type_info, text in reprs.items():
        assert repr(type_info) == text
        assert str(type_info) == text


def test_type_equality_and_hash():
    assert Types.STRING() == Types.STRING()
    assert Types.STRING() != Types.LONG()
    assert Types.STRING() != "String"
    assert Types.TUPLE([Types.STRING(), Types.LONG()]) == Types.TUPLE([Types.STRING(), Types.LONG()])
    assert Types.TUPLE([Types.STRING(), Types.LONG()]) != Types.TUPLE([Types.STRING(), Types.INT()])
    assert Types.TUPLE([Types.STRING()]) != Types.ROW([Types.STRING()])
    assert Types.ROW_NAMED(["a"], [Types.STRING()]) == Types.ROW_NAMED(["a"], [Types.STRING()])
    assert Types.ROW_NAMED(["a"], [Types.STRING()]) != Types.ROW_NAMED(["b"], [Types.STRING()])
    # Given names change the Arrow schema and the decoded Rows, so they are part of equality.
    assert Types.ROW([Types.STRING()]) != Types.ROW_NAMED(["f0"], [Types.STRING()])
    assert Types.LIST(Types.INT()) != Types.BASIC_ARRAY(Types.INT())
    assert Types.MAP(Types.STRING(), Types.INT()) == Types.MAP(Types.STRING(), Types.INT())
    assert Types.INSTANT() == Types.INSTANT()
    keys = {Types.STRING(): 1, Types.LIST(Types.LONG()): 2,
            Types.ROW_NAMED(["a"], [Types.LONG()]): 3}
    assert keys[Types.STRING()] == 1
    assert keys[Types.LIST(Types.LONG())] == 2
    assert keys[Types.ROW_NAMED(["a"], [Types.LONG()])] == 3
    assert hash(Types.TUPLE([Types.LONG()])) == hash(Types.TUPLE([Types.LONG()]))


def test_type_infos_pickle():
    t = Types.ROW_NAMED(["a", "b"], [Types.LIST(Types.INSTANT()), Types.LOCAL_DATE()])
    assert pickle.loads(pickle.dumps(t)) == t


def test_to_arrow():
    assert Types.STRING().to_arrow() == pa.string()
    assert Types.BYTE().to_arrow() == pa.int8()
    assert Types.SHORT().to_arrow() == pa.int16()
    assert Types.INT().to_arrow() == pa.int32()
    assert Types.LONG().to_arrow() == pa.int64()
    assert Types.FLOAT().to_arrow() == pa.float32()
    assert Types.DOUBLE().to_arrow() == pa.float64()
    assert Types.BOOLEAN().to_arrow() == pa.bool_()
    assert Types.CHAR().to_arrow() == pa.string()
    assert Types.BIG_INT().to_arrow() == pa.decimal128(38, 0)
    assert Types.BIG_DEC().to_arrow() == pa.string()   # BigDecimal.toString: each value keeps its scale
    assert Types.INSTANT().to_arrow() == pa.timestamp("ms", tz="UTC")
    assert Types.SQL_TIMESTAMP().to_arrow() == pa.timestamp("us")
    assert Types.LOCAL_DATE_TIME().to_arrow() == pa.timestamp("us")
    assert Types.SQL_DATE().to_arrow() == pa.date32()
    assert Types.SQL_TIME().to_arrow() == pa.time64("us")
    assert Types.PICKLED_BYTE_ARRAY().to_arrow() == pa.binary()
    assert Types.PRIMITIVE_ARRAY(Types.BYTE()).to_arrow() == pa.binary()
    assert Types.PRIMITIVE_ARRAY(Types.INT()).to_arrow() == pa.list_(pa.int32())
    assert Types.LIST(Types.STRING()).to_arrow() == pa.list_(pa.string())
    assert Types.MAP(Types.STRING(), Types.LONG()).to_arrow() == pa.map_(pa.string(), pa.int64())
    assert Types.TUPLE([Types.STRING(), Types.LONG()]).to_arrow() == pa.struct(
        [("f0", pa.string()), ("f1", pa.int64())])
    assert Types.ROW([Types.STRING()]).to_arrow() == pa.struct([("f0", pa.string())])
    assert Types.ROW_NAMED(["word", "count"], [Types.STRING(), Types.INT()]).to_arrow() == pa.struct(
        [("word", pa.string()), ("count", pa.int32())])


def test_arrow_schema():
    assert arrow_schema(Types.ROW_NAMED(["word", "count"], [Types.STRING(), Types.LONG()])) == \
        pa.schema([("word", pa.string()), ("count", pa.int64())])
    assert arrow_schema(Types.LONG()) == pa.schema([("f0", pa.int64())])


def test_composite_accessors():
    row = Types.ROW_NAMED(["word", "count"], [Types.STRING(), Types.LONG()])
    assert isinstance(row, RowTypeInfo)
    assert row.get_field_names() == ["word", "count"]
    assert row.get_field_types() == [Types.STRING(), Types.LONG()]
    assert row.get_field_index("count") == 1
    assert row.get_field_index("nope") == -1
    assert row.get_arity() == 2 and row.arity == 2
    assert Types.ROW([Types.STRING(), Types.LONG()]).get_field_names() == ["f0", "f1"]
    tup = Types.TUPLE([Types.STRING(), Types.LONG(), Types.INT()])
    assert isinstance(tup, TupleTypeInfo)
    assert tup.arity == 3
    assert tup.get_field_names() == ["f0", "f1", "f2"]
    assert tup.is_tuple_type() and not row.is_tuple_type()
    assert Types.LONG().arity == 1


def test_is_basic_type():
    assert Types.STRING().is_basic_type()
    assert Types.LONG().is_basic_type()
    assert Types.BIG_DEC().is_basic_type()
    assert Types.INSTANT().is_basic_type()
    assert not Types.SQL_DATE().is_basic_type()
    assert not Types.PICKLED_BYTE_ARRAY().is_basic_type()
    assert not Types.TUPLE([Types.LONG()]).is_basic_type()
    assert not Types.LIST(Types.LONG()).is_basic_type()


def test_field_index():
    tup = Types.TUPLE([Types.STRING(), Types.LONG()])
    assert tup.field_index(0) == 0
    assert tup.field_index(1) == 1
    assert tup.field_index("f1") == 1
    row = Types.ROW_NAMED(["word", "count"], [Types.STRING(), Types.LONG()])
    assert row.field_index("count") == 1
    assert row.field_index(0) == 0
    assert Types.ROW([Types.STRING(), Types.LONG()]).field_index("f1") == 1
    assert Types.STRING().field_index(0) == 0


def test_field_index_errors_name_field_type_and_valid_fields():
    row = Types.ROW_NAMED(["word", "count"], [Types.STRING(), Types.LONG()])
    with pytest.raises(ValueError) as err:
        row.field_index("cnt")
    assert str(err.value) == ("field 'cnt' is not valid for type Row(word: String, count: Long); "
                              "valid fields are positions 0..1 or names 'word', 'count'")
    with pytest.raises(ValueError) as err:
        Types.TUPLE([Types.STRING(), Types.LONG()]).field_index(2)
    assert str(err.value) == ("field 2 is not valid for type Tuple2<String, Long>; "
                              "valid fields are positions 0..1 or names 'f0', 'f1'")
    with pytest.raises(ValueError, match="field 'f2' is not valid for type Tuple2<String, Long>"):
        Types.TUPLE([Types.STRING(), Types.LONG()]).field_index("f2")
    with pytest.raises(ValueError, match="field -1 is not valid"):
        Types.TUPLE([Types.STRING()]).field_index(-1)
    with pytest.raises(ValueError) as err:
        Types.STRING().field_index("word")
    assert "field 'word' is not valid for type String" in str(err.value)
    assert "only field is position 0" in str(err.value)
    assert "Types.ROW_NAMED" in str(err.value)
    with pytest.raises(ValueError, match="field 1 is not valid for type Long"):
        Types.LONG().field_index(1)
    with pytest.raises(ValueError, match="field True is not valid"):
        Types.TUPLE([Types.STRING(), Types.LONG()]).field_index(True)


def test_constructor_validation():
    with pytest.raises(TypeError, match=r"call it: Types.STRING\(\)"):
        Types.TUPLE([Types.STRING])
    with pytest.raises(TypeError, match="list of field types"):
        Types.ROW(Types.STRING())
    with pytest.raises(ValueError, match="1 field names"):
        Types.ROW_NAMED(["a"], [Types.STRING(), Types.LONG()])
    with pytest.raises(ValueError, match="unique"):
        Types.ROW_NAMED(["a", "a"], [Types.STRING(), Types.LONG()])
    with pytest.raises(TypeError, match="primitive array"):
        Types.PRIMITIVE_ARRAY(Types.STRING())
    with pytest.raises(TypeError, match="basic array"):
        Types.BASIC_ARRAY(Types.LIST(Types.INT()))
    with pytest.raises(TypeError, match="element type"):
        Types.LIST("String")


# --------------------------------------------------------------------------- inference


@pytest.mark.parametrize("values, expected", [
    (["a", "b"], "String"),
    ([True, False], "Boolean"),
    ([1, 2], "Long"),
    ([1.5, 2.0], "Double"),
    (["a", None], "String"),
    ([("a", 1), ("b", 2)], "Tuple2<String, Long>"),
    ([("a", None), ("b", 2)], "Tuple2<String, Long>"),
    ([("a", None)], "Tuple2<String, PickledByteArray>"),
    ([("a", ("b", 1.0))], "Tuple2<String, Tuple2<String, Double>>"),
    ([Row(word="a", count=1), Row(word="b", count=2)], "Row(word: String, count: Long)"),
    ([Row("a", 1)], "Row(String, Long)"),
    ([("k", Row(x=True))], "Tuple2<String, Row(x: Boolean)>"),
    ([], "PickledByteArray"),
    ([None], "PickledByteArray"),
    ([1, "a"], "PickledByteArray"),
    ([1, True], "PickledByteArray"),
    ([1, 2.5], "PickledByteArray"),
    ([2 ** 63], "PickledByteArray"),
    ([-(2 ** 63)], "Long"),
    ([[1, 2]], "PickledByteArray"),
    ([{"a": 1}], "PickledByteArray"),
    ([b"x"], "PickledByteArray"),
    ([Color.RED], "PickledByteArray"),
    ([Pair(1, 2)], "PickledByteArray"),
    ([Point(1, 2)], "PickledByteArray"),
    ([("a", 1), ("b",)], "PickledByteArray"),
    ([Row(word="a"), Row("a")], "PickledByteArray"),
    ([Row(word="a"), Row(w="a")], "PickledByteArray"),
    ([Row.of_kind(RowKind.DELETE, "a")], "PickledByteArray"),
    ([Row("a"), ("a",)], "PickledByteArray"),
])
def test_infer_type_info(values, expected):
    assert repr(infer_type_info(values)) == expected


def test_infer_accepts_any_iterable():
    assert infer_type_info(iter(["a"])) == Types.STRING()
    assert infer_type_info(x for x in [1]) == Types.LONG()


@pytest.mark.parametrize("values", [
    ["a", None, "c"],
    [1, -(2 ** 63), 2 ** 63 - 1],
    [True, None],
    [1.5, float("inf")],
    [("a", 1), ("b", None)],
    [Row(word="a", count=1), Row(word=None, count=2)],
    [Row("a", (1, "x")), Row("b", None)],
    [2 ** 80, 1],
    [Color.RED, Pair(1, 2), {1, 2}, None, Point(1, 2)],
    [("a", [1, 2], {"k": Row(x=1)})],
])
def test_inferred_types_round_trip_exactly(values):
    type_info = infer_type_info(values)
    back = roundtrip(values, type_info)
    assert back == values
    assert [type(v) for v in back] == [type(v) for v in values]
    assert [repr(v) for v in back] == [repr(v) for v in values]


# --------------------------------------------------------------------------- Arrow conversion


def test_tuples_round_trip_as_columns():
    t = Types.TUPLE([Types.STRING(), Types.LONG()])
    records = [("a", 1), ("b", None), (None, 3)]
    batch = records_to_arrow(records, t)
    assert batch.schema == pa.schema([("f0", pa.string()), ("f1", pa.int64())])
    assert batch.column(0).to_pylist() == ["a", "b", None]
    assert batch.column(t.field_index("f1")).to_pylist() == [1, None, 3]
    back = arrow_to_records(batch, t)
    assert back == [("a", 1), ("b", None), (None, 3)]
    assert all(type(r) is tuple for r in back)


def test_named_rows_round_trip():
    t = Types.ROW_NAMED(["word", "count"], [Types.STRING(), Types.LONG()])
    records = [Row(word="a", count=1), Row(word="b", count=2)]
    batch = records_to_arrow(records, t)
    assert batch.schema == pa.schema([("word", pa.string()), ("count", pa.int64())])
    assert batch.column(t.field_index("count")).to_pylist() == [1, 2]
    back = arrow_to_records(batch, t)
    assert back == [Row(word="a", count=1), Row(word="b", count=2)]
    assert repr(back) == "[Row(word='a', count=1), Row(word='b', count=2)]"
    assert back[1].count == 2


def test_named_rows_match_a_row_type_by_name():
    t = Types.ROW_NAMED(["word", "count"], [Types.STRING(), Types.LONG()])
    back = roundtrip([Row(count=1, word="a"), ("b", 2), Row("c", 3), {"count": 4, "word": "d"}], t)
    assert back == [Row(word="a", count=1), Row(word="b", count=2), Row(word="c", count=3),
                    Row(word="d", count=4)]
    with pytest.raises(TypeError, match="does not have the fields"):
        records_to_arrow([Row(word="a", total=1)], t)


def test_unnamed_rows_round_trip_named_f0_on():
    # PyFlink's RowCoderImpl names the Rows it decodes by the type's field names, f0.. for ROW.
    t = Types.ROW([Types.STRING(), Types.DOUBLE()])
    back = roundtrip([Row("a", 1.5), ("b", None)], t)
    assert back == [Row(f0="a", f1=1.5), Row(f0="b", f1=None)]
    assert repr(back[0]) == "Row(f0='a', f1=1.5)"


def test_nested_lists_maps_and_rows_round_trip():
    t = Types.TUPLE([
        Types.STRING(),
        Types.LIST(Types.LIST(Types.INT())),
        Types.MAP(Types.STRING(), Types.LIST(Types.ROW_NAMED(["x", "y"], [Types.LONG(), Types.STRING()]))),
        Types.OBJECT_ARRAY(Types.TUPLE([Types.STRING(), Types.MAP(Types.INT(), Types.DOUBLE())])),
        Types.MAP(Types.STRING(), Types.LONG()),
    ])
    records = [
        ("a", [[1, 2], [], None, [3]], {"k": [Row(x=1, y="p"), None], "e": [], "n": None},
         [("t", {1: 0.5, 2: None}), None], {"z": 1, "y": None}),
        ("b", None, None, None, None),
        ("c", [], {}, [], {}),
    ]
    assert roundtrip(records, t) == records


def test_sliced_batches_decode_their_own_rows():
    t = Types.TUPLE([Types.LIST(Types.ROW([Types.LONG()])), Types.MAP(Types.STRING(), Types.PICKLED_BYTE_ARRAY())])
    records = [([Row(1)], {"a": {1}}), (None, None), ([Row(2), Row(3)], {"b": Point(1, 2)})]
    batch = records_to_arrow(records, t)
    rows = [Row(f0=2), Row(f0=3)]       # named f0.., as PyFlink's RowCoder decodes a Types.ROW
    assert arrow_to_records(batch.slice(1), t) == [(None, None), (rows, {"b": Point(1, 2)})]
    assert arrow_to_records(batch.slice(2, 1), t) == [(rows, {"b": Point(1, 2)})]


def test_pickled_objects_round_trip():
    t = Types.PICKLED_BYTE_ARRAY()
    records = [Point(1, 2), {"a": [1, 2]}, None, Row(word="w"), (1, "x"), Color.RED]
    batch = records_to_arrow(records, t)
    assert batch.schema == pa.schema([("f0", pa.binary())])
    back = arrow_to_records(batch, t)
    assert back == records
    assert type(back[5]) is Color


def test_none_values_in_every_field_type():
    types = [Types.STRING(), Types.BYTE(), Types.BOOLEAN(), Types.SHORT(), Types.INT(), Types.LONG(),
             Types.FLOAT(), Types.DOUBLE(), Types.CHAR(), Types.BIG_INT(), Types.BIG_DEC(),
             Types.INSTANT(), Types.SQL_DATE(), Types.SQL_TIME(), Types.SQL_TIMESTAMP(),
             Types.LOCAL_DATE(), Types.LOCAL_TIME(), Types.LOCAL_DATE_TIME(),
             Types.PICKLED_BYTE_ARRAY(), Types.PRIMITIVE_ARRAY(Types.BYTE()),
             Types.PRIMITIVE_ARRAY(Types.INT()), Types.BASIC_ARRAY(Types.STRING()),
             Types.LIST(Types.LONG()), Types.MAP(Types.STRING(), Types.LONG()),
             Types.TUPLE([Types.LONG()]), Types.ROW_NAMED(["a"], [Types.LONG()])]
    t = Types.TUPLE(types)
    record = tuple([None] * len(types))
    assert roundtrip([record, record], t) == [record, record]
    # Top-level records of Tuple/Row types must not be None (as in Flink); others may.
    for single in types[:-2]:
        assert roundtrip([None, None], single) == [None, None]


def test_scalar_types_round_trip():
    utc = datetime.timezone.utc
    t = Types.TUPLE([
        Types.BYTE(), Types.SHORT(), Types.INT(), Types.FLOAT(), Types.BOOLEAN(), Types.CHAR(),
        Types.BIG_INT(), Types.BIG_DEC(), Types.INSTANT(), Types.SQL_DATE(), Types.SQL_TIME(),
        Types.SQL_TIMESTAMP(), Types.LOCAL_DATE_TIME(), Types.PRIMITIVE_ARRAY(Types.BYTE()),
        Types.PRIMITIVE_ARRAY(Types.DOUBLE()), Types.BASIC_ARRAY(Types.STRING()),
    ])
    record = (-128, 32767, 2 ** 31 - 1, 0.5, False, "c",
              10 ** 30, Decimal("12.5"), datetime.datetime(2024, 1, 2, 3, 4, 5, 6000, tzinfo=utc),
              datetime.date(2024, 2, 29), datetime.time(23, 59, 58, 123456),
              datetime.datetime(2024, 1, 2, 3, 4, 5, 123456), datetime.datetime(1969, 12, 31, 23, 0),
              b"\x00\xff", [1.0, -2.5], ["x", None])
    back = roundtrip([record], t)[0]
    assert back == record
    assert type(back[6]) is int
    assert str(back[7]) == "12.5"      # its own scale, not the column's


def test_instants_accept_epoch_millis_and_instant_likes():
    class Instant:
        def to_epoch_milli(self):
            return 1000

    utc = datetime.timezone.utc
    back = roundtrip([1000, Instant(), datetime.datetime(1970, 1, 1, 0, 0, 1, tzinfo=utc), None],
                     Types.INSTANT())
    second = datetime.datetime(1970, 1, 1, 0, 0, 1, tzinfo=utc)
    assert back == [second, second, second, None]


def test_basic_type_batch_is_one_column_f0():
    batch = records_to_arrow(["a", None, "c"], Types.STRING())
    assert batch.schema == pa.schema([("f0", pa.string())])
    assert batch.num_rows == 3
    assert arrow_to_records(batch, Types.STRING()) == ["a", None, "c"]


def test_empty_and_zero_field_records():
    t = Types.TUPLE([Types.STRING(), Types.LONG()])
    batch = records_to_arrow([], t)
    assert batch.num_rows == 0
    assert arrow_to_records(batch, t) == []
    assert roundtrip([(), ()], Types.TUPLE([])) == [(), ()]
    assert [r.as_dict() for r in roundtrip([Row()], Types.ROW([]))] == [{}]
    assert roundtrip([((),)], Types.TUPLE([Types.TUPLE([])])) == [((),)]


def test_tables_decode_batch_by_batch():
    t = Types.TUPLE([Types.STRING(), Types.LONG()])
    table = pa.Table.from_batches([records_to_arrow([("a", 1)], t), records_to_arrow([("b", 2)], t)])
    assert arrow_to_records(table, t) == [("a", 1), ("b", 2)]


def test_conversion_errors_name_the_problem():
    t = Types.ROW_NAMED(["word", "count"], [Types.STRING(), Types.LONG()])
    with pytest.raises(TypeError, match=r"field 'count' of Row\(word: String, count: Long\): "
                                        r"values do not fit Long"):
        records_to_arrow([Row(word="a", count="many")], t)
    with pytest.raises(TypeError, match="has 1 fields but type"):
        records_to_arrow([("a",)], t)
    with pytest.raises(TypeError, match="must not be None"):
        records_to_arrow([None], t)
    with pytest.raises(TypeError, match="is not a record of type"):
        records_to_arrow([5], t)
    with pytest.raises(TypeError, match="records do not fit type Long"):
        records_to_arrow(["x"], Types.LONG())
    with pytest.raises(ValueError, match="row kind DELETE"):
        records_to_arrow([Row.of_kind(RowKind.DELETE, "a", 1)], t)
    with pytest.raises(ValueError, match="batch schema does not match type Tuple2<String, Long>"):
        arrow_to_records(records_to_arrow([("a", 1)], Types.TUPLE([Types.STRING(), Types.INT()])),
                         Types.TUPLE([Types.STRING(), Types.LONG()]))
    with pytest.raises(TypeError, match="type_info must be a TypeInformation"):
        records_to_arrow([1], Types.LONG)


def test_many_records_round_trip():
    t = Types.ROW_NAMED(["word", "count", "tags"],
                        [Types.STRING(), Types.LONG(), Types.LIST(Types.STRING())])
    records = [Row(word=f"w{i}", count=i if i % 5 else None, tags=["t"] * (i % 3)) for i in range(10_000)]
    back = roundtrip(records, t)
    assert back == records
    assert back[9_999] == Row(word="w9999", count=9999, tags=[])
    assert back[5] == Row(word="w5", count=None, tags=["t", "t"])


def test_type_information_base_is_exported():
    assert isinstance(Types.STRING(), TypeInformation)
