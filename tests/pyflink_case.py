"""PyFlink 2.3's ``CommonDataStreamTests`` set-up (pyflink/datastream/tests/test_data_stream.py) on
Sluice, so PyFlink's own test methods run here with their bodies unchanged: an environment at
parallelism 2 in STREAMING mode (writing to a scratch warehouse) and ``self.test_sink``.

The one difference: PyFlink's ``DataStreamTestSinkFunction`` is a Java sink that gathers the
records' strings in the test's JVM; here the sink's records stay in the tasks, so this sink
serves the tests that only build the job (its plan)."""
import shutil
import tempfile
import unittest
from pathlib import Path

from runtime.datastream import RuntimeExecutionMode, SinkFunction
from runtime_env import job_env


class DataStreamTestSinkFunction(SinkFunction):
    def invoke(self, value, context) -> None:
        pass

    def clear(self) -> None:
        pass


class PyFlinkCommonDataStreamTestCase(unittest.TestCase):
    def setUp(self) -> None:
        self.tempdir = tempfile.mkdtemp()
        self.env = job_env(Path(self.tempdir), 2)
        self.env.set_runtime_mode(RuntimeExecutionMode.STREAMING)
        self.test_sink = DataStreamTestSinkFunction()

    def tearDown(self) -> None:
        self.test_sink.clear()
        shutil.rmtree(self.tempdir, ignore_errors=True)

    def assert_equals_sorted(self, expected, actual):
        # otherwise, it may thrown exceptions such as the following:
        # TypeError: '<' not supported between instances of 'NoneType' and 'str'
        expected.sort(key=lambda x: str(x))
        actual.sort(key=lambda x: str(x))
        self.assertEqual(expected, actual)
