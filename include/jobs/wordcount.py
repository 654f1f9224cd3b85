"""The seeds' SocketWindowWordCount, in Sluice's PyFlink-style API.

Lines from a socket (or, with --input, from a text file or a folder of them) are read and
split into words by one subtask, counted per word in 5-second tumbling processing-time windows
by as many window subtasks as the run's parallelism (Flink's -p; the seeds' job had 3, the DAG's
default), and printed.

    sluice plan include/jobs/wordcount.py -p 3 -- --port 9999
"""
import argparse

from runtime.common import Row, Time, Types
from runtime.datastream import StreamExecutionEnvironment, TumblingProcessingTimeWindows
from runtime.datastream.connectors.delta import DeltaSink
from runtime.jobmaster import JobDeployment

# Its Airflow DAG ("wordcount"): manual runs, on the sample text (a folder: new files that
# land there are read by the next run, from the last checkpoint on), the counts printed and
# written exactly once to a Delta table next to the job's checkpoints.
# The trigger form's parallelism (default 3) is the window's: a rescale changes it.
DEPLOYMENT = JobDeployment(schedule=None, args=("--input", "include/data",
                                                "--output", "{warehouse}/wordcount-results"),
                           parallelism=3, description="The seeds' windowed WordCount on the sample text")

WORD_COUNT = Types.ROW_NAMED(["word", "count"], [Types.STRING(), Types.LONG()])


def build(env: StreamExecutionEnvironment, input_path: str = None, host: str = "localhost",
          port: int = 9999, window_parallelism: int = None, output: str = None):
    """The seeds' pipeline: one reader (as the seeds' env.set_parallelism(1)), the windows at
    ``window_parallelism`` (None: the run's default parallelism), printed by one subtask."""
    text = (env.read_text_file(input_path).set_parallelism(1) if input_path
            else env.socket_text_stream(host, port, "\n"))
    windows = (
        text.flat_map(lambda line: line.split(), output_type=Types.STRING()).set_parallelism(1)
        .map(lambda word: Row(word=word, count=1), output_type=WORD_COUNT).set_parallelism(1)
        .key_by("word")
        .window(TumblingProcessingTimeWindows.of(Time.seconds(5)))
        .sum("count")
    )
    counts = (windows.set_parallelism(window_parallelism) if window_parallelism else windows).uid("word-counts")
    counts.print().set_parallelism(1)
    if output:
        counts.sink_to(DeltaSink.for_row_data(output)).uid("word-counts-sink")
    return counts


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--input", help="a text file or a folder of them, instead of the socket")
    parser.add_argument("--host", default="localhost")
    parser.add_argument("--port", type=int, default=9999)
    parser.add_argument("--window-parallelism", type=int,
                        help="the windows' parallelism (default: the run's, sluice run -p)")
    parser.add_argument("--output", help="also write the counts to this Delta table (exactly once)")
    args = parser.parse_args(argv)
    env = StreamExecutionEnvironment.get_execution_environment()
    env.enable_checkpointing(5000)      # and always at the end of a bounded input
    build(env, args.input, args.host, args.port, args.window_parallelism, args.output)
    env.execute("Socket Window WordCount")


if __name__ == "__main__":
    main()
