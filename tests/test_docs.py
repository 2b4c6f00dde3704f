"""The documentation site: three of its pages built with MkDocs (the `docs` extra, in a cached environment of its own),
showing the notebooks' committed outputs, the API and search, every internal link leading somewhere. `make docs`
builds them all."""

import contextlib, io, re, tomllib
from pathlib import Path
import pytest
from venvs import cached_venv
from thinkingbox_training.cli import main
from thinkingbox_training.docs import build_site, check_links

ROOT = Path(__file__).resolve().parents[1]
PAGES = ['index.md', '17_view.ipynb', 'api/view.md']  # the landing page, a method notebook, an API page


def docs_python() -> Path:
    "A Python with the `docs` extra of pyproject.toml, built once and cached."
    reqs = tomllib.loads((ROOT / 'pyproject.toml').read_text())['project']['optional-dependencies']['docs']
    return cached_venv('docs', reqs)


def build_pages(out: Path, pages: list = PAGES) -> Path:
    "The site of `pages`, built into OUT/site (also used by tests/test_browser.py)."
    with contextlib.redirect_stdout(io.StringIO()):
        return build_site(out, pages, python=str(docs_python()))


@pytest.fixture(scope='module')
def site(tmp_path_factory):
    return build_pages(tmp_path_factory.mktemp('docs'))


def test_pages_with_outputs_api_and_search(site):
    home = (site / 'index.html').read_text()
    text = re.sub(r'<[^>]+>', '', home)  # what the page says, without its markup (the code is highlighted)
    assert 'RL fine-tuning of tool-using LLM agents' in text and 'make docs' in text  # the README, its build command
    assert 'href="results/05_passk.html"' in home  # the README's link to a notebook, pointed at its page
    assert 'src="images/view.png"' in home and (site / 'images' / 'view.png').is_file()  # the README's image, copied
    view = (site / '17_view.html').read_text()
    assert 'retail/order_status_question/bench-1-0007 pass rate [1.0, 0.0] change 1.0' in view  # a kept output
    assert '#| export' not in view and (site / 'images' / 'view.png').is_file()
    api = (site / 'api' / 'view.html').read_text()
    assert all(f in api for f in ('state_diff', 'view_data', 'write_view'))
    index = (site / 'search' / 'search_index.js').read_text()  # the offline search index, inlined for file://
    assert 'DecompressionStream' in index and 'state_diff' in index


def test_links_checked(site):
    elsewhere = ['results/05_passk.html', 'results/07_coverage.html']  # the README's links this small site lacks
    assert check_links(site, elsewhere) == []
    (site / 'api' / 'view.html').write_text((site / 'api' / 'view.html').read_text() + '<a href="../gone.html">x</a>')
    assert check_links(site, elsewhere) == [('api/view.html', '../gone.html')]


def test_unknown_page_one_line(tmp_path):
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        rc = main(['docs', '--out', str(tmp_path / 'd'), '--pages', 'index.md,nope.ipynb'])
    assert rc == 1 and len(err.getvalue().strip().splitlines()) == 1 and 'no page nope.ipynb' in err.getvalue()
    assert not re.search('Traceback', err.getvalue())
