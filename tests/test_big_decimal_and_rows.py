"""BIG_DEC values keep their own scale and digits, and Types.ROW records are Rows named f0.. (issue 30).

The expected answers are PyFlink 2.3.0's (run on Java 17 with the same values):
- BIG_DEC: PyFlink's coder ships ``str(value)`` to Java (pyflink/fn_execution/coder_impl_fast.pyx
  BigDecimalCoderImpl) and decodes ``Decimal(text)``; Java's BigDecimal keeps scale and any number
  of digits and has no negative zero, and prints as BigDecimal.toString (scientific notation when
  the scale is negative or the adjusted exponent is below -6). Arithmetic is Python's Decimal's.
- Rows: PyFlink's RowCoderImpl.decode_from_stream and execute_and_collect's convert_to_python_obj
  call ``row.set_field_names(type_info.get_field_names())``, f0.. for Types.ROW; chained Python
  operators pass a record on as it was made (``<Row('a', 1)>``), a shuffle decodes it named.
"""
from decimal import Decimal

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from runtime.common import Row, Types as T
from runtime.common.arrow import arrow_to_records, records_to_arrow
from runtime.connectors.java_strings import printed_text
from runtime.datastream.functions import KeyedProcessFunction
from runtime.datastream.state import ValueStateDescriptor
from runtime.state.backend import STATE_BACKEND
from runtime_env import job_env

TEXTS = ["3", "3.10", "1E+3", "1E-7", "0E-8", "-2.5E-10", "123456789012345678901234567890.123456789",
         "1.000000000000000000000000000000000000000001", "12345678901234567890123456789012345678901234567890"]
DECIMALS = [Decimal(t) for t in TEXTS]


def printed(out: str, identifier: str) -> list:
    """The lines ``print(identifier)`` wrote to ``out``, without their "identifier:2> " prefix."""
    return sorted(line.split("> ", 1)[1] for line in out.splitlines()
                  if line.startswith(identifier + ":") or line.startswith(identifier + ">"))


def test_a_big_decimal_keeps_its_scale_and_digits_in_arrow_nested_too():
    t = T.TUPLE([T.BIG_DEC(), T.LIST(T.BIG_DEC()), T.MAP(T.STRING(), T.BIG_DEC())])
    records = [(d, [d, None], {"k": d}) for d in DECIMALS] + [(None, None, None)]
    back = arrow_to_records(records_to_arrow(records, t), t)
    assert [str(r[0]) for r in back[:-1]] == TEXTS and back == records
    assert [str(r[1][0]) for r in back[:-1]] == TEXTS and [str(r[2]["k"]) for r in back[:-1]] == TEXTS
    # Java's BigDecimal has no negative zero; an int or float is taken by its str, as PyFlink's coder.
    assert [str(v) for v in arrow_to_records(records_to_arrow(
        [Decimal("-0.00"), 3, 0.1, "1.50"], T.BIG_DEC()), T.BIG_DEC())] == ["0.00", "3", "0.1", "1.50"]


@pytest.mark.parametrize("value", [Decimal("NaN"), Decimal("-Infinity"), "x", float("inf")])
def test_a_value_no_big_decimal_can_hold_fails_naming_it_and_the_fix(env, value):
    with pytest.raises(TypeError, match=r"from_collection\(\): record 0, .* is not a BigDecimal: .*declare "
                                        r"NaN and infinities DOUBLE"):
        env.from_collection([value], type_info=T.BIG_DEC())


@pytest.mark.parametrize("value, text", [
    (Decimal("3"), "3"), (Decimal("3.10"), "3.10"), (Decimal("1E+3"), "1E+3"), (Decimal("0.0000001"), "1E-7"),
    (Decimal("-0.0"), "0.0"), (0.1, "0.1"), (3, "3")])
def test_a_big_decimal_prints_as_java_big_decimal_to_string(value, text):
    assert printed_text(value, T.BIG_DEC()) == text
    assert printed_text((value,), T.TUPLE([T.BIG_DEC()])) == f"({text})"


def test_big_decimals_through_chained_and_shuffled_operators_print_and_collect_exactly(spark, tmp_path):
    env = job_env(tmp_path, 2)
    decimals = env.from_collection(DECIMALS, type_info=T.BIG_DEC())
    chained = decimals.map(lambda d: d, output_type=T.BIG_DEC())
    chained.print()
    shuffled = chained.rebalance().map(lambda d: (repr(d), d), output_type=T.TUPLE([T.STRING(), T.BIG_DEC()]))
    got = list(shuffled.execute_and_collect("big-decimals"))
    assert sorted(got) == sorted((repr(d), d) for d in DECIMALS)
    assert sorted(str(d) for _, d in got) == sorted(TEXTS)
    assert sorted(r for r, _ in got) == sorted(f"Decimal('{t}')" for t in TEXTS)


def test_big_decimals_print_from_a_job_as_pyflink_prints_them(spark, tmp_path):
    env = job_env(tmp_path, 1)
    env.from_collection(DECIMALS, type_info=T.BIG_DEC()).map(lambda d: d, output_type=T.BIG_DEC()).print()
    env.from_collection([("k", Decimal("1.50"))], type_info=T.TUPLE([T.STRING(), T.BIG_DEC()])).print()
    env.from_collection([Row(Decimal("1.50"), 2)], type_info=T.ROW([T.BIG_DEC(), T.INT()])).print()
    assert sorted(env.execute("print").printed) == sorted(TEXTS + ["(k,1.50)", "+I[1.50,2]"])


class RunningSum(KeyedProcessFunction):
    def open(self, runtime_context):
        self.sum = runtime_context.get_state(ValueStateDescriptor("sum", T.BIG_DEC()))

    def process_element(self, value, ctx):
        before = self.sum.value()
        after = value[1] if before is None else before + value[1]
        self.sum.update(after)
        yield Row(value[0], after, repr(before))


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_big_decimal_state_keeps_its_scale_through_a_checkpoint_and_restore(spark, tmp_path, capsys, backend):
    events = [("k", Decimal("1.50")), ("j", Decimal("1E+2")), ("k", Decimal("2.5")), ("j", Decimal("0.0000001"))]
    collected = []
    for max_epochs in (2, None):    # stopped after the first two records, then restored from the checkpoint
        env = job_env(tmp_path, 2, epoch__max_records_per_split=1,
                      **({"epoch__max_epochs": max_epochs} if max_epochs else {}))
        env.get_configuration().set_string(STATE_BACKEND, backend)
        env.get_checkpoint_config().set_checkpoint_interval_epochs(1)
        sums = (env.from_collection(events, type_info=T.TUPLE([T.STRING(), T.BIG_DEC()]))
                .key_by(lambda e: e[0]).process(RunningSum(), T.ROW([T.STRING(), T.BIG_DEC(), T.STRING()]))
                .uid("sums"))
        sums.print("sums")
        collected.extend(sums.execute_and_collect("sums"))
    # PyFlink: the state gives back Decimal('1.50') and Decimal('1E+2'); 1.50 + 2.5 = 4.00.
    assert sorted(collected) == sorted([
        Row(f0="k", f1=Decimal("1.50"), f2="None"), Row(f0="j", f1=Decimal("1E+2"), f2="None"),
        Row(f0="k", f1=Decimal("4.00"), f2="Decimal('1.50')"),
        Row(f0="j", f1=Decimal("100.0000001"), f2="Decimal('1E+2')")])
    assert sorted(str(r.f1) for r in collected) == ["1.50", "100.0000001", "1E+2", "4.00"]
    assert printed(capsys.readouterr().out, "sums") == sorted(["+I[k,1.50,None]", "+I[j,1E+2,None]", "+I[k,4.00,Decimal('1.50')]",
                                              "+I[j,100.0000001,Decimal('1E+2')]"])


def test_window_sums_and_maxima_of_big_decimals_keep_each_results_scale(spark, tmp_path):
    """Java's BigDecimal.add takes the larger scale of its two summands, and max returns the value
    as it came (Flink's SumAggregator / ComparableAggregator); a batch's Arrow decimal would give
    every result the batch's largest scale."""
    from runtime.common import Time, WatermarkStrategy
    from runtime.datastream import TumblingEventTimeWindows
    env = job_env(tmp_path, 1)
    typed = T.TUPLE([T.STRING(), T.BIG_DEC(), T.LONG()])
    data = [("a", Decimal("2.5"), 1), ("a", Decimal("1.50"), 2), ("b", Decimal("3"), 3), ("c", Decimal("1.0"), 4)]
    stamps = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, _: e[2])
    windows = (env.from_collection(data, typed).assign_timestamps_and_watermarks(stamps)
               .key_by(lambda e: e[0], key_type=T.STRING()).window(TumblingEventTimeWindows.of(Time.seconds(10))))
    got = sorted((k, str(v)) for k, v, _ in windows.sum(1).execute_and_collect())
    assert got == [("a", "4.00"), ("b", "3"), ("c", "1.0")]
    windows = (env.from_collection(data, typed).assign_timestamps_and_watermarks(stamps)
               .key_by(lambda e: e[0], key_type=T.STRING()).window(TumblingEventTimeWindows.of(Time.seconds(10))))
    got = sorted((k, str(v)) for k, v, _ in windows.max(1).execute_and_collect())
    assert got == [("a", "2.5"), ("b", "3"), ("c", "1.0")]


def test_a_delta_sink_stores_a_big_decimal_as_its_exact_text(spark, tmp_path):
    env = job_env(tmp_path, 1)
    table = str(tmp_path / "amounts")
    (env.from_collection([("a", Decimal("1.50")), ("b", Decimal("1E+3")), ("c", None)],
                         type_info=T.ROW_NAMED(["name", "amount"], [T.STRING(), T.BIG_DEC()]))
     .sink_to(table))
    env.execute("delta")
    data = DeltaTable(table).to_pyarrow_table()
    assert data.schema.field("amount").type == pa.string()
    assert sorted(data.to_pylist(), key=lambda r: r["name"]) == [
        {"name": "a", "amount": "1.50"}, {"name": "b", "amount": "1E+3"}, {"name": "c", "amount": None}]


def show(row) -> str:
    return " | ".join([repr(row), repr(row.f0), repr(row["f1"]), repr(row.as_dict())])


def test_records_of_an_unnamed_row_type_are_rows_named_f0_on(spark, tmp_path, capsys):
    env = job_env(tmp_path, 2)
    pair = T.ROW([T.STRING(), T.INT()])
    source = env.from_collection([Row("a", 1)], type_info=pair)
    mapped = source.map(lambda r: Row(r[0], r[1] + 1), output_type=pair)
    chained = mapped.map(repr, output_type=T.STRING())
    shuffled = mapped.key_by(lambda r: r.f0).map(show, output_type=T.STRING())
    from_source = source.map(show, output_type=T.STRING())
    mapped.print("printed")
    env.from_collection([Row("a", Row(1, True), (1, 2))],
                        type_info=T.ROW([T.STRING(), T.ROW([T.INT(), T.BOOLEAN()]), T.TUPLE([T.INT(), T.INT()])])
                        ).print("nested")
    collected = list(mapped.union(chained.map(lambda s: Row(s, 0), output_type=pair),
                                  shuffled.map(lambda s: Row(s, 1), output_type=pair),
                                  from_source.map(lambda s: Row(s, 2), output_type=pair))
                     .execute_and_collect("rows"))
    named = "Row(f0='a', f1=2) | 'a' | 2 | {'f0': 'a', 'f1': 2}"
    assert sorted(collected) == sorted([
        Row(f0="a", f1=2),                                      # collected: named, as PyFlink's collect
        Row(f0="<Row('a', 2)>", f1=0),                          # chained: as the map made it
        Row(f0=named, f1=1),                                    # after the key_by's shuffle: named
        Row(f0="Row(f0='a', f1=1) | 'a' | 1 | {'f0': 'a', 'f1': 1}", f1=2)])  # from the source: named
    out = capsys.readouterr().out
    assert printed(out, "printed") == ["+I[a,2]"]
    assert printed(out, "nested") == ["+I[a,Row(f0=1, f1=True),(1, 2)]"]
