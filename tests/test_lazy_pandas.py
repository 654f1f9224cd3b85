"""pandas is imported only by a job that uses it (runtime.common.lazy_pandas): pyarrow's first
conversion of a list no longer imports it, and once anything imports pandas, pyarrow's pandas
integration is whole (categoricals, DataFrames, ``to_pandas``)."""
import subprocess
import sys

import pyarrow as pa

from runtime.common import Types

CHECK = """
import sys
import pyarrow as pa
import runtime.task.stream_task
pa.array(["a", None]); pa.table({"x": [1, 2]}); pa.RecordBatch.from_pylist([{"x": 1}])
print("pandas before:", "pandas" in sys.modules)
import pandas as pd
print("categorical:", pa.array(pd.Series(pd.Categorical(["a", "b", "a"]))).type)
print("frame:", pa.table(pd.DataFrame({"x": [1, 2]})).column_names)
print("series:", pa.array(pd.Series([1.5, None])).to_pylist())
print("loader:", type(pd.__spec__.loader).__name__)
"""


def test_converting_lists_leaves_pandas_unimported_until_something_imports_it():
    out = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == [
        "pandas before: False",
        "categorical: dictionary<values=string, indices=int8, ordered=0>",
        "frame: ['x']",
        "series: [1.5, None]",
        "loader: SourceFileLoader",
    ]


def test_a_batch_function_may_use_pandas(tmp_path, collect):
    from runtime_env import job_env
    env = job_env(tmp_path, 1)
    doubled = env.from_collection([(1,), (2,), (3,)], type_info=Types.TUPLE([Types.LONG()])).map_batches(
        lambda b: pa.RecordBatch.from_pandas(b.to_pandas()[["f0"]] * 2, preserve_index=False),
        output_type=Types.TUPLE([Types.LONG()]))
    assert sorted(collect(doubled)) == [(2,), (4,), (6,)]
