"""The text file reader's lines: UTF-8 files as Arrow string batches (split in C++), other
charsets as Python strings, the same lines and positions either way."""
import pytest

from runtime.connectors.files import FileReader
from runtime.datastream.connectors.file_system import FileSource, StreamFormat
from runtime.task.arrow_batch import ArrowBatch
from runtime.task.deployment import SplitRead


def read(path, charset="UTF-8", batch_size=2, monitored=False, **state):
    builder = FileSource.for_record_stream_format(StreamFormat.text_line_format(charset), str(path))
    if monitored:
        builder = builder.monitor_continuously(1000)
    reader = FileReader(builder.build(), None)
    split = SplitRead(str(path), 0, path.stat().st_size, dict(state))
    batches = list(reader.read(split, batch_size))
    return batches, reader.end_state(split)


def lines_of(batches):
    out = []
    for b in batches:
        values, stamps = b.rows() if type(b) is ArrowBatch else b
        assert stamps == [None] * len(values)
        out.extend(values)
    return out


@pytest.mark.parametrize("data, lines", [
    (b"a b\nc\n", ["a b", "c"]),
    (b"a\r\nb\r\n\r\nc", ["a", "b", "", "c"]),           # CRLF, an empty line, no newline at the end
    (b"x\r\r\ny\n\n", ["x\r", "y", ""]),                 # one \r before a newline goes
    ("é ü\n日本\n".encode(), ["é ü", "日本"]),
    (b"", []),
])
def test_utf8_lines_come_as_arrow_batches_of_the_same_lines(tmp_path, data, lines):
    path = tmp_path / "in.txt"
    path.write_bytes(data)
    batches, end = read(path)
    assert all(type(b) is ArrowBatch and b.columns.schema.names == ["f0"] for b in batches)
    assert [len(b) for b in batches] == [min(2, len(lines) - i) for i in range(0, len(lines), 2)]
    assert lines_of(batches) == lines
    assert end == {"offset": len(data), "line": len(lines)}


def test_a_line_limit_and_a_monitored_files_partial_line(tmp_path):
    path = tmp_path / "in.txt"
    path.write_bytes(b"1\n2\n3\npartial")
    batches, end = read(path, max_lines=2)
    assert lines_of(batches) == ["1", "2"] and end == {"offset": 4, "line": 2}
    batches, end = read(path, monitored=True)
    assert lines_of(batches) == ["1", "2", "3"] and end == {"offset": 6, "line": 3}


def test_other_charsets_are_python_strings_and_bad_utf8_fails_as_before(tmp_path):
    path = tmp_path / "in.txt"
    path.write_bytes("é\nü\n".encode("latin-1"))
    batches, _ = read(path, charset="ISO-8859-1")
    assert all(type(b) is tuple for b in batches) and lines_of(batches) == ["é", "ü"]
    with pytest.raises(UnicodeDecodeError):
        read(path)
