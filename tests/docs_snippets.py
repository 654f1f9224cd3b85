"""The documentation's runnable snippets: found in the pages, run, their output checked.

A snippet is runnable when the line before its fence is ``<!-- run -->``:

    <!-- run -->
    ```python
    print(1 + 1)
    ```

    ```text title="Output"
    2
    ```

The marker and the fence may be indented alike (inside a tab or an admonition). A fenced block
titled "Output" right after it (blank lines between allowed) is what the snippet
must print on stdout, compared line by line without trailing blanks. Each snippet runs on its own,
in a fresh namespace, in its own working folder and warehouse (so two snippets' jobs never share
checkpoints), but all of a run's snippets share one process: a Spark session starts once.

``python tests/docs_snippets.py PAGE.md...`` runs the pages' snippets and exits 1 naming each one
that failed or printed something else (tests/test_docs.py runs it).
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import re
import sys
import tempfile
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

MARK = "<!-- run -->"
FENCE = re.compile(r"^(\s*)(`{3,})\s*([\w+-]*)(.*)$")     # indented inside a tab or an admonition too


@dataclass(frozen=True)
class Snippet:
    page: str               # the page's path, as given
    index: int              # 0, 1, ... in the page's order of runnable snippets
    line: int               # the line of its fence (1-based)
    code: str
    output: Optional[str]   # what it must print, or None when the page shows nothing

    @property
    def id(self) -> str:
        return f"{self.page}#{self.index}"


def _block(lines: list[str], start: int) -> tuple[str, int]:
    """The fenced block opening at ``start``: (its text, without the fence's indentation; the line after it)."""
    indent, fence, _, _ = FENCE.match(lines[start]).groups()
    end = start + 1
    while end < len(lines) and lines[end].strip() != fence:
        end += 1
    if end == len(lines):
        raise ValueError(f"line {start + 1}: the fence {fence} is never closed")
    return "\n".join(line[len(indent):] for line in lines[start + 1:end]), end + 1


def find_snippets(page: Path, name: Optional[str] = None) -> list[Snippet]:
    """The runnable snippets of a Markdown page, in order."""
    name = name or str(page)
    lines = page.read_text(encoding="utf-8").splitlines()
    found: list[Snippet] = []
    i = 0
    while i < len(lines):
        if lines[i].strip() != MARK:
            i += 1
            continue
        start = i + 1
        opening = FENCE.match(lines[start]) if start < len(lines) else None
        if not opening or opening.group(3) != "python":
            raise ValueError(f"{name}:{i + 1}: {MARK} must be followed by a ```python block")
        code, after = _block(lines, start)
        output = None
        j = after
        while j < len(lines) and not lines[j].strip():
            j += 1
        if j < len(lines) and FENCE.match(lines[j]) and 'title="Output"' in lines[j]:
            output, after = _block(lines, j)
        found.append(Snippet(name, len(found), start + 1, code, output))
        i = after
    return found


def _lines(text: str) -> list[str]:
    out = [line.rstrip() for line in text.splitlines()]
    while out and not out[-1]:
        out.pop()
    return out


def mismatch(snippet: Snippet, stdout: str, error: Optional[str]) -> Optional[str]:
    """Why the snippet failed, or None when it ran and printed what its page shows."""
    where = f"{snippet.page}, snippet {snippet.index} (line {snippet.line})"
    if error:
        return f"{where} raised:\n{error}"
    if snippet.output is not None and _lines(stdout) != _lines(snippet.output):
        return (f"{where} printed something else than its Output block.\n--- the page shows:\n"
                f"{snippet.output}\n--- it printed:\n{stdout}")
    return None


def run_snippet(snippet: Snippet, folder: Path) -> tuple[str, Optional[str]]:
    """Runs the snippet in ``folder`` (its working folder and warehouse): (stdout, traceback or None)."""
    folder.mkdir(parents=True, exist_ok=True)
    os.environ["SLUICE_WAREHOUSE"] = str(folder / "warehouse")
    out = io.StringIO()
    here = os.getcwd()
    os.chdir(folder)
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(snippet.code, f"<{snippet.id}>", "exec"), {"__name__": "__main__"})
        return out.getvalue(), None
    except BaseException:  # a SystemExit too: the snippet failed, the others still run
        return out.getvalue(), traceback.format_exc()
    finally:
        os.chdir(here)


def run_pages(pages: list[Path], folder: Path) -> dict[str, dict]:
    """Every runnable snippet of the pages, run: {snippet id: {"stdout", "error", "failure"}}."""
    results = {}
    for page in pages:
        for snippet in find_snippets(page):
            stdout, error = run_snippet(snippet, folder / f"{page.stem}-{snippet.index}")
            results[snippet.id] = {"stdout": stdout, "error": error,
                                   "failure": mismatch(snippet, stdout, error)}
    return results


def main(argv: list[str]) -> int:
    out_file = None
    if argv[:1] == ["--json"]:
        out_file, argv = Path(argv[1]), argv[2:]
    with tempfile.TemporaryDirectory(prefix="sluice-docs-") as folder:
        results = run_pages([Path(p) for p in argv], Path(folder))
    if out_file:
        out_file.write_text(json.dumps(results))
    failures = [r["failure"] for r in results.values() if r["failure"]]
    for failure in failures:
        print(failure, file=sys.stderr)
    print(f"{len(results) - len(failures)} of {len(results)} snippets passed", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
