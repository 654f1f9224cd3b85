"""Conformance: the DataStream examples shipped in the apache-flink 2.3.0 wheel, run unchanged
but for their imports on PyFlink and on Sluice, their outputs compared (issue 18).

    .venv/bin/python bench/pyflink_examples.py [--pyflink-venv DIR] [--only NAME ...] [--timeout S]

The examples are read from the installed wheel at run time (``pyflink/examples/datastream/**.py``;
nothing of them is kept in this repository). Each runs in its own process:

  pyflink  the example as shipped, with PyFlink's interpreter (its venv, made on first use;
           PyFlink needs Java 11 or 17 on PATH)
  sluice   the example with only its imports rewritten (``pyflink.`` -> ``runtime.``), with this
           project's interpreter, a warehouse of its own and local Spark

An example that takes ``--output`` runs twice per engine: printing (no arguments) and writing
files with its FileSink (``--output DIR``). Per run the script says whether Sluice ran it
unchanged (exit 0) and whether its output equals PyFlink's: printed lines under the same subtask
prefix (``2> ``), each subtask's lines in order (the interleaving of subtasks is free); finished
files compared by their lines (part names hold random ids) and their bucket folders. Examples
that need an external system are listed with the reason and not run. It ends with a Markdown table for the README.

The Kafka examples (``connectors/kafka_*.py``) hard-code a broker on localhost:9092 and topics
made beforehand: the script starts include/kafka_broker.py's broker on 9092 (the port must be
free), makes the topics each example names, runs each example on Sluice only (as shipped, each
one's ``add_jars`` names a placeholder Kafka connector jar, so PyFlink cannot run them) with
SLUICE_MAX_EPOCHS=2 (their reading jobs are unbounded: two epochs read everything written
before), and checks what each wrote to Kafka (read back by a read_committed consumer) and what
it printed against what the example's program makes, in Flink's formats.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

from pyflink_env import PYFLINK_VENV, ensure_pyflink_venv

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
SLUICE_PYTHON = os.path.join(REPO, ".venv", "bin", "python")

# Examples not run, by path under pyflink/examples/datastream, and why.
NEEDS_EXTERNAL = {
    "connectors/elasticsearch.py": "needs an Elasticsearch cluster",
    "connectors/pulsar.py": "needs a Pulsar cluster",
    # Not an external system, but nothing to compare: a random, endless source.
    "asyncio/remote_model_inference.py": "an endless random source (Table API datagen) and async I/O; "
                                         "neither the Table API nor async I/O is in Sluice",
    "streaming_word_count.py": "an endless random source (Table API datagen); the Table API is not in Sluice",
}

# The Kafka examples: the topics each assumes made (name -> partitions, as its comments say) and
# what its program writes (topic -> (key, value) records, any order: two subtasks write them) and
# prints (lines without the subtask prefix, any order). The values are the example's rows in
# Flink's formats (JSON, CSV, Avro binary; tests/test_row_formats.py holds them to Flink's bytes).
KAFKA_PORT = 9092
SUBTASK_PRINT = r"^\d+> "        # print()'s lines, the subtask prefix stripped
_ROWS = [(1, "hi"), (2, "hello"), (3, "hi"), (4, "hello"), (5, "hi"), (6, "hello"), (6, "hello")]
_PRINTED_ROWS = [f"+I[{i},{s}]" for i, s in _ROWS]
_COUNTRIES = [json.dumps({"id": 1, "country": "USA"}), json.dumps({"id": 2, "country": "Canada"}),
              json.dumps({"id": 3, "country": "Germany"})]
_EVENTS = [("user-001", {"type": "purchase", "item": "laptop", "price": 999.99}),
           ("user-002", {"type": "view", "item": "phone", "timestamp": "2024-01-07T10:30:00"}),
           ("user-001", {"type": "add_to_cart", "item": "mouse", "quantity": 2}),
           ("user-003", {"type": "purchase", "item": "keyboard", "price": 79.99})]


def _avro(i, s):
    """Avro binary of TestRecord {id: int, name: string}: zig-zag varints, length-prefixed UTF-8."""
    def varint(n):
        n = (n << 1) ^ (n >> 63)
        out = b""
        while n > 0x7F:
            out += bytes([(n & 0x7F) | 0x80])
            n >>= 7
        return out + bytes([n])
    return varint(i) + varint(len(s.encode())) + s.encode()


KAFKA_EXAMPLES = {
    "connectors/kafka_json_format.py": {
        "topics": {"test_json_topic": 1},
        "written": {"test_json_topic": [(None, json.dumps({"f0": i, "f1": s}, separators=(",", ":")).encode())
                                        for i, s in _ROWS]},
        "printed": _PRINTED_ROWS, "select": SUBTASK_PRINT},
    "connectors/kafka_csv_format.py": {
        "topics": {"test_csv_topic": 1},
        "written": {"test_csv_topic": [(None, f"{i},{s}\n".encode()) for i, s in _ROWS]},
        "printed": _PRINTED_ROWS, "select": SUBTASK_PRINT},
    "connectors/kafka_avro_format.py": {
        "topics": {"test_avro_topic": 1},
        "written": {"test_avro_topic": [(None, _avro(i, s)) for i, s in _ROWS]},
        "printed": _PRINTED_ROWS, "select": SUBTASK_PRINT},
    "connectors/kafka_bytearray_format.py": {
        "topics": {"test_bytearray_topic": 1},
        "written": {"test_bytearray_topic": [(None, c.encode()) for c in _COUNTRIES]},
        "printed": _COUNTRIES, "select": SUBTASK_PRINT},
    "connectors/kafka_row_field_extractor_example.py": {
        "topics": {"row-extractor-example": 3},
        "written": {"row-extractor-example": [(u.encode(), json.dumps(e).encode()) for u, e in _EVENTS]},
        # printed by its map function, in a Python worker (stderr on Sluice's executors)
        "printed": [f"Sending: User={u}, Event={e}" for u, e in _EVENTS], "select": r"^Sending: "},
}

IMPORT = re.compile(r"^(\s*(?:from|import)\s+)pyflink(?=[.\s]|$)", re.MULTILINE)
SUBTASK = re.compile(r"^\d+> ")
# The engines' own log lines, on stdout when an example logs there at INFO
# (``logging.basicConfig(stream=sys.stdout, level=logging.INFO)``): not the job's output.
ENGINE_LOG = re.compile("|".join([
    # PyFlink: Apache Beam's Python SDK as it loads
    r"^Using Any for unsupported type", r"^No module named google\.cloud\.", r"^PYFLINK_CYTHON_ENABLED",
    # Sluice: Spark's JVM lines (logger runtime.spark), the epochs' progress (runtime), py4j
    r"^WARNING: Using incubator modules", r"^Using Spark's default log4j profile", r"^Setting default log level",
    r"^To adjust logging level use", r"^\d\d/\d\d/\d\d \d\d:\d\d:\d\d (WARN|INFO|ERROR) ",
    r"^\[.*\] epoch \d+: \d+ records in", r"^Closing down clientserver connection"]))


def rewrite_imports(source: str) -> str:
    """The one change a port makes: ``pyflink`` -> ``runtime`` in import statements."""
    return IMPORT.sub(r"\1runtime", source)


def run(cmd, cwd, env, timeout):
    """(exit code or "timeout", stdout, stderr, seconds)."""
    started = time.time()
    try:
        r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
                           start_new_session=True)
        return r.returncode, r.stdout, r.stderr, time.time() - started
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        return "timeout", out, "", time.time() - started


def printed(stdout: str) -> dict:
    """The printed lines without the engines' log lines, per subtask prefix ("" for none), each
    subtask's in the order it printed them: the order across subtasks is free, within one not."""
    by_subtask: dict = {}
    for line in stdout.splitlines():
        if line.strip() and not ENGINE_LOG.match(line):
            prefix = SUBTASK.match(line)
            by_subtask.setdefault(prefix.group(0) if prefix else "", []).append(SUBTASK.sub("", line))
    return by_subtask


def finished_files(folder: str) -> dict:
    """bucket folder -> sorted lines of its finished parts (hidden in-progress files left out)."""
    out: dict = {}
    for root, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in files:
            if not name.startswith("."):
                with open(os.path.join(root, name), errors="replace") as f:
                    out.setdefault(os.path.relpath(root, folder), []).extend(f.read().splitlines())
    return {bucket: sorted(lines) for bucket, lines in out.items()}


def compare_printed(flink: str, sluice: str) -> tuple[bool, str]:
    """Equal when each subtask printed the same lines in the same order under the same prefix."""
    expected, got = printed(flink), printed(sluice)
    n = sum(map(len, expected.values()))
    if expected == got:
        return True, f"{n} lines equal" + (f", from {len(expected)} subtasks" if len(expected) > 1 else "")
    flat = lambda by_subtask: sorted(line for lines in by_subtask.values() for line in lines)  # noqa: E731
    if flat(expected) == flat(got):
        if sorted(map(sorted, expected.values())) == sorted(map(sorted, got.values())):
            return False, f"the same {n} lines per subtask, under other subtask prefixes or in another order"
        return False, f"the same {n} lines from other subtasks ({sorted(expected)} against {sorted(got)})"
    missing = [x for x in flat(expected) if x not in flat(got)][:3]
    extra = [x for x in flat(got) if x not in flat(expected)][:3]
    return False, (f"PyFlink {n} lines, Sluice {sum(map(len, got.values()))}; only PyFlink: {missing}; "
                   f"only Sluice: {extra}")


def compare_files(flink_dir: str, sluice_dir: str) -> tuple[bool, str]:
    expected, got = finished_files(flink_dir), finished_files(sluice_dir)
    n = sum(len(v) for v in expected.values())
    if expected == got:
        return True, f"{n} lines in {len(expected)} bucket(s) equal"
    return False, (f"PyFlink {n} lines in buckets {sorted(expected)}, Sluice "
                   f"{sum(len(v) for v in got.values())} in {sorted(got)}")


def check_kafka_example(spec: dict, bootstrap: str, stdout: str, stderr: str) -> tuple[bool, str]:
    """What a Kafka example wrote (read_committed) and printed, against what its program makes."""
    from kafka import read_committed
    problems, counts = [], []
    for topic, expected in spec["written"].items():
        got = sorted((k, v) for _, k, v in read_committed(bootstrap, topic))
        counts.append(f"{len(got)} records in {topic}")
        if got != sorted(expected, key=lambda kv: (kv[0] or b"", kv[1])):
            problems.append(f"{topic}: expected {sorted(expected, key=lambda kv: (kv[0] or b'', kv[1]))[:3]}..., "
                            f"got {got[:3]}... ({len(got)} records)")
    select = re.compile(spec["select"])
    lines = [line for line in (stdout + "\n" + stderr).splitlines() if select.match(line)]
    printed = sorted(SUBTASK.sub("", line) for line in lines)
    counts.append(f"{len(printed)} lines printed")
    if printed != sorted(spec["printed"]):
        problems.append(f"printed {printed[:3]}... ({len(printed)} lines), expected {sorted(spec['printed'])[:3]}...")
    return not problems, "; ".join(problems) if problems else ", ".join(counts) + ", as its program makes them"


def run_kafka_examples(folder: str, names: list, work: str, args) -> list:
    """Each Kafka example on Sluice against a broker on localhost:9092; its rows for the table."""
    from kafka import create_topics, start_broker
    try:
        broker = start_broker(os.path.join(work, "kafka"), port=KAFKA_PORT)
    except Exception as e:      # noqa: BLE001 - reported in the table
        why = f"no broker on localhost:{KAFKA_PORT} ({type(e).__name__}: {str(e)[:200]}); is the port taken?"
        return [(name, "kafka", False, None, None, 0.0, why) for name in names]
    rows = []
    try:
        for name in names:
            spec = KAFKA_EXAMPLES[name]
            for topic, partitions in spec["topics"].items():
                create_topics(broker.bootstrap, [topic], partitions)
            with open(os.path.join(folder, name)) as f:
                ported = os.path.join(work, "ported", name[:-3].replace("/", "-") + ".py")
                os.makedirs(os.path.dirname(ported), exist_ok=True)
                with open(ported, "w") as out:
                    out.write(rewrite_imports(f.read()))
            cwd = os.path.join(work, "sluice", name[:-3].replace("/", "-"))
            os.makedirs(cwd)
            env = dict(os.environ, SLUICE_WAREHOUSE=os.path.join(cwd, "warehouse"), SLUICE_MAX_EPOCHS="2",
                       PYTHONPATH=args.sluice_root)
            print(f"== {name} (Kafka) on sluice", flush=True)
            rc, out, err, seconds = run([SLUICE_PYTHON, ported], cwd, env, args.timeout)
            if rc != 0:
                last = [line for line in err.strip().splitlines() if line.strip()]
                equal, detail = None, f"Sluice failed ({rc}): {' / '.join(last[-2:])[-400:]}"
            else:
                equal, detail = check_kafka_example(spec, broker.bootstrap, out, err)
            rows.append((name, "kafka", rc == 0, equal, None, seconds, detail))
            print(f"   ran unchanged: {'yes' if rc == 0 else 'no'}; output as the program makes it: "
                  f"{'-' if equal is None else 'yes' if equal else 'no'}; {detail} (Sluice {seconds:.0f} s)", flush=True)
    finally:
        broker.stop()
    return rows


def examples_folder(pyflink_python: str) -> str:
    r = subprocess.run([pyflink_python, "-c", "import os, pyflink; print(os.path.dirname(pyflink.__file__))"],
                       capture_output=True, text=True, check=True)
    return os.path.join(r.stdout.strip(), "examples", "datastream")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pyflink-venv", default=PYFLINK_VENV, help="PyFlink's virtual environment (made if missing)")
    parser.add_argument("--only", nargs="*", help="example paths (as listed) to run, the others skipped")
    parser.add_argument("--timeout", type=float, default=300, help="seconds per run")
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder")
    parser.add_argument("--sluice-root", default=REPO,
                        help="the Sluice source tree to run (a snapshot, e.g. `git archive HEAD`); this checkout by default")
    args = parser.parse_args(argv)

    work = tempfile.mkdtemp(prefix="sluice-pyflink-examples-")
    python, why = ensure_pyflink_venv(os.path.join(work, "pyflink-venv.log"), args.pyflink_venv)
    if python is None:
        print(f"PyFlink is not available: {why}")
        return 2
    folder = examples_folder(python)
    names = sorted(os.path.relpath(p, folder) for p in glob.glob(os.path.join(folder, "**", "*.py"), recursive=True)
                   if os.path.basename(p) != "__init__.py")
    rows, skipped = [], []
    kafka_names = [n for n in names if n in KAFKA_EXAMPLES and (not args.only or n in args.only)]
    for name in names:
        if name in NEEDS_EXTERNAL:
            skipped.append((name, NEEDS_EXTERNAL[name]))
            continue
        if name in KAFKA_EXAMPLES or (args.only and name not in args.only):
            continue
        with open(os.path.join(folder, name)) as f:
            source = f.read()
        slug = name[:-3].replace("/", "-")
        ported = os.path.join(work, "ported", slug + ".py")
        os.makedirs(os.path.dirname(ported), exist_ok=True)
        with open(ported, "w") as f:
            f.write(rewrite_imports(source))
        for variant in (["print", "files"] if "'--output'" in source else ["print"]):
            runs = {}
            for engine, cmd_python, script in (("pyflink", python, os.path.join(folder, name)),
                                               ("sluice", SLUICE_PYTHON, ported)):
                cwd = os.path.join(work, engine, slug, variant)
                os.makedirs(cwd)
                extra = ["--output", os.path.join(cwd, "out")] if variant == "files" else []
                env = dict(os.environ, SLUICE_WAREHOUSE=os.path.join(cwd, "warehouse"))
                if engine == "sluice":
                    env["PYTHONPATH"] = args.sluice_root
                else:       # PyFlink starts its Python workers with the `python` on PATH
                    env.pop("PYTHONPATH", None)
                    env["PATH"] = os.path.dirname(cmd_python) + os.pathsep + env.get("PATH", "")
                print(f"== {name} ({variant}) on {engine}", flush=True)
                runs[engine] = (cwd, *run([cmd_python, script, *extra], cwd, env, args.timeout))
            (f_dir, f_rc, f_out, f_err, f_s), (s_dir, s_rc, s_out, s_err, s_s) = runs["pyflink"], runs["sluice"]
            if f_rc != 0:
                equal, detail = None, f"PyFlink failed ({f_rc}): {f_err.strip()[-300:]}"
            elif s_rc != 0:
                last = [line for line in s_err.strip().splitlines() if line.strip()]
                equal, detail = None, f"Sluice failed ({s_rc}): {' / '.join(last[-2:])[-400:]}"
            elif variant == "files":
                equal, detail = compare_files(os.path.join(f_dir, "out"), os.path.join(s_dir, "out"))
                if equal:
                    same_stdout, _ = compare_printed(f_out, s_out)
                    if not same_stdout:
                        equal, detail = False, detail + "; stdout differs"
            else:
                equal, detail = compare_printed(f_out, s_out)
            rows.append((name, variant, s_rc == 0, equal, f_s, s_s, detail))
            print(f"   ran unchanged: {'yes' if s_rc == 0 else 'no'}; equal output: "
                  f"{'-' if equal is None else 'yes' if equal else 'no'}; {detail} "
                  f"(PyFlink {f_s:.0f} s, Sluice {s_s:.0f} s)", flush=True)

    if kafka_names:
        rows.extend(run_kafka_examples(folder, kafka_names, work, args))

    print("\n| example | output | ran unchanged | output equal to PyFlink's | notes |")
    print("| --- | --- | --- | --- | --- |")
    variants = {"print": "print()", "files": "FileSink (--output)",
                "kafka": "Kafka topic + print(), against its program (PyFlink not run: placeholder jar)"}
    for name, variant, ran, equal, _, _, detail in rows:
        print(f"| `{name}` | {variants[variant]} | "
              f"{'yes' if ran else '**no**'} | {'-' if equal is None else 'yes' if equal else '**no**'} | "
              f"{detail.replace('|', '/')} |")
    for name, reason in skipped:
        print(f"| `{name}` | | not run | | {reason} |")
    ran = sum(1 for r in rows if r[2])
    same = sum(1 for r in rows if r[3] and r[1] != "kafka")
    kafka_same = sum(1 for r in rows if r[3] and r[1] == "kafka")
    print(f"\n{ran} of {len(rows)} runs ran unchanged on Sluice, {same} with PyFlink's output, {kafka_same} Kafka "
          f"examples with what their program makes; {len(skipped)} examples not run.")
    if args.keep:
        print(f"scratch folder: {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
