"""A timestamp assigner's result: an int of epoch milliseconds, as PyFlink's (a Java long).
Anything else fails in the assigner, naming the record and where it came from."""
from datetime import datetime, timezone

import pytest

from runtime.common import Duration, Types, WatermarkStrategy
from runtime.datastream.window import TumblingEventTimeWindows
from runtime_env import job_env
from task_harness import collect_in_tasks


def windowed(env, stream, extract):
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(1)) \
        .with_timestamp_assigner(lambda line, _: extract(line))
    return stream.assign_timestamps_and_watermarks(strategy).name("Times") \
        .key_by(lambda line: line[:1]).window(TumblingEventTimeWindows.of(Duration.of_seconds(10))) \
        .reduce(lambda a, b: a)


def lines(tmp_path, *rows) -> str:
    (tmp_path / "in.txt").write_text("".join(f"{r}\n" for r in rows))
    return str(tmp_path / "in.txt")


@pytest.mark.parametrize("value, says", [
    ("", r"returned None \(a record without an event time"),
    ("1.5", r"returned the float 1500.0 \(int\(...\) of it; time.time\(\) counts seconds"),
    ("dt", r"returned the datetime datetime.datetime\(2026, .*\) \(int\(dt.timestamp\(\) \* 1000\)"),
    ("text", r"returned the str 'text' \(parse it"),
    ("np", r"returned the float np.float64\(1000.0\) \(int\(...\) of it"),
])
def test_a_record_without_an_int_event_time_fails_in_the_assigner_naming_its_line(tmp_path, value, says):
    def extract(line):
        field = line[2:]
        if field == "dt":
            return datetime(2026, 1, 1, tzinfo=timezone.utc)
        if field == "text":
            return field
        if field == "1.5":
            return float(field) * 1000
        if field == "np":
            import numpy as np
            return np.float64(1000)
        return int(float(field)) if field else None
    env = job_env(tmp_path, 1)
    path = lines(tmp_path, "a 1000", "b 2000", f"c {value}".rstrip(), "d 3000")
    # Chained to the file source: the record and its file and line; not the window's
    # "did you forget to call assign_timestamps_and_watermarks?".
    with pytest.raises(AssertionError, match=rf"Times \(1/1\) failed: \w+Error: the timestamp assigner {says}.*"
                                             rf"\(on record 'c{' ' if value else ''}{value}', file {path}, line 3\)"):
        collect_in_tasks(windowed(env, env.read_text_file(path), extract))


def test_an_assigner_on_a_source_names_the_source_and_the_record(tmp_path):
    env = job_env(tmp_path, 1)
    path = lines(tmp_path, "1000", "", "3000")
    strategy = WatermarkStrategy.for_monotonous_timestamps() \
        .with_timestamp_assigner(lambda line, _: int(line) if line else None)
    from runtime.datastream.connectors.file_system import FileSource, StreamFormat
    source = FileSource.for_record_stream_format(StreamFormat.text_line_format(), path).build()
    stream = env.from_source(source, strategy, "Lines")
    with pytest.raises(AssertionError, match=rf"Source: Lines \(1/1\) failed: TypeError: the timestamp assigner "
                                             rf"returned None .* \(on record '', file {path}, line 2\)") as e:
        collect_in_tasks(stream.map(lambda x: x, Types.STRING()))
    assert "During handling" not in str(e.value)      # the traceback is the failure's own


def test_int_like_timestamps_pass(tmp_path):
    import numpy as np
    env = job_env(tmp_path, 1)
    path = lines(tmp_path, "a 1000", "a 2000", "b 12000")
    got = collect_in_tasks(windowed(env, env.read_text_file(path), lambda line: np.int64(line[2:])))
    assert sorted(got) == ["a 1000", "b 12000"]
