"""Arrow-batch user functions (``map_batches``, ``filter_batches``): the API, chaining with the
built-in vectorised window without making Python records, row counts that change, the output
rows' timestamps, watermarks, and the failures a function causes. Through the task harness
(tests/task_harness.py); the word count also as one whole Spark job (``collect``'s tier jobs)."""
from collections import Counter

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from runtime.common import Row, Time, Types, WatermarkStrategy
from runtime.datastream import TumblingEventTimeWindows
from runtime.task import arrow_batch
from runtime_env import job_env
from task_harness import collect_in_tasks

WORD = Types.TUPLE([Types.STRING(), Types.LONG(), Types.LONG()])
ORDER = Types.ROW_NAMED(["id", "amount"], [Types.INT(), Types.DOUBLE()])
LINES = ["1000 a b a", "2000 b c", "4999 a", "5000 c c", "9000 a", "12000 b"]


def split_lines(batch):
    """'<ts> w w ...' lines -> (word, 1, ts) per word, each at its line's event time."""
    tokens = pc.split_pattern(batch["f0"], " ")
    words = pc.list_slice(tokens, 1)
    ts = pc.take(pc.cast(pc.list_element(tokens, 0), pa.int64()), pc.list_parent_indices(words))
    word = pc.list_flatten(words)
    return pa.record_batch([word, pa.array([1] * len(word), pa.int64()), ts, ts],
                           names=["f0", "f1", "f2", "__timestamp"])


def expected_counts(lines) -> list:
    counts = Counter()
    for line in lines:
        ts, *words = line.split()
        for w in words:
            counts[(w, int(ts) - int(ts) % 5000)] += 1
    return sorted((w, n, start) for (w, start), n in counts.items())


def write_lines(tmp_path, lines, name="in.txt"):
    folder = tmp_path / "in"
    folder.mkdir(exist_ok=True)
    (folder / name).write_text("".join(line + "\n" for line in lines))
    return folder


def test_a_batch_word_count_chains_into_the_vectorised_window(tmp_path, collect, monkeypatch):
    # The records stay Arrow from the function to the window's pre-aggregation: none is decoded
    # (counted in this process: the tasks the harness runs here).
    decoded = []
    rows = arrow_batch.ArrowBatch.rows
    monkeypatch.setattr(arrow_batch.ArrowBatch, "rows", lambda self: decoded.append(len(self)) or rows(self))
    env = job_env(tmp_path, 2, task__batch_size=2)
    counts = (env.read_text_file(str(write_lines(tmp_path, LINES)))
              .map_batches(split_lines, output_type=WORD).name("Split")
              .assign_timestamps_and_watermarks(WatermarkStrategy.for_monotonous_timestamps())
              .key_by(0).window(TumblingEventTimeWindows.of(Time.seconds(5))).sum(1))
    got = collect(counts)
    # sum keeps the window's first record: its ts (field 2) is in the window, so it names the window.
    assert sorted((w, n, ts - ts % 5000) for w, n, ts in got) == expected_counts(LINES)
    assert decoded == []


def timestamps_of(stream):
    return stream.process(lambda value, ctx: [(value, ctx.timestamp())])


def stamped_orders(tmp_path):
    """Four orders at id * 100 ms, in batches of 3 and 1."""
    env = job_env(tmp_path, task__batch_size=3)
    return env.from_collection([(1, 10.0), (2, 250.0), (3, 99.0), (4, 300.0)], type_info=ORDER) \
        .assign_timestamps_and_watermarks(
            WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda o, _: o["id"] * 100))


def test_output_rows_timestamps(tmp_path):
    orders = stamped_orders(tmp_path)
    # A filter keeps the timestamps of the rows it keeps.
    big = orders.filter_batches(lambda b: pc.greater(b["amount"], 100))
    assert collect_in_tasks(timestamps_of(big)) == [(Row(id=2, amount=250.0), 200), (Row(id=4, amount=300.0), 400)]

    # 1:1 (as many rows as it got): each row keeps the timestamp of the row at its position.
    orders = stamped_orders(tmp_path)
    doubled = orders.map_batches(
        lambda b: pa.record_batch([b["id"], pc.multiply(b["amount"], 2)], names=["id", "amount"]), ORDER)
    assert collect_in_tasks(timestamps_of(doubled)) == [
        (Row(id=1, amount=20.0), 100), (Row(id=2, amount=500.0), 200), (Row(id=3, amount=198.0), 300),
        (Row(id=4, amount=600.0), 400)]

    # Fewer rows and no __timestamp: the batch's latest timestamp (batches of 3 then 1).
    orders = stamped_orders(tmp_path)
    total = Types.ROW_NAMED(["total"], [Types.DOUBLE()])
    totals = orders.map_batches(lambda b: pa.record_batch([pa.array([pc.sum(b["amount"]).as_py()])],
                                                          names=["total"]), total)
    assert collect_in_tasks(timestamps_of(totals)) == [(Row(total=359.0), 300), (Row(total=300.0), 400)]

    # A __timestamp column (integers or a timestamp type) sets them; the function sees the input's.
    orders = stamped_orders(tmp_path)
    later = orders.map_batches(lambda b: b.set_column(
        2, "__timestamp", pc.cast(pc.add(b["__timestamp"], 5), pa.timestamp("ms"))), ORDER)
    assert [ts for _, ts in collect_in_tasks(timestamps_of(later))] == [105, 205, 305, 405]


def test_batch_functions_chain_and_hand_records_to_per_record_functions(tmp_path):
    env = job_env(tmp_path, task__batch_size=2)
    out = (env.from_collection([(1, 10.0), (2, 250.0), (3, 99.0), (4, 300.0), (5, 120.0)], type_info=ORDER)
           .filter_batches(lambda b: pc.greater(b["amount"], 100))
           .map_batches(lambda b: pa.record_batch(       # columns by name, in another order, cast to INT
               {"amount": pc.multiply(b["amount"], 2), "id": pc.cast(b["id"], pa.int64())}), ORDER)
           .filter_batches(lambda b: pc.not_equal(b["id"], 4).to_numpy(zero_copy_only=False))     # NumPy mask
           .map(lambda r: (r["id"], r.amount), output_type=Types.TUPLE([Types.INT(), Types.DOUBLE()])))
    assert collect_in_tasks(out) == [(2, 500.0), (5, 240.0)]

    # A tuple's columns by position (any names); a Table does as well as a RecordBatch.
    env = job_env(tmp_path)
    pairs = env.from_collection(["x", "yy"], type_info=Types.STRING()).map_batches(
        lambda b: pa.table([b["f0"], pc.utf8_length(b["f0"])], names=["word", "length"]),
        Types.TUPLE([Types.STRING(), Types.INT()]))
    assert collect_in_tasks(pairs) == [("x", 1), ("yy", 2)]


def test_watermarks_pass_through_batch_functions(tmp_path):
    # A record a batch: the watermark follows each. The generator's watermarks reach the window
    # through the batch function, so 'late', behind the watermark 6999, is dropped as it would be
    # without the function.
    env = job_env(tmp_path, task__batch_size=1)
    events = [("a", 1000), ("b", 2000), ("a", 7000), ("late", 1000), ("a", 8000)]
    stream = env.from_collection(events, type_info=Types.TUPLE([Types.STRING(), Types.LONG()])) \
        .assign_timestamps_and_watermarks(
            WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, _: e[1]))
    counts = (stream.map_batches(lambda b: pa.record_batch(
                  [b["f0"], pa.array([1] * b.num_rows, pa.int64())], names=["f0", "f1"]),
                  Types.TUPLE([Types.STRING(), Types.LONG()]))
              .key_by(0).window(TumblingEventTimeWindows.of(Time.seconds(5))).sum(1))
    assert sorted(collect_in_tasks(counts)) == [("a", 1), ("a", 2), ("b", 1)]


def failure(stream) -> str:
    with pytest.raises(AssertionError) as e:
        collect_in_tasks(stream)
    return str(e.value)


def test_a_failing_function_names_the_operator_subtask_and_the_batchs_first_record(tmp_path):
    folder = write_lines(tmp_path, LINES[:3] + ["oops x"] + LINES[3:])

    def strict(batch):
        if pc.any(pc.starts_with(batch["f0"], "oops")).as_py():
            raise ValueError("not a timestamp")
        return split_lines(batch)
    env = job_env(tmp_path, task__batch_size=2)
    msg = failure(env.read_text_file(str(folder)).map_batches(strict, WORD).name("Split"))
    # Batches of 2 lines: lines 3 and 4 fail together, named by line 3.
    assert (f"Split (1/1) failed: ValueError: not a timestamp (on a batch of 2 records whose first is "
            f"'4999 a', file {folder / 'in.txt'}, line 3)") in msg
    assert "--- original traceback ---" in msg and 'raise ValueError("not a timestamp")' in msg

    env = job_env(tmp_path, task__batch_size=2)
    msg = failure(env.read_text_file(str(folder)).filter_batches(lambda b: pc.is_valid(b["f0"])).map_batches(
        strict, WORD).name("Split"))
    assert "Split (1/1) failed: ValueError: not a timestamp (on a batch of 2 records whose first is '4999 a')" \
        in msg      # past another operator the source's position is not known: nothing is said


@pytest.mark.parametrize("returns, error", [
    (lambda b: pa.record_batch([b["f0"]], names=["word"]),
     "TypeError: the function returned columns ['word']; output_type Row(id: Integer, amount: Double) has "
     "columns ['id', 'amount']"),
    (lambda b: pa.record_batch([b["f0"], b["f0"]], names=["id", "amount"]),
     "TypeError: column 'id' is string, the output_type's is int32, and does not convert"),
    (lambda b: b.to_pylist(),
     "TypeError: the function returned list; a map_batches function returns a pyarrow.RecordBatch or "
     "pyarrow.Table"),
])
def test_a_result_that_does_not_fit_output_type_fails_naming_the_fix(tmp_path, returns, error):
    env = job_env(tmp_path)
    msg = failure(env.from_collection(["x", "y"], type_info=Types.STRING()).map_batches(returns, ORDER).name("Shape"))
    assert f"Shape (1/1) failed: {error}" in msg and "(on a batch of 2 records whose first is 'x'" in msg


def test_a_filter_mask_that_does_not_fit_fails(tmp_path):
    env = job_env(tmp_path)
    msg = failure(env.from_collection(["x", "y"], type_info=Types.STRING())
                  .filter_batches(lambda b: pa.array([True])).name("Keep"))
    assert "Keep (1/1) failed: ValueError: the function returned 1 booleans for a batch of 2 rows" in msg
    env = job_env(tmp_path)
    msg = failure(env.from_collection(["x", "y"], type_info=Types.STRING())
                  .filter_batches(lambda b: b["f0"]).name("Keep"))
    assert "Keep (1/1) failed: TypeError: the function returned string; a filter_batches function returns " \
           "a boolean" in msg


def test_wrong_use_fails_when_the_job_is_built(tmp_path):
    env = job_env(tmp_path)
    untyped = env.from_collection(["a"]).map(lambda s: s)     # no output_type: pickled records
    with pytest.raises(TypeError, match="Map Batches: the input stream has no declared type"):
        untyped.map_batches(lambda b: b, Types.STRING())
    with pytest.raises(TypeError, match="Filter Batches: the input stream has no declared type"):
        untyped.filter_batches(lambda b: pc.is_valid(b["f0"]))
    typed = env.from_collection(["a"], type_info=Types.STRING())
    with pytest.raises(TypeError, match="map_batches\\(\\) needs output_type"):
        typed.map_batches(lambda b: b, None)
    with pytest.raises(TypeError, match="expects a function"):
        typed.filter_batches("amount > 100")
