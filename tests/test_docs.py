"""The documentation site: it builds in strict mode, and every runnable snippet runs and prints
what its page shows (tests/docs_snippets.py)."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from docs_snippets import find_snippets

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
RUNNER = ROOT / "tests" / "docs_snippets.py"
PAGES = sorted(p.relative_to(ROOT).as_posix() for p in DOCS.rglob("*.md"))
SNIPPETS = [s for page in PAGES for s in find_snippets(ROOT / page, page)]
SNIPPETS_BY_ID = {s.id: s for s in SNIPPETS}


def _runner(pages, out: Path) -> subprocess.Popen:
    """tests/docs_snippets.py over ``pages`` (results as JSON into ``out``), with the project on sys.path."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    return subprocess.Popen([sys.executable, str(RUNNER), "--json", str(out), *pages], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.fixture(scope="module")
def snippet_run(tmp_path_factory):
    """Every page's runnable snippets, run in one process (one Spark session for them all), started
    before the site is built so that the two run at once."""
    out = tmp_path_factory.mktemp("snippets") / "results.json"
    proc = _runner(sorted({s.page for s in SNIPPETS}), out)
    yield proc, out
    if proc.poll() is None:
        proc.kill()
        proc.communicate()


def test_site_builds_in_strict_mode(tmp_path, snippet_run):
    """A broken link, a missing page or anchor, a docstring mkdocstrings cannot render: each fails."""
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"),
                           "-d", str(tmp_path / "site")], cwd=ROOT, capture_output=True, text=True,
                          env=dict(os.environ, NO_MKDOCS_2_WARNING="1"), timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    api = (tmp_path / "site" / "reference" / "streams" / "index.html").read_text()
    assert "key_by" in api and "execute_and_collect" in api  # the reference is rendered from the docstrings
    # A docstring's indented example is a code block, not a paragraph (docs/hooks/indented_examples.py)
    assert '<div class="highlight"><pre><span></span><code>ds.map(parse).name("Parse")' in api


@pytest.fixture(scope="module")
def snippet_results(snippet_run):
    proc, out = snippet_run
    stdout, stderr = proc.communicate(timeout=600)
    if not out.exists():
        pytest.fail(f"the snippet runner did not finish:\n{stdout}\n{stderr[-5000:]}")
    return json.loads(out.read_text())


@pytest.mark.parametrize("snippet", SNIPPETS, ids=[s.id.removeprefix("docs/") for s in SNIPPETS])
def test_snippet_runs_and_prints_its_output(snippet, snippet_results):
    result = snippet_results[snippet.id]
    assert result["failure"] is None, result["failure"]


def test_the_runner_fails_a_snippet_whose_output_differs(tmp_path):
    page = tmp_path / "page.md"
    page.write_text('# A page\n\n<!-- run -->\n```python\nprint("what it prints")\n```\n\n'
                    '```text title="Output"\nwhat the page says\n```\n\n'
                    '<!-- run -->\n```python\nprint("right")\n```\n\n```text title="Output"\nright\n```\n')
    proc = _runner([str(page)], tmp_path / "out.json")
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 1
    assert "snippet 0 (line 4) printed something else than its Output block" in stderr
    assert "--- it printed:\nwhat it prints" in stderr
    assert "1 of 2 snippets passed" in stderr
    results = json.loads((tmp_path / "out.json").read_text())
    assert results[f"{page}#1"]["failure"] is None


def test_a_marker_without_a_python_block_is_an_error(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("<!-- run -->\n```bash\nls\n```\n")
    with pytest.raises(ValueError, match="must be followed by a ```python block"):
        find_snippets(page)


def test_readme_is_a_front_page_whose_links_lead_into_the_docs():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 300, "README.md is the front page: move the detail into docs/"
    links = re.findall(r"\]\(((?:docs/)[^)#]+)(?:#[^)]*)?\)", readme)
    assert links and not [link for link in links if not (ROOT / link).exists()]


def test_readmes_first_job_is_the_one_the_docs_run():
    """The README's first job is not run by itself: it must stay the getting-started page's, which is."""
    readme_code = re.search(r"## A first job\n.*?```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)[1]
    assert readme_code.strip() == SNIPPETS_BY_ID["docs/getting-started.md#0"].code.strip()
