"""bench/README.md keeps each benchmark's method and latest figures, and the docs' performance page
shows the same tables: it includes them from bench/README.md (pymdownx.snippets sections), so the
two cannot disagree."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH_README = ROOT / "bench" / "README.md"
PERFORMANCE = ROOT / "docs" / "performance.md"
SECTION = re.compile(r"<!-- --8<-- \[start:([a-z][-a-z0-9]*)\] -->\n(.*?)\n<!-- --8<-- \[end:\1\] -->", re.S)


def _sections() -> dict[str, str]:
    return dict(SECTION.findall(BENCH_README.read_text()))


def test_every_benchmark_script_has_its_section():
    text = BENCH_README.read_text()
    scripts = sorted(p.name for p in (ROOT / "bench").glob("*.py") if '__name__ == "__main__"' in p.read_text())
    assert scripts
    missing = [s for s in scripts if not re.search(rf"^## .*\(`{re.escape(s)}`\)$", text, re.M)]
    assert not missing, f"bench/README.md has no section for {missing}"


def test_each_latest_table_says_when_on_which_commit_and_how_to_run_it_again():
    sections = _sections()
    assert len(sections) >= 8
    for name, body in sections.items():
        assert re.search(r"^\|.*\|$", body, re.M), f"{name}: no table"
        assert re.search(r"\b20\d\d-\d\d-\d\d\b", body), f"{name}: no date"
        assert re.search(r"\b(code at|code after|recorded in)\s+[0-9a-f]{7,}\b", body), f"{name}: no commit"
        assert re.search(r"^Reproduce: `(PYTHONPATH=\S+ )?\.venv/bin/python bench/\w+\.py", body, re.M), \
            f"{name}: no command to reproduce"


def test_the_performance_page_includes_every_latest_table_and_only_those():
    included = re.findall(r'^--8<-- "bench/README\.md:([a-z][-a-z0-9]*)"$', PERFORMANCE.read_text(), re.M)
    assert sorted(included) == sorted(_sections()), "docs/performance.md and bench/README.md's sections differ"
    assert len(included) == len(set(included))


def test_history_stays_in_git():
    # The file had grown to 2,141 lines of session notes; a benchmark's section is its method and one table.
    lines = BENCH_README.read_text().count("\n")
    assert lines < 600, f"bench/README.md has {lines} lines: keep the latest figures, history goes to git"
