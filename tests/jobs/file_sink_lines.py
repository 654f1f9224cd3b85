"""A checkpointed job for the file sink's restart tests: the lines of text files, upper-cased,
into a row-format FileSink with small part files, a checkpoint every epoch.

    sluice run tests/jobs/file_sink_lines.py -- --input DIR --output DIR
"""
import argparse

from runtime.common import Configuration, Encoder, Types
from runtime.datastream import StreamExecutionEnvironment
from runtime.datastream.connectors import BucketAssigner, FileSink, OutputFileConfig, RollingPolicy

PART_SIZE = 100


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    args = parser.parse_args(argv)
    conf = Configuration()
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.get_checkpoint_config().set_checkpoint_interval_epochs(1)
    (env.read_text_file(args.input).map(str.upper, output_type=Types.STRING()).uid("upper").set_parallelism(2)
     .sink_to(FileSink.for_row_format(args.output, Encoder.simple_string_encoder())
              .with_output_file_config(OutputFileConfig.builder().with_part_suffix(".txt").build())
              .with_rolling_policy(RollingPolicy.default_rolling_policy(part_size=PART_SIZE))
              .with_bucket_assigner(BucketAssigner.base_path_bucket_assigner()).build())
     .uid("files").set_parallelism(2))
    env.execute("file sink lines")


if __name__ == "__main__":
    main()
