"""The row formats (runtime.datastream.formats.json/csv/avro, RowFieldExtractorSchema): bytes as
Flink writes them, read back as Flink reads them, and records that do not parse.

Every expected byte string below is what PyFlink 2.3.0's Java schemas (flink-json and flink-csv
2.3.0, Java 17) returned for the same values; the Avro ones follow the Avro spec's binary
encoding (zig-zag varints, length-prefixed strings), which Flink's GenericDatumWriter writes.
"""
import datetime
import pickle
from decimal import Decimal

import pytest

from runtime.common import Row, Types
from runtime.common.serialization import RowFieldExtractorSchema
from runtime.datastream.formats.avro import AvroRowDeserializationSchema, AvroRowSerializationSchema
from runtime.datastream.formats.csv import CsvRowDeserializationSchema, CsvRowSerializationSchema
from runtime.datastream.formats.json import JsonRowDeserializationSchema, JsonRowSerializationSchema
from runtime.datastream.formats.row_fields import RecordParseError

EXAMPLE = Types.ROW([Types.INT(), Types.STRING()])      # the type of PyFlink's kafka_*_format.py examples


def json_ser(t):
    return JsonRowSerializationSchema.Builder().with_type_info(t).build()


def json_de(t, **options):
    b = JsonRowDeserializationSchema.Builder().type_info(t)
    if options.get("fail"):
        b = b.fail_on_missing_field()
    if options.get("ignore"):
        b = b.ignore_parse_errors()
    return b.build()


def one(name, t):
    return Types.ROW_NAMED([name], [t])


def plain(value):
    """Rows (named or not, nested too) as tuples: compares values, not field names."""
    if isinstance(value, tuple):
        return tuple(plain(v) for v in value)
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


# =============================================================================================
# JSON
# =============================================================================================

@pytest.mark.parametrize("t, value, expected", [
    (Types.INT(), 1, b'{"v":1}'),
    (Types.LONG(), 2 ** 40, b'{"v":1099511627776}'),
    (Types.SHORT(), 7, b'{"v":7}'),
    (Types.BYTE(), -3, b'{"v":-3}'),
    (Types.BOOLEAN(), True, b'{"v":true}'),
    (Types.FLOAT(), 0.1, b'{"v":0.1}'),
    (Types.FLOAT(), 3.4028235e38, b'{"v":3.4028235E38}'),
    (Types.DOUBLE(), 1e20, b'{"v":1.0E20}'),
    (Types.DOUBLE(), 1.0, b'{"v":1.0}'),
    (Types.DOUBLE(), 123456789.0, b'{"v":1.23456789E8}'),
    (Types.DOUBLE(), 1e-5, b'{"v":1.0E-5}'),
    (Types.DOUBLE(), float("nan"), b'{"v":"NaN"}'),
    (Types.DOUBLE(), float("-inf"), b'{"v":"-Infinity"}'),
    (Types.STRING(), "x,y", b'{"v":"x,y"}'),
    (Types.STRING(), 'a"b\n\u00e9\u2028<', b'{"v":"a\\"b\\n\xc3\xa9\xe2\x80\xa8<"}'),
    (Types.STRING(), "a\x1fb\x7f\x00", b'{"v":"a\\u001Fb\x7f\\u0000"}'),
    (Types.BIG_DEC(), Decimal("1.50"), b'{"v":1.50}'),
    (Types.BIG_DEC(), Decimal("1E+3"), b'{"v":1000}'),
    (Types.BIG_INT(), 123456789012345678901234567890, b'{"v":123456789012345678901234567890}'),
    (Types.SQL_DATE(), datetime.date(2024, 1, 7), b'{"v":"2024-01-07"}'),
    (Types.SQL_TIME(), datetime.time(10, 30, 5), b'{"v":"10:30:05Z"}'),
    (Types.SQL_TIMESTAMP(), datetime.datetime(2024, 1, 7, 10, 30, 5, 123000), b'{"v":"2024-01-07T10:30:05.123Z"}'),
    (Types.SQL_TIMESTAMP(), datetime.datetime(2024, 1, 7, 10, 30, 5), b'{"v":"2024-01-07T10:30:05Z"}'),
    (Types.INSTANT(), datetime.datetime(2024, 1, 7, 10, 30, 5, 123000, datetime.timezone.utc),
     b'{"v":"2024-01-07T10:30:05.123Z"}'),
    (Types.PRIMITIVE_ARRAY(Types.BYTE()), b"\x00\x01\xff", b'{"v":"AAH/"}'),
    (Types.BASIC_ARRAY(Types.STRING()), ["a", None], b'{"v":["a",null]}'),
    (Types.PRIMITIVE_ARRAY(Types.INT()), [1, 2], b'{"v":[1,2]}'),
    (Types.LIST(Types.STRING()), ["p", "q"], b'{"v":["p","q"]}'),
    (Types.OBJECT_ARRAY(Types.ROW([Types.INT()])), [Row(1)], b'{"v":[{"f0":1}]}'),
    (Types.MAP(Types.STRING(), Types.INT()), {"k": 3}, b'{"v":{"k":3}}'),
    (Types.ROW_NAMED(["x", "y"], [Types.INT(), Types.DOUBLE()]), Row(x=5, y=2.5), b'{"v":{"x":5,"y":2.5}}'),
    (Types.INT(), None, b'{"v":null}'),
])
def test_json_writes_what_flink_writes(t, value, expected):
    schema = json_ser(one("v", t))
    assert schema.serialize(Row(value)) == expected


def test_json_example_rows_in_field_order_and_back():
    ser, de = json_ser(EXAMPLE), json_de(EXAMPLE)
    rows = [Row(1, "hi"), Row(2, "hello"), Row(None, None)]
    data = [ser.serialize(r) for r in rows]
    assert data == [b'{"f0":1,"f1":"hi"}', b'{"f0":2,"f1":"hello"}', b'{"f0":null,"f1":null}']
    back = [de.deserialize(b) for b in data]
    assert plain(back) == plain(rows) and back[0].as_dict() == {"f0": 1, "f1": "hi"}
    named = Types.ROW_NAMED(["id", "name"], [Types.INT(), Types.STRING()])
    assert json_ser(named).serialize(Row(id=6, name="hello")) == b'{"id":6,"name":"hello"}'


def test_json_round_trips_every_type():
    t = Types.ROW_NAMED(
        ["i", "f", "d", "dec", "date", "time", "ts", "bytes", "arr", "m", "row"],
        [Types.INT(), Types.FLOAT(), Types.DOUBLE(), Types.BIG_DEC(), Types.SQL_DATE(), Types.SQL_TIME(),
         Types.SQL_TIMESTAMP(), Types.PRIMITIVE_ARRAY(Types.BYTE()), Types.BASIC_ARRAY(Types.STRING()),
         Types.MAP(Types.STRING(), Types.LONG()), Types.ROW_NAMED(["x"], [Types.BOOLEAN()])])
    row = Row(i=-5, f=0.5, d=1e20, dec=Decimal("12.5"), date=datetime.date(2024, 2, 29),
              time=datetime.time(23, 59, 59), ts=datetime.datetime(2024, 1, 7, 10, 30, 5, 123456),
              bytes=b"\x00\xff", arr=["a", None], m={"k": 2 ** 40}, row=Row(x=True))
    assert json_de(t).deserialize(json_ser(t).serialize(row)) == row   # named as the type


@pytest.mark.parametrize("message, expected", [
    (b'{"f0":1,"f1":"a"}', Row(1, "a")),
    (b'{"f0":1}', Row(1, None)),                               # missing: null
    (b'{"f0":"5","f1":"a"}', Row(5, "a")),                     # Integer.parseInt of a text
    (b'{"f0":1.7,"f1":"a"}', Row(1, "a")),                     # asInt truncates
    (b'{"f0":1,"f1":5}', Row(1, "5")),
    (b'{"f0":1,"f1":{"a":[1]}}', Row(1, '{"a":[1]}')),         # a STRING field takes an object's JSON
    (b'{"f0":1,"f1":"a","extra":3}', Row(1, "a")),
    (b'  {"f0":2}  ', Row(2, None)),
    (b'{"F0":1}', Row(None, None)),                            # names are case-sensitive
    (b'null', None),                                           # no record
])
def test_json_reads_as_flink_reads(message, expected):
    assert plain(json_de(EXAMPLE).deserialize(message)) == plain(expected)


def test_json_bad_records_name_the_field_and_the_option():
    de = json_de(Types.ROW_NAMED(["id", "name", "r"], [Types.INT(), Types.STRING(),
                                                       Types.ROW_NAMED(["x"], [Types.INT()])]))
    with pytest.raises(RecordParseError) as e:
        de.deserialize(b'{"id":"x","name":"a"}')
    assert (e.value.field, e.value.position) == ("id", 0)
    assert "field 'id' (position 0)" in str(e.value) and "ignore_parse_errors()" in str(e.value)
    with pytest.raises(RecordParseError, match=r"field 'r\.x' \(position 2\).*not an INT"):
        de.deserialize(b'{"r":{"x":"y"}}')
    with pytest.raises(RecordParseError, match="Value out of range"):
        de.deserialize(b'{"id":2147483648}')
    for message in (b"not json", b"[1]", b"", b'{"id":1,'):
        with pytest.raises(RecordParseError, match="Failed to deserialize JSON"):
            de.deserialize(message)
    with pytest.raises(RecordParseError, match=r"Could not find field with name 'name'.*fail_on_missing_field"):
        json_de(Types.ROW_NAMED(["id", "name"], [Types.INT(), Types.STRING()]),
                fail=True).deserialize(b'{"id":1}')


def test_json_ignore_parse_errors_nulls_the_field_and_skips_what_is_not_an_object():
    de = json_de(EXAMPLE, ignore=True)
    assert plain(de.deserialize(b'{"f0":"x","f1":"a"}')) == (None, "a")
    assert plain(de.deserialize(b'{"f0":true}')) == (None, None)
    assert [de.deserialize(m) for m in (b"[1]", b"not json", b"", b'{"f0":1,')] == [None] * 4
    with pytest.raises(ValueError, match="failOnMissingField and ignoreParseErrors"):
        json_de(EXAMPLE, fail=True, ignore=True)


def test_json_text_conversions_as_flink():
    t = Types.ROW_NAMED(["b", "d", "ts", "tm", "dec"], [Types.BOOLEAN(), Types.DOUBLE(), Types.SQL_TIMESTAMP(),
                                                        Types.SQL_TIME(), Types.BIG_DEC()])
    de = json_de(t)
    assert de.deserialize(b'{"b":"true","d":"1.5"}')[:2] == (True, 1.5)
    assert de.deserialize(b'{"b":"yes","d":"NaN"}')[0] is False        # Boolean.parseBoolean
    assert de.deserialize(b'{"b":1}')[0] is False
    assert de.deserialize(b'{"ts":"2024-01-07T10:30:05.123456Z"}')[2] == datetime.datetime(2024, 1, 7, 10, 30, 5,
                                                                                            123456)
    assert [de.deserialize(m)[4] for m in (b'{"dec":100}', b'{"dec":1000.0}', b'{"dec":"1.50"}', b'{"dec":1.50}')] \
        == [Decimal("100"), Decimal("1E+3"), Decimal("1.50"), Decimal("1.5")]
    for bad in (b'{"ts":"2024-01-07 10:30:05"}', b'{"ts":"2024-01-07T10:30:05"}', b'{"tm":"10:30:05.123Z"}'):
        with pytest.raises(RecordParseError):
            de.deserialize(bad)


def test_json_refuses_what_it_cannot_build():
    with pytest.raises(TypeError, match="Typeinfo should be set"):
        JsonRowSerializationSchema.Builder().build()
    with pytest.raises(TypeError, match="Row type information expected"):
        JsonRowSerializationSchema.Builder().with_type_info(Types.INT()).build()
    with pytest.raises(TypeError, match="type_info"):
        JsonRowDeserializationSchema.Builder().build()
    with pytest.raises(ValueError, match="could not serialize row.*Row length mismatch"):
        json_ser(EXAMPLE).serialize(Row(1))


# =============================================================================================
# CSV
# =============================================================================================

def csv_ser(t=EXAMPLE, **options):
    b = CsvRowSerializationSchema.Builder(t)
    for name, value in options.items():
        b = getattr(b, name)(*([] if value is None else [value]))
    return b.build()


def csv_de(t=EXAMPLE, **options):
    b = CsvRowDeserializationSchema.Builder(t)
    for name, value in options.items():
        b = getattr(b, name)(value)
    return b.build()


@pytest.mark.parametrize("text, expected", [
    ("hi", b"1,hi\n"), ("", b"1,\n"), (None, b"1,\n"), ('a"b', b'1,"a""b"\n'), ("a,b", b'1,"a,b"\n'),
    ("a\nb", b'1,"a\nb"\n'), (" lead", b'1," lead"\n'), ("a b", b'1,"a b"\n'), ("#x", b'1,"#x"\n'),
    ("a;b", b"1,a;b\n"), ("a\\b", b'1,"a\\b"\n'), ("a\tb", b'1,"a\tb"\n'), ("\u00e9", b"1,\xc3\xa9\n"),
    ("'q'", b'1,"\'q\'"\n'), ("a+b", b'1,"a+b"\n'), ("a-b", b"1,a-b\n"), ("a~b", b"1,a~b\n"),
    ("a" * 24, b"1," + b"a" * 24 + b"\n"), ("a" * 25, b'1,"' + b"a" * 25 + b'"\n'),
])
def test_csv_quotes_as_flink(text, expected):
    assert csv_ser().serialize(Row(1, text)) == expected


@pytest.mark.parametrize("options, text, expected", [
    ({"set_field_delimiter": ";", "set_line_delimiter": "\r\n", "set_quote_character": "'",
      "set_escape_character": "\\", "set_null_literal": "NULL"}, None, b"1;NULL\r\n"),
    ({"set_field_delimiter": ";", "set_line_delimiter": "\r\n", "set_quote_character": "'",
      "set_escape_character": "\\"}, "a'b", b"1;'a''b'\r\n"),
    ({"set_field_delimiter": ";", "set_quote_character": "'", "set_escape_character": "\\"}, "a\\b",
     b"1;'a\\\\b'\n"),
    ({"set_field_delimiter": ";", "set_quote_character": "'"}, "a,b", b"1;'a,b'\n"),
    ({"disable_quote_character": None}, "a,b", b"1,a,b\n"),
    ({"set_escape_character": "|"}, "a|b", b'1,"a||b"\n'),
    ({"set_escape_character": "|"}, "a\\b", b"1,a\\b\n"),
    ({"set_field_delimiter": "\t"}, "a,b", b"1\ta,b\n"),
    ({"set_field_delimiter": "\t"}, "a b", b'1\t"a b"\n'),
    ({"set_field_delimiter": "|", "set_quote_character": "~"}, "a~b", b"1|~a~~b~\n"),
    ({"set_line_delimiter": ""}, "x", b"1,x"),
])
def test_csv_options_as_flink(options, text, expected):
    assert csv_ser(**options).serialize(Row(1, text)) == expected


def test_csv_types_as_flink():
    t = Types.ROW([Types.LONG(), Types.FLOAT(), Types.DOUBLE(), Types.BIG_DEC(), Types.BOOLEAN(), Types.SQL_DATE(),
                   Types.SQL_TIME(), Types.SQL_TIMESTAMP(), Types.PRIMITIVE_ARRAY(Types.BYTE()),
                   Types.BASIC_ARRAY(Types.STRING()), Types.ROW([Types.INT(), Types.DOUBLE()])])
    row = Row(2 ** 40, 0.1, 1e20, Decimal("1E+3"), True, datetime.date(2024, 1, 7), datetime.time(10, 30, 5),
              datetime.datetime(2024, 1, 7, 10, 30, 5, 123000), b"\xfb\xff", ["a b", "c;d", None], Row(5, 2.5))
    data = csv_ser(t).serialize(row)
    assert data == (b'1099511627776,0.1,1.0E20,1E+3,true,2024-01-07,10:30:05,"2024-01-07 10:30:05.123","+/8=",'
                    b'"a b;c;d;",5;2.5\n')
    assert csv_ser(one("d", Types.DOUBLE())).serialize(Row(float("nan"))) == b"NaN\n"
    assert csv_ser(one("t", Types.SQL_TIMESTAMP())).serialize(Row(datetime.datetime(2024, 1, 7, 10, 30, 5))) \
        == b'"2024-01-07 10:30:05.0"\n'
    assert csv_ser(t, set_array_element_delimiter="|").serialize(row).endswith(b'"a b|c;d|",5|2.5\n')
    back = csv_de(t).deserialize(b"1099511627776,0.1,1.0E20,1E+3,true,2024-01-07,10:30:05,"
                                 b'"2024-01-07 10:30:05.123",+/8=,a b;c,5;2.5')
    assert plain(back) == plain(Row(2 ** 40, 0.10000000149011612, 1e20, Decimal("1E+3"), True, datetime.date(2024, 1, 7),
                       datetime.time(10, 30, 5), datetime.datetime(2024, 1, 7, 10, 30, 5, 123000), b"\xfb\xff",
                       ["a b", "c"], Row(5, 2.5)))


@pytest.mark.parametrize("message, expected", [
    (b"1,hi\n", Row(1, "hi")), (b"1,hi", Row(1, "hi")), (b'1,"a,b"', Row(1, "a,b")), (b'1,"a""b"', Row(1, 'a"b')),
    (b"1,", Row(1, "")), (b" 2 ,hi", Row(2, "hi")), (b"1, hi ", Row(1, " hi ")), (b"1,hi\n2,yo", Row(1, "hi")),
    (b"1,null", Row(1, "null")),
])
def test_csv_reads_as_flink(message, expected):
    assert plain(csv_de().deserialize(message)) == plain(expected)


def test_csv_reading_options_as_flink():
    de = csv_de(set_field_delimiter=";", set_quote_character="'", set_escape_character="\\",
                set_null_literal="NULL", set_allow_comments=True)
    assert plain([de.deserialize(m) for m in (b"1;NULL", b"1;'a;b'", b"1;a\\;b", b"#c\n1;a", b"1;'it''s'")]) == \
        [(1, None), (1, "a;b"), (1, "a;b"), (1, "a"), (1, "it's")]
    arrays = csv_de(Types.ROW([Types.BOOLEAN(), Types.DOUBLE(), Types.BASIC_ARRAY(Types.INT())]))
    assert plain([arrays.deserialize(m) for m in (b"true,1.5,1;2", b"yes,1.5,1", b"1,1e3,")]) == \
        [(True, 1.5, [1, 2]), (False, 1.5, [1]), (False, 1000.0, [])]


def test_csv_bad_records_name_the_field_and_the_option():
    de = csv_de()
    with pytest.raises(RecordParseError) as e:
        de.deserialize(b"x,hi")
    assert (e.value.field, e.value.position) == ("f0", 0)
    assert "field 'f0' (position 0)" in str(e.value) and "set_ignore_parse_errors(True)" in str(e.value)
    with pytest.raises(RecordParseError, match=r"Row length mismatch. 2 fields expected but was 1 \(field 'f1'"):
        de.deserialize(b"1")
    with pytest.raises(RecordParseError, match="Too many entries"):
        de.deserialize(b"1,hi,extra")
    for message in (b"", b'1,"unterminated', b",x", b"TRUE,nan"):
        with pytest.raises(RecordParseError, match="Failed to deserialize CSV row"):
            de.deserialize(message)
    ignoring = csv_de(set_ignore_parse_errors=True)
    assert plain([ignoring.deserialize(m) for m in (b"x,hi", b"1", b"1,hi,extra", b'1,"unterminated')]) == \
        [(None, "hi"), (1, None), None, None]


def test_csv_refuses_types_flink_refuses():
    with pytest.raises(TypeError, match="Unsupported type information .* for field 'm'"):
        CsvRowSerializationSchema.Builder(Types.ROW_NAMED(["m"], [Types.MAP(Types.STRING(), Types.INT())])).build()
    with pytest.raises(TypeError, match="second level nesting of fields 'o'"):
        CsvRowDeserializationSchema.Builder(Types.ROW_NAMED(["o"], [Types.OBJECT_ARRAY(EXAMPLE)])).build()
    with pytest.raises(ValueError, match="Only \\\\n, \\\\r, \\\\r\\\\n, or empty string"):
        csv_ser(set_line_delimiter=";")
    with pytest.raises(TypeError, match="Row type information expected"):
        CsvRowSerializationSchema.Builder(Types.STRING())


# =============================================================================================
# Avro
# =============================================================================================

TEST_RECORD = """{"type": "record", "name": "TestRecord",
                  "fields": [{"name": "id", "type": "int"}, {"name": "name", "type": "string"}]}"""


def test_avro_plain_binary_as_the_spec_and_flink():
    ser = AvroRowSerializationSchema(avro_schema_string=TEST_RECORD)
    de = AvroRowDeserializationSchema(avro_schema_string=TEST_RECORD)
    # int 1 -> zig-zag 2; "hi" -> length 2 zig-zagged (4) then the bytes; -65 -> zig-zag 129 = 0x81 0x01
    assert ser.serialize(Row(1, "hi")) == b"\x02\x04hi"
    assert ser.serialize(Row(-65, "\u00e9")) == b"\x81\x01\x04\xc3\xa9"
    assert de.deserialize(b"\x0c\x0ahello") == Row(id=6, name="hello")
    assert de.get_produced_type() == Types.ROW_NAMED(["id", "name"], [Types.INT(), Types.STRING()])


def test_avro_nested_nullable_and_logical_types_round_trip():
    schema = """{"type": "record", "name": "Order", "fields": [
        {"name": "id", "type": "long"},
        {"name": "note", "type": ["null", "string"], "default": null},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "attrs", "type": {"type": "map", "values": "double"}},
        {"name": "buyer", "type": {"type": "record", "name": "Buyer", "fields": [{"name": "name", "type": "string"}]}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}}]}"""
    row = Row(7, None, ["a", "b"], {"w": 1.5}, Row("ann"), datetime.date(2024, 1, 7),
              datetime.datetime(2024, 1, 7, 10, 30, 5, 123000), Decimal("12.50"))
    data = AvroRowSerializationSchema(avro_schema_string=schema).serialize(row)
    # long 7, the union's null branch 0, an array block of 2 then 0, a map block of 1 then 0, ...
    assert data.startswith(b"\x0e\x00\x04\x02a\x02b\x00\x02\x02w\x00\x00\x00\x00\x00\x00\xf8?\x00\x06ann")
    de = AvroRowDeserializationSchema(avro_schema_string=schema)
    back = de.deserialize(data)
    assert plain(back) == plain(row) and back.buyer.name == "ann"
    assert de.get_produced_type() == Types.ROW_NAMED(
        ["id", "note", "tags", "attrs", "buyer", "day", "at", "price"],
        [Types.LONG(), Types.STRING(), Types.OBJECT_ARRAY(Types.STRING()), Types.MAP(Types.STRING(), Types.DOUBLE()),
         Types.ROW_NAMED(["name"], [Types.STRING()]), Types.SQL_DATE(), Types.SQL_TIMESTAMP(), Types.BIG_DEC()])


def test_avro_bad_input_names_the_field():
    ser = AvroRowSerializationSchema(avro_schema_string=TEST_RECORD)
    with pytest.raises(ValueError, match=r"TestRecord\.id is <x>.*expected int.*by position"):
        ser.serialize(Row("x", "hi"))
    with pytest.raises(ValueError, match="of 2 fields, got 1"):
        ser.serialize(Row(1))
    de = AvroRowDeserializationSchema(avro_schema_string=TEST_RECORD)
    with pytest.raises(RecordParseError, match=r"field 'name' \(position 1\) at byte 1") as e:
        de.deserialize(b"\x02\x10hi")
    assert (e.value.field, e.value.position) == ("name", 1)
    with pytest.raises(TypeError, match="record_class names a Java SpecificRecord class"):
        AvroRowSerializationSchema(record_class="com.example.User")
    with pytest.raises(ValueError, match="does not parse"):
        AvroRowDeserializationSchema(avro_schema_string="{not json")
    with pytest.raises(TypeError, match="record_class or avro_schema_string"):
        AvroRowDeserializationSchema()


# =============================================================================================
# RowFieldExtractorSchema, and the schemas travel to executors
# =============================================================================================

def test_row_field_extractor_as_flink():
    key, value = RowFieldExtractorSchema(0), RowFieldExtractorSchema(1)
    row = Row(b"user-001", b'{"type": "purchase"}')
    assert (key.serialize(row), value.serialize(row)) == (b"user-001", b'{"type": "purchase"}')
    assert key.serialize(None) == b"" and key.serialize(Row(None, b"x")) == b""
    with pytest.raises(ValueError, match="field at index 0 must be of type bytes.*str"):
        key.serialize(Row("user-001", b"x"))
    with pytest.raises(ValueError, match="cannot access field 2 in Row with arity 2"):
        RowFieldExtractorSchema(2).serialize(row)
    with pytest.raises(ValueError, match="non-negative"):
        RowFieldExtractorSchema(-1)


def test_schemas_pickle_and_compare():
    schemas = [json_ser(EXAMPLE), json_de(EXAMPLE, ignore=True), csv_ser(set_field_delimiter=";"),
               csv_de(set_null_literal="NULL"), AvroRowSerializationSchema(avro_schema_string=TEST_RECORD),
               AvroRowDeserializationSchema(avro_schema_string=TEST_RECORD), RowFieldExtractorSchema(1)]
    for schema in schemas:
        copy = pickle.loads(pickle.dumps(schema))
        assert copy == schema and hash(copy) == hash(schema)
    assert pickle.loads(pickle.dumps(schemas[2])).serialize(Row(1, "a;b")) == b"1;\"a;b\"\n"
    assert json_de(EXAMPLE) != json_de(EXAMPLE, ignore=True)
