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
"""
from __future__ import annotations

import argparse
import glob
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
    "connectors/kafka_avro_format.py": "needs a Kafka broker",
    "connectors/kafka_bytearray_format.py": "needs a Kafka broker",
    "connectors/kafka_csv_format.py": "needs a Kafka broker",
    "connectors/kafka_json_format.py": "needs a Kafka broker",
    "connectors/kafka_row_field_extractor_example.py": "needs a Kafka broker",
    "connectors/pulsar.py": "needs a Pulsar cluster",
    # Not an external system, but nothing to compare: a random, endless source.
    "asyncio/remote_model_inference.py": "an endless random source (Table API datagen) and async I/O; "
                                         "neither the Table API nor async I/O is in Sluice",
    "streaming_word_count.py": "an endless random source (Table API datagen); the Table API is not in Sluice",
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
    for name in names:
        if name in NEEDS_EXTERNAL:
            skipped.append((name, NEEDS_EXTERNAL[name]))
            continue
        if args.only and name not in args.only:
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

    print("\n| example | output | ran unchanged | output equal to PyFlink's | notes |")
    print("| --- | --- | --- | --- | --- |")
    for name, variant, ran, equal, _, _, detail in rows:
        print(f"| `{name}` | {'print()' if variant == 'print' else 'FileSink (--output)'} | "
              f"{'yes' if ran else '**no**'} | {'-' if equal is None else 'yes' if equal else '**no**'} | "
              f"{detail.replace('|', '/')} |")
    for name, reason in skipped:
        print(f"| `{name}` | | not run | | {reason} |")
    ran = sum(1 for r in rows if r[2])
    same = sum(1 for r in rows if r[3])
    print(f"\n{ran} of {len(rows)} runs ran unchanged on Sluice, {same} with PyFlink's output; "
          f"{len(skipped)} examples not run.")
    if args.keep:
        print(f"scratch folder: {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
