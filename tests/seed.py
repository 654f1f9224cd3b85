"""The seed WordCount job and the names Flink gives its operators, shared by the tests."""
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORDCOUNT = os.path.join(ROOT, "include", "jobs", "wordcount.py")
WINDOW = ("Window(TumblingProcessingTimeWindows(5000), ProcessingTimeTrigger, SumAggregator, "
          "PassThroughWindowFunction)")
# The seeds run the windows at 3 (Flink's -p 3): the job takes its parallelism from the run.
SEED_PARALLELISM = 3
