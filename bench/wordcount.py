"""Windowed WordCount benchmark: Sluice vs Spark Structured Streaming vs PyFlink vs a pyarrow floor.

    .venv/bin/python bench/wordcount.py [--words N] [--pyflink-words M] [--skip-pyflink]

One invocation generates a Zipf corpus with event timestamps (one text file per source split,
each in event-time order, lines ``<epoch_millis> word word ...``), then runs, one after the
other and each in its own subprocess (so each one's peak memory, child JVMs and Python workers
included, is measured on its own):

  sluice   the seed word count in event time: read_text_file -> flat_map (word, 1, ts)
           -> assign_timestamps_and_watermarks(monotonous, ts from field 2) -> key_by(0)
           -> TumblingEventTimeWindows 5 s -> sum(1) -> execute_and_collect()
  sluice_batches  the same job with an Arrow-batch function: read_text_file -> map_batches (a
           pyarrow split of a batch of lines into (word, 1, ts) with __timestamp)
           -> assign_timestamps_and_watermarks(monotonous, the records' timestamps) -> key_by(0)
           -> TumblingEventTimeWindows 5 s -> sum(1) -> execute_and_collect()
  sss      Spark Structured Streaming: readStream.text -> split -> withWatermark(0 s)
           -> groupBy(window 5 s, word).count() -> append to parquet, Trigger.AvailableNow,
           RocksDB state store
  pyflink  PyFlink 2.3 (its own venv, bench/.venv-pyflink, made on first use) on a slice of the
           corpus: FileSource -> the same Python flat_map/assigner -> key_by -> window -> reduce
  floor    pyarrow: read, split, group by (window start, word), count; no streaming machinery
  floor_python  the same, with the lines split into words in Python (as the jobs' user code)

Each job but PyFlink's runs ``--repeat`` times (3) after its warm-up, on fresh output locations
(a new warehouse, sink and checkpoint each time): its job time is the median, every run's time
is printed too (the first also pays the processes' first growth to the input's size; a stream's
later epochs run in grown processes). It prints words/s, wall time and peak RSS for each, the
rate ratios, checks every result against the counts the generator knows (Structured Streaming's
append mode holds back the windows its final watermark has not passed), and prints a Markdown
table for bench/README.md.

The script is also its own subprocess entry point (``--role NAME --spec FILE``); the roles
import nothing outside the standard library at module level, so the PyFlink role runs under
PyFlink's interpreter.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import os
import shutil
import statistics
import sys
import tempfile
import time

import competitor
from pyflink_env import PYFLINK_VERSION, ensure_pyflink_venv

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
WINDOW_MS = 5000
T0_MS = 1_700_000_000_000          # a multiple of 5 s: the corpus covers whole windows


# =========================================================================================
# The user code shared by Sluice and PyFlink (what a Flink user writes)
# =========================================================================================

def split_line(line):
    """'<ts> w1 w2 ...' -> (word, 1, ts) per word."""
    ts, _, rest = line.partition(" ")
    t = int(ts)
    for word in rest.split():
        yield word, 1, t


def event_timestamp(event, record_timestamp):
    return event[2]


def split_lines(batch):
    """A batch of '<ts> w1 w2 ...' lines -> (word, 1, ts) per word, the event time as __timestamp:
    the word count's user function written with Arrow-batch functions (map_batches)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    tokens = pc.split_pattern(batch["f0"], " ")
    words = pc.list_slice(tokens, 1)
    ts = pc.take(pc.cast(pc.list_element(tokens, 0), pa.int64()), pc.list_parent_indices(words))
    word = pc.list_flatten(words)
    return pa.RecordBatch.from_arrays([word, pa.array(np.ones(len(word), np.int64)), ts, ts],
                                      names=["f0", "f1", "f2", "__timestamp"])


def write_results(path, window_starts, words, counts):
    import pyarrow as pa
    import pyarrow.parquet as pq
    pq.write_table(pa.table({"window_start": pa.array(window_starts, pa.int64()),
                             "word": pa.array(words, pa.string()),
                             "count": pa.array(counts, pa.int64())}), path)


def window_of(ts):
    return ts - ts % WINDOW_MS


def timed_runs(spec, run):
    """``run(i)`` ``spec["repeat"]`` times, each on a fresh output location ``i``: the job time is
    the median, the runs' times are kept (the first also pays its processes' first growth to the
    input's size: memory faulted in, the JVM's heap grown). Returns (metrics, the last run's result)."""
    times, result = [], None
    for i in range(max(1, spec.get("repeat", 1))):
        t = time.perf_counter()
        result = run(i)
        times.append(time.perf_counter() - t)
    return {"job_s": statistics.median(times), "job_runs_s": times}, result


def nth(path, i):
    """Run i's output location: the path itself for the first run."""
    return path if i == 0 else f"{path}-{i}"


# =========================================================================================
# Roles (each runs in its own subprocess)
# =========================================================================================

def role_sluice(spec):
    """The seed word count, a Python function per record."""
    def build(env, folder):
        from runtime.common import Time, Types, WatermarkStrategy
        from runtime.datastream import TumblingEventTimeWindows
        return (
            env.read_text_file(folder)
            .flat_map(split_line, output_type=Types.TUPLE([Types.STRING(), Types.LONG(), Types.LONG()]))
            .assign_timestamps_and_watermarks(
                WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(event_timestamp))
            .key_by(0)
            .window(TumblingEventTimeWindows.of(Time.seconds(5)))
            .sum(1))                      # keeps the window's first record's ts in field 2
    return _run_sluice(spec, build)


def role_sluice_batches(spec):
    """The seed word count with an Arrow-batch function: the records stay Arrow up to the window's
    pre-aggregation (the records keep the timestamps split_lines gives them)."""
    def build(env, folder):
        from runtime.common import Time, Types, WatermarkStrategy
        from runtime.datastream import TumblingEventTimeWindows
        return (
            env.read_text_file(folder)
            .map_batches(split_lines, output_type=Types.TUPLE([Types.STRING(), Types.LONG(), Types.LONG()]))
            .assign_timestamps_and_watermarks(WatermarkStrategy.for_monotonous_timestamps())
            .key_by(0)
            .window(TumblingEventTimeWindows.of(Time.seconds(5)))
            .sum(1))
    return _run_sluice(spec, build)


def _run_sluice(spec, build):
    """Run the job ``build(env, input folder)`` makes on local Spark, collecting its results."""
    sys.path.insert(0, REPO)
    from runtime.common import Configuration
    from runtime.datastream import StreamExecutionEnvironment

    metrics = {}

    def collect(folder, warehouse):
        conf = Configuration()
        conf.set_string("sluice.spark.master", f"local[{spec['parallelism']}]")
        conf.set_string("sluice.warehouse", warehouse)
        env = StreamExecutionEnvironment.get_execution_environment(conf)
        env.set_parallelism(spec["parallelism"])
        return list(build(env, folder).execute_and_collect("bench wordcount"))

    # Start Spark before the clock, as the Structured Streaming role does (startup is reported
    # apart). get_spark_session is what the executor calls; it returns this session then.
    t = time.perf_counter()
    try:
        from runtime.execution.spark import get_spark_session
        get_spark_session(f"local[{spec['parallelism']}]", "sluice: bench wordcount")
    except Exception as e:  # the engine may have moved: then startup is inside the job time
        metrics["note_startup"] = f"could not pre-start Spark ({type(e).__name__}: {e})"
    if spec.get("warm_up", True):
        # The same job once on two lines a split, as the Structured Streaming role runs its query:
        # the process's first job pays its code's first use (imports, the JVM's and the workers'
        # first run of the job's paths, delta-rs's first commit), start-up here, not job time.
        warm = spec["warehouse"] + "-warm-up"
        shutil.rmtree(warm, ignore_errors=True)
        folder = two_line_input(os.path.join(warm, "input"), spec["parallelism"])
        t1 = time.perf_counter()
        collect(folder, os.path.join(warm, "warehouse"))
        metrics["warm_up_s"] = time.perf_counter() - t1
    metrics["startup_s"] = time.perf_counter() - t

    # Keep the JobExecutionResult (epochs, records in/out, collected records) as well: the
    # executor env.execute() finds is the one a client sets (as `sluice plan` does).
    captured = {}
    token = None
    try:
        from runtime.datastream.pipeline import current_executor
        from runtime.execution.executor import SparkPipelineExecutor

        class KeepResult(SparkPipelineExecutor):
            def execute(self, stream_graph, stop=None):
                captured["result"] = super().execute(stream_graph, stop)
                return captured["result"]
        token = current_executor.set(KeepResult())
    except Exception as e:
        metrics["note_capture"] = f"job result not captured ({type(e).__name__}: {e})"

    timing, records = timed_runs(spec, lambda i: collect(spec["input"], nth(spec["warehouse"], i)))
    metrics.update(timing)
    if token is not None:
        current_executor.reset(token)

    result = captured.get("result")
    if result is not None:
        epochs = getattr(result, "epochs", [])
        metrics["epochs"] = len(epochs)
        metrics["records_in"] = sum(getattr(e, "records_in", 0) for e in epochs)
        metrics["records_out"] = sum(getattr(e, "records_out", 0) for e in epochs)
        metrics["late_records_dropped"] = sum(getattr(e, "late_records_dropped", 0) for e in epochs)
        collected = getattr(result, "collected", {}) or {}
        if not records and len([v for v in collected.values() if v]) == 1:
            sink_id, records = next((k, v) for k, v in collected.items() if v)
            metrics["note_collect"] = (
                f"execute_and_collect() returned no records although the job emitted "
                f"{metrics['records_out']}; took the {len(records)} records from "
                f"JobExecutionResult.collected[{sink_id!r}] (the collect sink is keyed by its "
                f"input's id, not its own)")
    metrics["result_records"] = len(records)
    write_results(spec["out"], [window_of(r[2]) for r in records], [r[0] for r in records],
                  [r[1] for r in records])
    return metrics


def role_sss(spec):
    metrics = {}
    t = time.perf_counter()
    spark = competitor.structured_streaming_session("structured streaming bench wordcount", spec["parallelism"])
    # Warm up as the Sluice roles do: the same query once on two lines a split, so the JVM's
    # first-query costs (code generation, class loading, RocksDB) are start-up here too, not job time.
    if spec.get("warm_up", True):
        warm = spec["checkpoint"] + "-warm-up"
        shutil.rmtree(warm, ignore_errors=True)
        t1 = time.perf_counter()
        _sss_query(spark, two_line_input(os.path.join(warm, "input"), spec["parallelism"]),
                   os.path.join(warm, "sink"), os.path.join(warm, "checkpoint")).awaitTermination()
        metrics["warm_up_s"] = time.perf_counter() - t1
    metrics["startup_s"] = time.perf_counter() - t

    def run(i):
        q = _sss_query(spark, spec["input"], nth(spec["sink"], i), nth(spec["checkpoint"], i))
        q.awaitTermination()
        return q, nth(spec["sink"], i)
    timing, (query, sink) = timed_runs(spec, run)
    metrics.update(timing)

    watermarks = []
    for p in query.recentProgress:
        wm = (p.get("eventTime") or {}).get("watermark")
        if wm:
            watermarks.append(int(_dt.datetime.fromisoformat(wm.replace("Z", "+00:00")).timestamp() * 1000))
    metrics["final_watermark"] = max(watermarks) if watermarks else None
    metrics["micro_batches"] = len(query.recentProgress)
    metrics["state_rows_total"] = max(
        (sum(o.get("numRowsTotal", 0) for o in p.get("stateOperators", [])) for p in query.recentProgress),
        default=None)
    out = spark.read.parquet(sink).toPandas() if _has_parquet(sink) else None
    spark.stop()
    if out is None:
        write_results(spec["out"], [], [], [])
        metrics["result_records"] = 0
    else:
        write_results(spec["out"], out["window_start"].tolist(), out["word"].tolist(), out["count"].tolist())
        metrics["result_records"] = len(out)
    return metrics


def two_line_input(folder, splits):
    """A warm-up run's input: two lines in each of ``splits`` files, in two windows."""
    os.makedirs(folder, exist_ok=True)
    for i in range(splits):
        with open(os.path.join(folder, f"part-{i}.txt"), "w") as f:
            f.write(f"{T0_MS} a b\n{T0_MS + 2 * WINDOW_MS} a\n")
    return folder


def _sss_query(spark, input_folder, sink, checkpoint):
    from pyspark.sql import functions as F
    lines = spark.readStream.text(input_folder)
    parts = F.split(lines.value, " ")
    events = lines.select(
        F.timestamp_millis(parts[0].cast("long")).alias("ts"),
        F.explode(F.expr("slice(split(value, ' '), 2, size(split(value, ' ')) - 1)")).alias("word"))
    counts = (events.withWatermark("ts", "0 seconds")
              .groupBy(F.window("ts", "5 seconds"), "word").count()
              .select(F.unix_millis(F.col("window.start")).alias("window_start"), "word", "count"))
    return (counts.writeStream.outputMode("append").format("parquet")
            .option("path", sink).option("checkpointLocation", checkpoint)
            .trigger(availableNow=True).start())


def _has_parquet(folder):
    return os.path.isdir(folder) and any(f.endswith(".parquet") for f in os.listdir(folder))


def role_floor(spec):
    import pyarrow as pa
    import pyarrow.compute as pc
    metrics = {}
    t = time.perf_counter()
    # The first compute call initialises Arrow's kernels (over a second): start-up, not work.
    pc.split_pattern(pa.array(["0 a"]), " ")
    pa.table({"k": ["a"]}).group_by("k").aggregate([("k", "count")])
    metrics["startup_s"] = time.perf_counter() - t
    return _floor_runs(spec, metrics, _floor_counts)


def _floor_counts(folder):
    import pyarrow as pa
    import pyarrow.compute as pc
    pieces = []
    for name in sorted(os.listdir(folder)):
        with open(os.path.join(folder, name), "rb") as f:
            text = f.read().decode("utf-8")
        lines = pc.list_flatten(pc.split_pattern(pa.array([text], pa.large_string()), "\n"))
        lines = pc.filter(lines, pc.not_equal(lines, ""))
        tokens = pc.split_pattern(lines, " ")
        ts = pc.cast(pc.list_element(tokens, 0), pa.int64())
        words = pc.list_slice(tokens, 1)
        window_start = pc.multiply(pc.divide(ts, WINDOW_MS), WINDOW_MS)   # ts > 0: truncation = floor
        pieces.append(pa.table({"window_start": pc.take(window_start, pc.list_parent_indices(words)),
                                "word": pc.cast(pc.list_flatten(words), pa.string())}))
    return pa.concat_tables(pieces).group_by(["window_start", "word"]).aggregate([("word", "count")])


def role_floor_python(spec):
    """The floor with the lines split into words in Python, as the jobs' user code does, and
    grouped by pyarrow: what the count costs when the words are Python objects (one process)."""
    import pyarrow as pa
    metrics = {}
    t = time.perf_counter()
    pa.table({"k": ["a"]}).group_by("k").aggregate([("k", "count")])
    metrics["startup_s"] = time.perf_counter() - t
    return _floor_runs(spec, metrics, _floor_python_counts)


def _floor_runs(spec, metrics, counts_of):
    """A floor's timed runs of ``counts_of(input folder)`` (a table of window_start, word, word_count)."""
    timing, counts = timed_runs(spec, lambda i: counts_of(spec["input"]))
    metrics.update(timing)
    metrics["result_records"] = counts.num_rows
    write_results(spec["out"], counts["window_start"], counts["word"], counts["word_count"])
    return metrics


def _floor_python_counts(folder):
    import pyarrow as pa
    words, window_starts = [], []
    for name in sorted(os.listdir(folder)):
        with open(os.path.join(folder, name), encoding="utf-8") as f:
            for line in f:
                ts, _, rest = line.partition(" ")
                line_words = rest.split()
                words.extend(line_words)
                window_starts.extend([window_of(int(ts))] * len(line_words))
    table = pa.table({"window_start": pa.array(window_starts, pa.int64()), "word": pa.array(words, pa.string())})
    return table.group_by(["window_start", "word"]).aggregate([("word", "count")])


def role_pyflink(spec):
    from pyflink.common import Time, Types, WatermarkStrategy
    from pyflink.common.watermark_strategy import TimestampAssigner
    from pyflink.datastream import StreamExecutionEnvironment
    from pyflink.datastream.connectors.file_system import FileSource, StreamFormat
    from pyflink.datastream.window import TumblingEventTimeWindows

    class EventTimestamp(TimestampAssigner):
        def extract_timestamp(self, value, record_timestamp):
            return value[2]

    metrics = {"python_worker_mode": os.environ.get("_python_worker_execution_mode", "loopback")}
    t = time.perf_counter()
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(spec["parallelism"])
    env.set_python_executable(sys.executable)
    metrics["startup_s"] = time.perf_counter() - t

    t = time.perf_counter()
    source = FileSource.for_record_stream_format(StreamFormat.text_line_format(), spec["input"]).build()
    counts = (
        env.from_source(source, WatermarkStrategy.no_watermarks(), "corpus")
        .flat_map(split_line, output_type=Types.TUPLE([Types.STRING(), Types.LONG(), Types.LONG()]))
        .assign_timestamps_and_watermarks(
            WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(EventTimestamp()))
        .key_by(lambda e: e[0], key_type=Types.STRING())
        .window(TumblingEventTimeWindows.of(Time.seconds(5)))
        .reduce(lambda a, b: (a[0], a[1] + b[1], a[2]),
                output_type=Types.TUPLE([Types.STRING(), Types.LONG(), Types.LONG()]))
    )
    with counts.execute_and_collect("bench wordcount") as it:
        records = [tuple(r) for r in it]
    metrics["job_s"] = time.perf_counter() - t
    metrics["result_records"] = len(records)
    write_results(spec["out"], [window_of(r[2]) for r in records], [r[0] for r in records],
                  [r[1] for r in records])
    return metrics


ROLES = {"sluice": role_sluice, "sluice_batches": role_sluice_batches, "sss": role_sss, "floor": role_floor, "floor_python": role_floor_python,
         "pyflink": role_pyflink}


def run_role(name, spec_path):
    return competitor.run_role(ROLES, name, spec_path)


# =========================================================================================
# The corpus
# =========================================================================================

def make_vocabulary(rng, size):
    import numpy as np
    words, seen = [], set()
    while len(words) < size:
        n = (size - len(words)) * 2
        lengths = rng.integers(3, 11, n)
        letters = rng.integers(97, 123, (n, 10), dtype=np.uint8)
        for row, length in zip(letters, lengths):
            w = row[:length].tobytes().decode("ascii")
            if w not in seen:
                seen.add(w)
                words.append(w)
                if len(words) == size:
                    break
    return words


def generate_corpus(workdir, n_words, vocab_size, splits, event_seconds, zipf_s, seed, slice_words):
    """Write the corpus (and PyFlink's slice) and return what the generator knows."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    from itertools import chain

    t = time.perf_counter()
    rng = np.random.default_rng(seed)
    vocab = make_vocabulary(rng, vocab_size)
    vocab_arr = np.array(vocab, dtype=object)
    p = 1.0 / np.arange(1, vocab_size + 1, dtype=np.float64) ** zipf_s
    p /= p.sum()
    word_idx = rng.choice(vocab_size, size=n_words, p=p)
    # Lines of 5..15 words (10 on average); line i goes to split i % splits.
    lengths = rng.integers(5, 16, n_words // 5 + 16)
    ends = np.cumsum(lengths)
    n_lines = int(np.searchsorted(ends, n_words) + 1)
    lengths = lengths[:n_lines].copy()
    lengths[-1] -= int(ends[n_lines - 1] - n_words)
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    split_of_line = np.arange(n_lines) % splits
    line_ts = np.empty(n_lines, dtype=np.int64)
    for s in range(splits):                  # each file in event-time order
        mask = split_of_line == s
        line_ts[mask] = T0_MS + np.sort(rng.integers(0, event_seconds * 1000, int(mask.sum())))

    def write(folder, line_mask):
        os.makedirs(folder, exist_ok=True)
        for s in range(splits):
            lines = np.nonzero(line_mask & (split_of_line == s))[0]
            lens = lengths[lines]
            idx = _ranges(starts[lines], lens)
            # tokens: ts w w w ts w w ...; separators: ' ' inside a line, '\n' after its last word
            n_tok = len(idx) + len(lines)
            line_first = np.concatenate(([0], np.cumsum(lens + 1)[:-1]))
            tokens = np.empty(n_tok, dtype=object)
            is_ts = np.zeros(n_tok, dtype=bool)
            is_ts[line_first] = True
            tokens[is_ts] = line_ts[lines].astype(str).astype(object)
            tokens[~is_ts] = vocab_arr[word_idx[idx]]
            seps = np.full(n_tok, " ", dtype=object)
            seps[line_first + lens] = "\n"
            with open(os.path.join(folder, f"part-{s}.txt"), "w") as f:
                f.write("".join(chain.from_iterable(zip(tokens.tolist(), seps.tolist()))))
        return int(lengths[line_mask].sum())

    def truth(line_mask):
        win = np.repeat((line_ts - T0_MS) // WINDOW_MS, lengths)[np.repeat(line_mask, lengths)]
        key = win * vocab_size + word_idx[np.repeat(line_mask, lengths)]
        keys, counts = np.unique(key, return_counts=True)
        return pa.table({"window_start": pa.array(T0_MS + (keys // vocab_size) * WINDOW_MS, pa.int64()),
                         "word": pa.array(vocab_arr[keys % vocab_size].tolist(), pa.string()),
                         "count": pa.array(counts, pa.int64())})

    everything = np.ones(n_lines, dtype=bool)
    written = write(os.path.join(workdir, "corpus"), everything)
    pq.write_table(truth(everything), os.path.join(workdir, "truth.parquet"))
    # PyFlink's slice: every k-th line of each split, so it spans all windows too.
    k = max(1, -(-n_words // max(1, slice_words)))
    local_index = np.arange(n_lines) // splits
    slice_mask = local_index % k == 0
    slice_written = write(os.path.join(workdir, "slice"), slice_mask)
    pq.write_table(truth(slice_mask), os.path.join(workdir, "truth_slice.parquet"))
    return {"words": written, "lines": n_lines, "slice_words": slice_written,
            "slice_lines": int(slice_mask.sum()), "seconds": time.perf_counter() - t,
            "bytes": sum(os.path.getsize(os.path.join(workdir, "corpus", f))
                         for f in os.listdir(os.path.join(workdir, "corpus")))}


def _ranges(starts, lens):
    """Concatenation of arange(s, s + n) for each (s, n), vectorised."""
    import numpy as np
    total = int(lens.sum())
    offsets = np.repeat(starts - np.concatenate(([0], np.cumsum(lens)[:-1])), lens)
    return np.arange(total) + offsets


# =========================================================================================
# Running a competitor (bench/competitor.py: a subprocess, its tree's peak RSS and CPU, timeout)
# =========================================================================================

def run_competitor(name, role, python, spec, workdir, timeout, env_extra=None):
    spec = dict(spec)
    spec["out"] = os.path.join(workdir, "results", f"{name}.parquet")
    spec["metrics"] = os.path.join(workdir, "results", f"{name}.json")
    os.makedirs(os.path.dirname(spec["out"]), exist_ok=True)
    log_path = os.path.join(workdir, "logs", f"{name}.log")
    os.makedirs(os.path.dirname(log_path), exist_ok=True)

    def announce(load):
        print(f"\n== {name}: running (log: {log_path}; load average {load:.2f} on {os.cpu_count()} cores)",
              flush=True)
    metrics = competitor.run(python, os.path.abspath(__file__), role, spec,
                             os.path.join(workdir, "results", f"{name}.spec.json"), log_path, timeout,
                             env=env_extra, cwd=REPO, announce=announce)
    metrics["result_path"] = spec["out"]
    if metrics.get("ok"):
        print(f"== {name}: done in {metrics['wall_s']:.1f} s (job {metrics['job_s']:.2f} s), peak RSS "
              f"{_mib(metrics['peak_rss'])} MiB, CPU {metrics['cpu_s'] or 0:.1f} s", flush=True)
    else:
        print(f"== {name}: FAILED: {metrics.get('error')}", flush=True)
        print(competitor.tail(log_path, 25), flush=True)
    return metrics


def _mib(n):
    return f"{n / 2**20:,.0f}" if n else "-"


# =========================================================================================
# Checking the counts
# =========================================================================================

def compare(expected, got_path, label):
    """(ok, message) comparing a result parquet with the expected table."""
    import pandas as pd
    import pyarrow.parquet as pq
    if not os.path.exists(got_path):
        return False, f"{label}: no result file"
    got = pq.read_table(got_path).to_pandas()
    exp = expected if isinstance(expected, pd.DataFrame) else expected.to_pandas()
    dup = int(got.duplicated(["window_start", "word"]).sum())
    if dup:
        got = got.groupby(["window_start", "word"], as_index=False)["count"].sum()
    m = exp.merge(got, on=["window_start", "word"], how="outer", suffixes=("_exp", "_got"), indicator=True)
    missing = m[m["_merge"] == "left_only"]
    extra = m[m["_merge"] == "right_only"]
    both = m[m["_merge"] == "both"]
    wrong = both[both["count_exp"] != both["count_got"]]
    total_exp, total_got = int(exp["count"].sum()), int(got["count"].sum())
    if not (len(missing) or len(extra) or len(wrong) or dup):
        return True, f"{label}: OK ({len(exp):,} (window, word) counts, {total_exp:,} words)"
    lines = [f"{label}: MISMATCH: expected {len(exp):,} (window, word) counts / {total_exp:,} words, "
             f"got {len(got) + dup:,} rows / {total_got:,} words; {len(missing):,} missing, "
             f"{len(extra):,} unexpected, {len(wrong):,} with a wrong count"
             + (f", {dup:,} duplicated keys" if dup else "")]
    for kind, frame in (("missing", missing), ("unexpected", extra), ("wrong", wrong)):
        if len(frame):
            sample = frame.head(3)[["window_start", "word", "count_exp", "count_got"]].to_dict("records")
            lines.append(f"    e.g. {kind}: {sample}")
    return False, "\n".join(lines)


# =========================================================================================
# The report
# =========================================================================================

def report(results, corpus, args):
    rows = []
    for name, label, words in (("sluice", "Sluice", corpus["words"]),
                               ("sluice_batches", "Sluice, Arrow-batch function", corpus["words"]),
                               ("sss", "Spark Structured Streaming", corpus["words"]),
                               ("pyflink", f"PyFlink {PYFLINK_VERSION}", corpus["slice_words"]),
                               ("floor", "floor (pyarrow group-by)", corpus["words"]),
                               ("floor_python", "floor, words split in Python", corpus["words"]),
                               ("floor_slice", "floor on PyFlink's slice", corpus["slice_words"])):
        m = results.get(name)
        if m is None:
            continue
        ok = m.get("ok")
        rate = words / m["job_s"] if ok and m.get("job_s") else None
        e2e = words / m["wall_s"] if ok and m.get("wall_s") else None
        rows.append({"name": name, "label": label, "words": words, "ok": ok, "rate": rate, "e2e": e2e,
                     "job_s": m.get("job_s") if ok else None, "wall_s": m.get("wall_s"),
                     "runs": m.get("job_runs_s") if ok else None,
                     "startup_s": m.get("startup_s") if ok else None, "warm_up_s": m.get("warm_up_s") if ok else None,
                     "peak": m.get("peak_rss"), "peak_jvm": m.get("peak_rss_jvm"), "cpu_s": m.get("cpu_s"),
                     "load": m.get("load_before"),
                     "check": m.get("check", "-"), "error": m.get("error")})

    def f(x, fmt):
        return "-" if x is None else format(x, fmt)

    header = ("| competitor | words | words/s (job) | job s (median) | runs s | warm-up run s "
              "| wall s (incl. start-up) | words/s (wall) | CPU s (tree) | peak RSS MiB (tree) | of which JVM MiB "
              "| load before | counts |")
    md = [header, "|" + "---|" * 13]
    for r in rows:
        status = r["check"] if r["ok"] else f"FAILED: {(r['error'] or '').splitlines()[0][:80]}"
        runs = ", ".join(f"{t:.2f}" for t in r["runs"]) if r["runs"] else "-"
        md.append(f"| {r['label']} | {r['words']:,} | {f(r['rate'], ',.0f')} | {f(r['job_s'], '.2f')} | {runs} "
                  f"| {f(r['warm_up_s'], '.2f')} | {f(r['wall_s'], '.1f')} | {f(r['e2e'], ',.0f')} | {f(r['cpu_s'], '.1f')} "
                  f"| {_mib(r['peak'])} | {_mib(r['peak_jvm'])} | {f(r['load'], '.2f')} | {status} |")
    by = {r["name"]: r for r in rows}

    def ratio(a, b, key="rate"):
        ra, rb = by.get(a, {}).get(key), by.get(b, {}).get(key)
        return f"{ra / rb:.3g}x" if ra and rb else "n/a"

    md.append("")
    md.append("| ratio (Sluice rate / other's rate) | job | wall |")
    md.append("|---|---|---|")
    md.append(f"| Sluice / Structured Streaming | {ratio('sluice', 'sss')} | {ratio('sluice', 'sss', 'e2e')} |")
    md.append(f"| Sluice / PyFlink (different corpus sizes) | {ratio('sluice', 'pyflink')} "
              f"| {ratio('sluice', 'pyflink', 'e2e')} |")
    md.append(f"| Sluice / floor | {ratio('sluice', 'floor')} | {ratio('sluice', 'floor', 'e2e')} |")
    md.append(f"| Sluice, Arrow-batch function / floor | {ratio('sluice_batches', 'floor')} "
              f"| {ratio('sluice_batches', 'floor', 'e2e')} |")
    md.append(f"| Sluice, Arrow-batch function / Structured Streaming | {ratio('sluice_batches', 'sss')} "
              f"| {ratio('sluice_batches', 'sss', 'e2e')} |")
    md.append(f"| Sluice / floor with words split in Python | {ratio('sluice', 'floor_python')} "
              f"| {ratio('sluice', 'floor_python', 'e2e')} |")
    md.append(f"| Structured Streaming / floor | {ratio('sss', 'floor')} | {ratio('sss', 'floor', 'e2e')} |")
    md.append(f"| PyFlink / floor on its slice | {ratio('pyflink', 'floor_slice')} "
              f"| {ratio('pyflink', 'floor_slice', 'e2e')} |")
    return "\n".join(md)


# =========================================================================================
# main
# =========================================================================================

def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--words", type=int, default=5_000_000, help="corpus size (default 5,000,000)")
    parser.add_argument("--pyflink-words", type=int, default=200_000, help="PyFlink's slice (default 200,000)")
    parser.add_argument("--skip-pyflink", action="store_true")
    parser.add_argument("--skip", default="",
                        help="comma-separated competitors to skip: sluice,sluice_batches,sss,floor,floor_python,pyflink")
    parser.add_argument("--vocabulary", type=int, default=100_000)
    parser.add_argument("--zipf", type=float, default=1.1, help="Zipf exponent s of the word ranks")
    parser.add_argument("--event-seconds", type=int, default=60, help="event time the corpus spans")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--parallelism", type=int, default=os.cpu_count() or 2,
                        help="source splits, Spark cores and job parallelism (default: cores)")
    parser.add_argument("--timeout", type=int, default=3600, help="seconds per competitor")
    parser.add_argument("--repeat", type=int, default=3,
                        help="timed runs of each job after its warm-up, each on fresh output locations; the "
                             "job time is their median (default 3; PyFlink runs once)")
    parser.add_argument("--cold", action="store_true",
                        help="no warm-up run before the Sluice and Structured Streaming jobs' clocks")
    parser.add_argument("--pyflink-worker-mode", choices=("process", "loopback"), default="process",
                        help="PyFlink's Python workers: separate processes (as on a cluster; default) "
                             "or loopback (in the client process, PyFlink's local default)")
    parser.add_argument("--workdir", help="where the corpus, results and logs go (default: a new temp folder)")
    parser.add_argument("--keep", action="store_true",
                        help="keep the work folder (kept anyway when a competitor failed or a count differed)")
    parser.add_argument("--role", help=argparse.SUPPRESS)
    parser.add_argument("--spec", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.role:
        return run_role(args.role, args.spec)

    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    if args.skip_pyflink:
        skip.add("pyflink")
    workdir = args.workdir or tempfile.mkdtemp(prefix="sluice-bench-")
    os.makedirs(workdir, exist_ok=True)
    for sub in os.listdir(workdir):
        if sub in ("corpus", "slice", "results", "sss") or sub.startswith(("sluice-warehouse", "sluice-batches-warehouse")):
            shutil.rmtree(os.path.join(workdir, sub), ignore_errors=True)
    par = args.parallelism
    print(f"Windowed WordCount benchmark: {args.words:,} words, vocabulary {args.vocabulary:,} "
          f"(Zipf s={args.zipf}), {par} splits/cores, event time {args.event_seconds} s in "
          f"{WINDOW_MS // 1000} s tumbling windows; work folder {workdir}", flush=True)

    corpus = generate_corpus(workdir, args.words, args.vocabulary, par, args.event_seconds, args.zipf,
                             args.seed, args.pyflink_words)
    print(f"corpus: {corpus['words']:,} words in {corpus['lines']:,} lines, {corpus['bytes'] / 2**20:.1f} MiB "
          f"in {par} files; PyFlink slice {corpus['slice_words']:,} words; generated in "
          f"{corpus['seconds']:.1f} s", flush=True)

    import pyarrow.parquet as pq
    truth = pq.read_table(os.path.join(workdir, "truth.parquet")).to_pandas()
    truth_slice = pq.read_table(os.path.join(workdir, "truth_slice.parquet")).to_pandas()
    corpus_dir, slice_dir = os.path.join(workdir, "corpus"), os.path.join(workdir, "slice")
    me = sys.executable
    spark_env = {"PYSPARK_PYTHON": me, "PYSPARK_DRIVER_PYTHON": me}
    results = {}
    checks = []

    def check(name, expected, label):
        m = results[name]
        if not m.get("ok"):
            m["check"] = "-"
            checks.append(f"{label}: not checked, the run failed")
            return
        ok, msg = compare(expected, m["result_path"], label)
        m["check"] = "OK" if ok else "MISMATCH"
        checks.append(msg)

    if "sluice" not in skip:
        results["sluice"] = run_competitor(
            "sluice", "sluice", me, {"input": corpus_dir, "parallelism": par, "repeat": args.repeat,
                                     "warehouse": os.path.join(workdir, "sluice-warehouse"), "warm_up": not args.cold},
            workdir, args.timeout, spark_env)
        check("sluice", truth, "Sluice vs generator (= floor)")

    if "sluice_batches" not in skip:
        results["sluice_batches"] = run_competitor(
            "sluice_batches", "sluice_batches", me,
            {"input": corpus_dir, "parallelism": par, "repeat": args.repeat,
             "warehouse": os.path.join(workdir, "sluice-batches-warehouse"), "warm_up": not args.cold},
            workdir, args.timeout, spark_env)
        check("sluice_batches", truth, "Sluice with an Arrow-batch function vs generator")

    if "sss" not in skip:
        results["sss"] = run_competitor(
            "sss", "sss", me, {"input": corpus_dir, "parallelism": par, "repeat": args.repeat,
                               "sink": os.path.join(workdir, "sss", "out"),
                               "checkpoint": os.path.join(workdir, "sss", "checkpoint"), "warm_up": not args.cold},
            workdir, args.timeout, spark_env)
        m = results["sss"]
        wm = m.get("final_watermark")
        if m.get("ok"):
            # Append mode emits a window once the watermark reaches its end; the final
            # watermark (max event time, no delay) has not passed the last window(s).
            expected = truth if wm is None else truth[truth["window_start"] + WINDOW_MS <= wm]
            held = truth[~truth.index.isin(expected.index)]
            note = (f"append mode held back {held['window_start'].nunique()} window(s) not passed by "
                    f"the final watermark {wm} ({int(held['count'].sum()):,} words)" if wm else "no watermark reported")
            m["note_append"] = note
            check("sss", expected, f"Structured Streaming vs generator, minus held-back windows ({note})")
        else:
            check("sss", truth, "Structured Streaming")

    if "floor" not in skip:
        results["floor"] = run_competitor("floor", "floor", me, {"input": corpus_dir, "repeat": args.repeat},
                                          workdir, args.timeout)
        check("floor", truth, "floor vs generator")
    if "floor_python" not in skip:
        results["floor_python"] = run_competitor("floor_python", "floor_python", me,
                                                 {"input": corpus_dir, "repeat": args.repeat},
                                                 workdir, args.timeout)
        check("floor_python", truth, "floor with a Python split vs generator")

    if "pyflink" not in skip:
        os.makedirs(os.path.join(workdir, "logs"), exist_ok=True)
        python, why = ensure_pyflink_venv(os.path.join(workdir, "logs", "pyflink-venv.log"))
        if python is None:
            print(f"== pyflink: SKIPPED: {why}", flush=True)
            results["pyflink"] = {"ok": False, "error": f"no PyFlink venv: {why}"}
            checks.append(f"PyFlink: not run ({why.splitlines()[0]})")
        else:
            results["pyflink"] = run_competitor(
                "pyflink", "pyflink", python, {"input": slice_dir, "parallelism": par}, workdir,
                args.timeout, {"_python_worker_execution_mode": args.pyflink_worker_mode})
            if "floor" not in skip:
                results["floor_slice"] = run_competitor("floor_slice", "floor", me, {"input": slice_dir},
                                                        workdir, args.timeout)
                check("floor_slice", truth_slice, "floor on the slice vs generator")
                if results["floor_slice"].get("ok") and results["pyflink"].get("ok"):
                    import pandas as pd
                    floor_slice = pd.read_parquet(results["floor_slice"]["result_path"])
                    ok, msg = compare(floor_slice, results["pyflink"]["result_path"], "PyFlink vs floor on its slice")
                    results["pyflink"]["check"] = "OK" if ok else "MISMATCH"
                    checks.append(msg)
                else:
                    check("pyflink", truth_slice, "PyFlink vs generator on its slice")
            else:
                check("pyflink", truth_slice, "PyFlink vs generator on its slice")

    if results.get("sluice", {}).get("ok") and results.get("floor", {}).get("ok"):
        import pandas as pd
        ok, msg = compare(pd.read_parquet(results["floor"]["result_path"]), results["sluice"]["result_path"],
                          "Sluice vs floor")
        checks.append(msg)

    print("\n== counts")
    for c in checks:
        print("  " + c)
    print("\n== notes")
    for name, m in results.items():
        for k, v in sorted(m.items()):
            if k.startswith("note_") or k in ("epochs", "records_in", "records_out", "late_records_dropped",
                                              "micro_batches", "final_watermark", "state_rows_total",
                                              "python_worker_mode", "result_records"):
                print(f"  {name}.{k}: {v}")
        if not m.get("ok"):
            print(f"  {name}: FAILED: {m.get('error')}")
    print(f"\n== results (Markdown; {corpus['words']:,} words, PyFlink slice {corpus['slice_words']:,}, "
          f"{par} cores, {time.strftime('%Y-%m-%d')})\n")
    print(report(results, corpus, args))
    print()
    mismatches = [c for c in checks if "MISMATCH" in c]
    failed = [name for name, m in results.items() if not m.get("ok")]
    if args.keep or args.workdir or mismatches or failed:
        print(f"work folder kept (corpus, results, logs): {workdir}")
    else:
        shutil.rmtree(workdir, ignore_errors=True)
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
