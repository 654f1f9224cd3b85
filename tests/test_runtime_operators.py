"""Jobs on real Spark: process functions and timers, two inputs, side outputs, partitioning,
rich functions, sources, and how a failing user function is reported. A job of one epoch runs
through the task harness without Spark as well (the ``collect`` fixture)."""
import os
from types import SimpleNamespace

import pytest

from runtime.common import Duration, Types, WatermarkStrategy
from runtime.datastream import (
    CoFlatMapFunction, CoMapFunction, KeyedCoProcessFunction, KeyedProcessFunction, MapFunction, OutputTag,
    ProcessFunction)
from runtime.datastream.connectors import DataGeneratorSource, NumberSequenceSource
from runtime.datastream.partitioner import RebalancePartitioner
from runtime.datastream.state import ValueStateDescriptor
from runtime.execution.executor import JobExecutionException
from runtime.state.key_groups import assign_key_to_parallel_operator
from runtime_env import CLOCK_START, job_env

PAIR = Types.TUPLE([Types.STRING(), Types.LONG()])


class CountWithTimeout(KeyedProcessFunction):
    """Counts per key; an event-time timer 1 s after each record emits the count once."""

    def open(self, runtime_context):
        self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.LONG()))

    def process_element(self, value, ctx):
        self.count.update((self.count.value() or 0) + 1)
        ctx.timer_service().register_event_time_timer(ctx.timestamp() + 1000)
        ctx.timer_service().register_event_time_timer(ctx.timestamp() + 1000)   # deduplicated

    def on_timer(self, timestamp, ctx):
        yield ctx.get_current_key(), timestamp, self.count.value()


def test_keyed_process_function_with_event_time_timers(collect, tmp_path):
    data = [("a", 100), ("b", 200), ("a", 700), ("a", 5000)]
    env = job_env(tmp_path, 2, task__batch_size=1)
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, _: e[1])
    got = sorted(collect(env.from_collection(data, PAIR).assign_timestamps_and_watermarks(strategy)
                         .key_by(0).process(CountWithTimeout())))
    # The watermark reaches 4999 only after a@5000 is counted: a's timers 1100 and 1700 see
    # count 3; 6000 fires at the end of input; b's 1200 sees 1.
    assert got == [("a", 1100, 3), ("a", 1700, 3), ("a", 6000, 3), ("b", 1200, 1)]


def test_processing_time_timers_fire_from_the_epoch_clock(collect, tmp_path):
    class Later(KeyedProcessFunction):
        def process_element(self, value, ctx):
            ctx.timer_service().register_processing_time_timer(ctx.timer_service().current_processing_time() + 10)

        def on_timer(self, timestamp, ctx):
            yield ctx.get_current_key(), timestamp

    env = job_env(tmp_path, 1)
    got = sorted(collect(env.from_collection([("x", 1), ("y", 2)], PAIR).key_by(0).process(Later())))
    assert got == [("x", CLOCK_START + 10), ("y", CLOCK_START + 10)]


def test_union_and_co_map(collect, tmp_path):
    class Tag(CoMapFunction):
        def map1(self, value):
            return "left:" + value

        def map2(self, value):
            return "right:" + str(value)

    env = job_env(tmp_path, 2)
    a = env.from_collection(["x", "y"])
    b = env.from_collection(["z"])
    nums = env.from_collection([1, 2])
    got = sorted(collect(a.union(b).connect(nums).map(Tag(), Types.STRING())))
    assert got == ["left:x", "left:y", "left:z", "right:1", "right:2"]


def test_keyed_connect_joins_two_streams_through_state(collect, tmp_path):
    class Join(KeyedCoProcessFunction):
        def open(self, runtime_context):
            self.name = runtime_context.get_state(ValueStateDescriptor("name"))

        def process_element1(self, value, ctx):
            self.name.update(value[1])

        def process_element2(self, value, ctx):
            yield value[0], self.name.value(), value[1]

    env = job_env(tmp_path, 3)
    names = env.from_collection([(1, "ann"), (2, "bob")], Types.TUPLE([Types.LONG(), Types.STRING()]))
    orders = env.from_collection([(1, 9.5), (2, 3.0), (1, 1.5)], Types.TUPLE([Types.LONG(), Types.DOUBLE()]))
    # Input 1 is read before input 2 in each round, so the names are known when orders come.
    got = sorted(collect(names.connect(orders).key_by(lambda n: n[0], lambda o: o[0]).process(Join())))
    assert got == [(1, "ann", 1.5), (1, "ann", 9.5), (2, "bob", 3.0)]


def test_side_outputs_of_a_process_function(spark, tmp_path):
    odd = OutputTag("odd", Types.LONG())

    class Split(ProcessFunction):
        def process_element(self, value, ctx):
            if value % 2:
                ctx.output(odd, value)
            else:
                yield value

    env = job_env(tmp_path, 2)
    evens = env.from_collection(list(range(10))).process(Split(), Types.LONG())
    evens.print("even")
    evens.get_side_output(odd).print("odd")
    printed = env.execute("split").printed
    assert sorted(int(l.split("> ")[1]) for l in printed if l.startswith("even")) == [0, 2, 4, 6, 8]
    assert sorted(int(l.split("> ")[1]) for l in printed if l.startswith("odd")) == [1, 3, 5, 7, 9]
    assert all(l.split("> ")[0] in ("even:1", "even:2", "odd:1", "odd:2") for l in printed)


class WhereAmI(MapFunction):
    def open(self, runtime_context):
        self.index = runtime_context.get_index_of_this_subtask()
        self.parallelism = runtime_context.get_number_of_parallel_subtasks()

    def map(self, value):
        return value, self.index, self.parallelism


def test_keyed_records_reach_the_subtask_owning_their_key_group(collect, tmp_path):
    words = ["apple", "banana", "cherry", "date", "elder", "fig", "grape"] * 3
    env = job_env(tmp_path, 3)
    got = collect(env.from_collection(words).key_by(lambda w: w).map(WhereAmI()))
    for word, index, parallelism in got:
        assert parallelism == 3
        # key_by(selector) routes Row.of(the pickled key), as PyFlink (tests/test_key_routing.py)
        assert index == assign_key_to_parallel_operator(word, 128, 3, Types.PICKLED_BYTE_ARRAY())


def test_broadcast_global_and_custom_partitioning(collect, tmp_path):
    env = job_env(tmp_path, 1)
    src = env.from_collection([1, 2, 3])
    got = collect(src.broadcast().map(WhereAmI()).set_parallelism(2))
    assert sorted(got) == sorted([(v, i, 2) for v in (1, 2, 3) for i in (0, 1)])
    env = job_env(tmp_path, 1)
    src = env.from_collection([1, 2, 3, 4]).rebalance().map(lambda x: x).set_parallelism(2)
    got = collect(src.global_().map(WhereAmI()).set_parallelism(2))
    assert sorted(v for v, _, _ in got) == [1, 2, 3, 4] and {i for _, i, _ in got} == {0}
    env = job_env(tmp_path, 1)
    got = collect(env.from_collection([10, 11, 12, 13]).partition_custom(lambda k, n: k % n, lambda v: v)
                  .map(WhereAmI()).set_parallelism(3))
    assert sorted((v, i) for v, i, _ in got) == [(10, 1), (11, 2), (12, 0), (13, 1)]


def test_rebalance_spreads_records_round_robin(collect, tmp_path):
    env = job_env(tmp_path, 1)
    got = collect(env.from_collection(list(range(8))).rebalance().map(WhereAmI()).set_parallelism(4))
    per_subtask = {i: sum(1 for _, j, _ in got if j == i) for i in range(4)}
    assert per_subtask == {0: 2, 1: 2, 2: 2, 3: 2}


@pytest.mark.parametrize("sizes", [[8], [3, 1, 5, 0, 2], [1, 1, 1, 1, 1, 1, 1]])
def test_rebalance_continues_its_round_robin_from_batch_to_batch(sizes):
    """Record i of a producer goes to channel (start + i) % n, however its records are batched;
    each channel keeps their order and their timestamps."""
    from runtime.task.partitioning import ChannelSelector
    edge = SimpleNamespace(partitioner=RebalancePartitioner())
    selector = ChannelSelector(edge, producer_index=1, producer_parallelism=2, consumer_parallelism=3,
                               seed=0, key_of=None)
    got, i = {c: [] for c in range(3)}, 0
    for size in sizes:
        values = list(range(i, i + size))
        for c, (vs, ts) in selector.select(values, [v * 10 for v in values]).items():
            assert ts == [v * 10 for v in vs]
            got[c] += vs
        i += size
    assert got == {c: [v for v in range(i) if (1 + v) % 3 == c] for c in range(3)}


def test_a_failing_user_function_names_operator_subtask_and_record(spark, tmp_path):
    env = job_env(tmp_path, 2)
    env.from_collection([("a", 1), ("b", 0), ("c", 2)], PAIR).key_by(0) \
        .map(lambda r: 10 // r[1]).name("Divide").print()
    with pytest.raises(JobExecutionException) as e:
        env.execute("divide")
    msg = str(e.value)
    # The cause first (operator, subtask, reason), then the record.
    assert "Divide (" in msg and "/2) failed: ZeroDivisionError: integer division or modulo by zero " \
        "(on record ('b', 0))" in msg
    assert "--- original traceback ---" in msg and "lambda r: 10 // r[1]" in msg


def test_user_functions_run_once_per_record_even_when_a_batch_fails(spark, tmp_path):
    calls = tmp_path / "calls"

    def echo_twice(word):
        with open(calls, "a") as f:     # a side effect: it must happen once per record
            f.write(word + "\n")
        return None if word == "skip" else [word, word]

    env = job_env(tmp_path, 1)
    got = env.from_collection(["a", "skip", "c"], Types.STRING()) \
        .flat_map(echo_twice, output_type=Types.STRING()).execute_and_collect()
    assert sorted(got) == ["a", "a", "c", "c"]
    assert sorted(calls.read_text().split()) == ["a", "c", "skip"]

    def explode_on_c(word):
        yield word
        if word == "c":
            raise ValueError("no c")

    env = job_env(tmp_path / "gen", 1)
    env.from_collection(["a", "b", "c", "d"], Types.STRING()).flat_map(
        explode_on_c, output_type=Types.STRING()).name("Explode").print()
    with pytest.raises(JobExecutionException, match=r"Explode \(1/1\) failed: ValueError: no c \(on record 'c', split .*, offset 2\)"):
        env.execute("explode")

    # With timestamps, and on the second input of a co-flat-map: the same rule, the same loop.
    class Split(CoFlatMapFunction):
        def flat_map1(self, value):
            yield from [value[0]] * 2

        def flat_map2(self, value):
            yield value
            if value == "boom":
                raise ValueError("no boom")

    env = job_env(tmp_path / "stamped", 1)
    stamped = env.from_collection([("a", 5), ("b", 7)], PAIR).assign_timestamps_and_watermarks(
        WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda v, _: v[1]))
    got = stamped.connect(env.from_collection(["x"], Types.STRING())).flat_map(Split(), Types.STRING()) \
        .process(EmitTimestamp(), Types.STRING()).execute_and_collect()
    assert sorted(got) == ["a@5", "a@5", "b@7", "b@7", "x@None"]
    env = job_env(tmp_path / "co", 1)
    env.from_collection([("a", 5)], PAIR).connect(env.from_collection(["ok", "boom", "late"], Types.STRING())) \
        .flat_map(Split(), Types.STRING()).name("Split").print()
    with pytest.raises(JobExecutionException, match=r"Split \(1/1\) failed: ValueError: no boom \(on record 'boom'"):
        env.execute("co-explode")


class EmitTimestamp(ProcessFunction):
    def process_element(self, value, ctx):
        yield f"{value}@{ctx.timestamp()}"


def test_text_files_generators_and_sequences(spark, tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.txt").write_text("one\ntwo\r\nthree")          # no newline at the end
    (folder / "b.txt").write_text("four\n")
    env = job_env(tmp_path, 2)
    assert sorted(env.read_text_file(str(folder)).execute_and_collect()) == ["four", "one", "three", "two"]

    env = job_env(tmp_path, 2)
    gen = DataGeneratorSource(lambda i: i * i, count=10, type_info=Types.LONG())
    got = env.from_source(gen, WatermarkStrategy.no_watermarks(), "squares").execute_and_collect()
    assert sorted(got) == [i * i for i in range(10)]

    env = job_env(tmp_path, 3)
    seq = env.from_source(NumberSequenceSource(1, 100), WatermarkStrategy.no_watermarks(), "seq")
    assert sorted(seq.execute_and_collect()) == list(range(1, 101))


def test_missing_input_folder_is_a_clear_error(spark, tmp_path):
    env = job_env(tmp_path, 1)
    env.read_text_file(str(tmp_path / "nope")).print()
    with pytest.raises(FileNotFoundError, match="does not exist. Pass an existing file or folder"):
        env.execute()


def test_execution_attempts_move_through_the_state_machine(spark, tmp_path):
    env = job_env(tmp_path, 2)
    env.from_collection([1, 2, 3]).map(lambda x: x).print()
    result = env.execute("states")
    for ev in result.execution_graph.all_execution_vertices:
        states = [s.value for s, _ in ev.current_execution.state_timestamps]
        assert states == ["SCHEDULED", "DEPLOYING", "RUNNING", "FINISHED"]
    assert sorted(l.split("> ")[1] for l in result.printed) == ["1", "2", "3"]
    assert {l.split("> ")[0] for l in result.printed} <= {"1", "2"}


class ParseEach(ProcessFunction):
    def process_element(self, value, ctx):
        yield int(value)


def parse_thrice(line):
    """A flat_map that makes three records of each line: past its first run, it takes its input
    a few records at a time (the chain's batches stay about the batch size)."""
    for _ in range(3):
        yield int(line)


class RejectRepeats(MapFunction):
    """Fails on a line it saw before: the first occurrence passes, the repeat is the bad record."""

    def open(self, runtime_context):
        self.seen = set()

    def map(self, value):
        if value in self.seen:
            raise ValueError(f"{value} again")
        self.seen.add(value)
        return value


def failure(env, name) -> str:
    with pytest.raises(JobExecutionException) as e:
        env.execute(name)
    return str(e.value)


@pytest.mark.parametrize("settings", [{}, dict(task__batch_size=3), dict(epoch__max_records_per_split=5)])
def test_a_malformed_record_names_the_file_and_line_it_came_from(spark, tmp_path, settings):
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "part-1.txt").write_text("1\n2\n3\n")
    (folder / "part-2.txt").write_text("".join(f"{n}\n" for n in range(16)) + "seventeen\n18\n")
    at = f"failed: ValueError: invalid literal for int() with base 10: 'seventeen' (on record 'seventeen', " \
         f"file {folder / 'part-2.txt'}, line 17)"
    # Line 17 is the 2nd record of the 6th batch of 3, or of the 4th epoch of 5 lines.
    env = job_env(tmp_path / "map", 1, **settings)
    env.read_text_file(str(folder)).map(int).name("Parse").print()
    assert f"Parse (1/1) {at}" in failure(env, "map")
    env = job_env(tmp_path / "process", 1, **settings)
    env.read_text_file(str(folder)).process(ParseEach(), Types.LONG()).name("Parse").print()
    assert f"Parse (1/1) {at}" in failure(env, "process")
    env = job_env(tmp_path / "flat_map", 1, **settings)
    env.read_text_file(str(folder)).flat_map(parse_thrice, Types.LONG()).name("Parse").print()
    assert f"Parse (1/1) {at}" in failure(env, "flat_map")

    # Past a filter (or a map, or a shuffle) the source's positions are gone: nothing is said
    # rather than something wrong.
    env = job_env(tmp_path / "filtered", 1, **settings)
    env.read_text_file(str(folder)).filter(lambda line: True).map(int).name("Parse").print()
    assert "Parse (1/1) failed: ValueError: invalid literal for int() with base 10: 'seventeen' (on record " \
        "'seventeen') in epoch" in failure(env, "filtered")
    env = job_env(tmp_path / "keyed", 1, **settings)
    env.read_text_file(str(folder)).key_by(lambda line: line).map(int).name("Parse").print()
    assert "Parse (1/1) failed: ValueError: invalid literal for int() with base 10: 'seventeen' (on record " \
        "'seventeen') in epoch" in failure(env, "keyed")


def test_a_flat_map_passes_its_output_on_in_batches_of_about_the_batch_size(collect, tmp_path):
    """Ten records of each: the next operator gets batches of the batch size, every record once and
    in order (of a flat_map: the first batch's output whole, then 10 input records at a time)."""
    import pyarrow as pa

    def sizes(batch):     # each row: the size of the batch it came in, and its value
        return pa.record_batch([pa.array([batch.num_rows] * batch.num_rows, pa.int64()), batch["f0"]],
                               names=["f0", "f1"])
    def tenfold(stream):
        return stream.flat_map(lambda n: [n] * 10, Types.LONG())

    class Tenfold(ProcessFunction):
        def process_element(self, value, ctx):
            yield from [value] * 10

    for name, make, first in (("flat_map", tenfold, 1000), ("process", lambda s: s.process(Tenfold(), Types.LONG()), 100)):
        env = job_env(tmp_path / name, 1, task__batch_size=100)
        got = collect(make(env.from_collection(list(range(1000)), Types.LONG()))
                      .map_batches(sizes, Types.TUPLE([Types.LONG(), Types.LONG()])))
        assert [v for _, v in got] == [n for n in range(1000) for _ in range(10)], name
        # A process function's output goes on as soon as it holds a batch.
        assert [size for size, _ in got] == [first] * first + [100] * (10000 - first), name


def test_the_line_of_a_repeated_record_is_its_own(spark, tmp_path):
    # Both "7" lines are one interned string object: the line comes from the record's position
    # in the batch, not from finding the object in it.
    (tmp_path / "in.txt").write_text("1\n2\n7\n4\n5\n7\n8\n")
    env = job_env(tmp_path, 1)
    env.read_text_file(str(tmp_path / "in.txt")).map(RejectRepeats()).name("Unique").print()
    assert f"Unique (1/1) failed: ValueError: 7 again (on record '7', file {tmp_path / 'in.txt'}, line 6)" \
        in failure(env, "unique")


def test_a_channel_leaves_in_numbered_chunks_and_arrives_in_order(monkeypatch):
    """A producer pickles a channel's events every CHANNEL_CHUNK records; the consumer reads the
    chunks in their order, whatever order the shuffle hands them over in."""
    import random
    from types import SimpleNamespace
    from runtime.datastream.partitioner import GlobalPartitioner
    from runtime.task import record_writer
    from runtime.task.channel_events import RecordBatch, Watermark
    monkeypatch.setattr(record_writer, "CHANNEL_CHUNK", 3)
    writer = record_writer.RecordWriter(SimpleNamespace(partitioner=GlobalPartitioner()), "e", 0, 1, 1, 7)
    sent = []
    for i in range(5):
        writer.process_batch([2 * i, 2 * i + 1], [None, None], 0)
        sent += [2 * i, 2 * i + 1]
        if i % 2:
            writer.process_watermark(i, 0)
    rows = list(writer.rows())
    assert [number for _, (_, _, number, _) in rows] == [0, 1, 2]     # 4 records, 4, then the rest
    random.Random(1).shuffle(rows)
    events = list(record_writer.channel_events([(number, payload) for _, (_, _, number, payload) in rows]))
    assert [v for e in events if type(e) is RecordBatch for v in e.values] == sent
    assert [e.timestamp for e in events if type(e) is Watermark] == [1, 3]
    assert [type(e).__name__ for e in events] == ["RecordBatch", "Watermark", "RecordBatch", "Watermark", "RecordBatch"]
