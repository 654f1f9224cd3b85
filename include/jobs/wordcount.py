"""The seeds' SocketWindowWordCount, in Sluice's PyFlink-style API.

Lines from a socket (or, with --input, from a text file or a folder of them) are split
into words, counted per word in 5-second tumbling processing-time windows by 3 parallel
window subtasks, and printed.

    sluice plan include/jobs/wordcount.py -- --port 9999
"""
import argparse

from runtime.common import Row, Time, Types
from runtime.datastream import StreamExecutionEnvironment, TumblingProcessingTimeWindows
from runtime.datastream.connectors.delta import DeltaSink
from runtime.jobmaster import JobDeployment

# Its Airflow DAG ("wordcount"): manual runs, on the sample text (a folder: new files that
# land there are read by the next run, from the last checkpoint on), the counts printed and
# written exactly once to a Delta table next to the job's checkpoints.
DEPLOYMENT = JobDeployment(schedule=None, args=("--input", "include/data",
                                                "--output", "{warehouse}/wordcount-results"),
                           description="The seeds' windowed WordCount on the sample text")

WORD_COUNT = Types.ROW_NAMED(["word", "count"], [Types.STRING(), Types.LONG()])


def build(env: StreamExecutionEnvironment, input_path: str = None, host: str = "localhost",
          port: int = 9999, window_parallelism: int = 3, output: str = None):
    text = env.read_text_file(input_path) if input_path else env.socket_text_stream(host, port, "\n")
    counts = (
        text.flat_map(lambda line: line.split(), output_type=Types.STRING())
        .map(lambda word: Row(word=word, count=1), output_type=WORD_COUNT)
        .key_by("word")
        .window(TumblingProcessingTimeWindows.of(Time.seconds(5)))
        .sum("count")
        .set_parallelism(window_parallelism)
        .uid("word-counts")
    )
    counts.print()
    if output:
        counts.sink_to(DeltaSink.for_row_data(output)).uid("word-counts-sink")
    return counts


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--input", help="a text file or a folder of them, instead of the socket")
    parser.add_argument("--host", default="localhost")
    parser.add_argument("--port", type=int, default=9999)
    parser.add_argument("--window-parallelism", type=int, default=3)
    parser.add_argument("--output", help="also write the counts to this Delta table (exactly once)")
    args = parser.parse_args(argv)
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    env.enable_checkpointing(5000)      # and always at the end of a bounded input
    build(env, args.input, args.host, args.port, args.window_parallelism, args.output)
    env.execute("Socket Window WordCount")


if __name__ == "__main__":
    main()
