"""Each word's total over every count the wordcount job has written, kept up to date: a job
scheduled on its input table (Airflow's data-aware scheduling).

Its DAG runs whenever a run of ``wordcount`` commits new rows to its Delta table. Each run reads
the table as Structured Streaming's ``availableNow`` trigger does: the first run the rows there
were when it started, every later run (restored from the last checkpoint) the rows the commits
since then added, up to the version that was the latest when it started. Per word a rolling sum
(keyed state, kept in the checkpoint from run to run) is upserted to a Delta table, one row per
word, exactly once: every row of the input is counted once, however many runs it takes.

    bin/dev sluice run include/jobs/wordcount_totals.py -- --input warehouse/wordcount-results \\
        --output warehouse/word-totals
"""
import argparse
import os

from runtime.common import Types, WatermarkStrategy
from runtime.datastream import StreamExecutionEnvironment
from runtime.datastream.connectors.delta import DeltaSink, DeltaSource
from runtime.jobmaster import JobDeployment

# Its Airflow DAG ("wordcount_totals"): on the Asset of the table its DeltaSource reads, the one
# the wordcount DAG writes (``--output`` of wordcount's deployment).
DEPLOYMENT = JobDeployment(schedule="on-inputs", args=("--input", "{warehouse}/wordcount-results",
                                                       "--output", "{warehouse}/word-totals"),
                           parallelism=2,
                           description="Each word's total over wordcount's results, on each new version of them")

WORD_COUNT = Types.ROW_NAMED(["word", "count"], [Types.STRING(), Types.LONG()])


def build(env: StreamExecutionEnvironment, input_table: str, output_table: str):
    counts = env.from_source(DeltaSource.for_bounded_row_data(input_table, columns=["word", "count"]),
                             WatermarkStrategy.no_watermarks(), "WordCount results",
                             type_info=WORD_COUNT).uid("wordcount-results")
    totals = counts.key_by("word").sum("count").uid("word-totals")
    totals.sink_to(DeltaSink.for_row_data(output_table).with_upsert_keys("word")).uid("word-totals-sink")
    return totals


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    warehouse = os.environ.get("SLUICE_WAREHOUSE", "warehouse")
    parser.add_argument("--input", default=os.path.join(warehouse, "wordcount-results"),
                        help="the Delta table of word counts (columns word, count) to total")
    parser.add_argument("--output", default=os.path.join(warehouse, "word-totals"),
                        help="the Delta table of totals, one row per word (upserted exactly once)")
    args = parser.parse_args(argv)
    env = StreamExecutionEnvironment.get_execution_environment()
    env.enable_checkpointing(60_000)        # and always at the end of the bounded input
    build(env, args.input, args.output)
    env.execute("WordCount Totals")


if __name__ == "__main__":
    main()
