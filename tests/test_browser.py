"""A person's view, in a real browser: headless Chromium (Debian's `chromium` and `chromium-driver`, driven by selenium
from a cached environment of its own) opens the documentation site's landing page and a method notebook, and the
`tbt view` page of the largest committed pair of campaigns; it checks what is on screen and saves screenshots.
Without the browser the test skips, saying how to install it; under CI=true it fails instead."""

import json, os, shutil, subprocess
from pathlib import Path
import pytest
from venvs import cached_venv
from thinkingbox_training.campaigns import read_meta
from thinkingbox_training.view import write_view

ROOT = Path(__file__).resolve().parents[1]
PASSK = ROOT / 'data' / 'runs' / 'passk'
PAIR = [PASSK / 'plain-seed2' / 'bench-k20', PASSK / 'passk-seed2' / 'bench-k20']  # the largest committed exports
INSTALL = 'apt-get install -y chromium chromium-driver'

# Run by the environment's Python (selenium); prints what it saw as JSON. Nothing is downloaded: the browser and its
# driver are the system's, named by path (selenium's own manager never runs).
DRIVER = r"""
import json, sys, time
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

chromium, driver, site, view, shots = sys.argv[1:]
o = webdriver.ChromeOptions()
o.binary_location = chromium
o.set_capability('goog:loggingPrefs', {'browser': 'ALL'})
for a in ('--headless=new', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--window-size=1280,800'):
    o.add_argument(a)
d = webdriver.Chrome(service=Service(driver), options=o)
seen = {}
try:
    d.get('file://' + site + '/index.html')
    seen['home_title'] = d.title
    seen['home_text'] = d.find_element(By.TAG_NAME, 'article').text
    nav = d.find_elements(By.CSS_SELECTOR, 'nav a[href$=".html"]')
    seen['nav'] = [a.get_attribute('href').rsplit('/', 1)[-1] for a in nav]
    box = d.find_element(By.CSS_SELECTOR, 'input[data-md-component="search-query"]')
    box.click()
    box.send_keys('DecompressionStream')  # words of the view notebook, searched from the landing page
    WebDriverWait(d, 10).until(lambda d: d.find_elements(By.CSS_SELECTOR, '.md-search-result__item'))
    seen['search'] = [e.text.split('\n')[0] for e in d.find_elements(By.CSS_SELECTOR, '.md-search-result__item')]
    d.save_screenshot(shots + '/site-home.png')
    d.get('file://' + site + '/17_view.html')
    seen['site_errors'] = [e['message'] for e in d.get_log('browser') if e['level'] == 'SEVERE']
    seen['method_title'] = d.title
    seen['method_text'] = d.find_element(By.TAG_NAME, 'article').text
    seen['method_images'] = d.execute_script(
        'return [...document.querySelectorAll("article img")].filter(i => i.naturalWidth > 0).length')
    d.save_screenshot(shots + '/site-method.png')

    t = time.time()
    d.get('file://' + view)
    WebDriverWait(d, 30).until(lambda d: d.execute_script('return document.body.dataset.ready'))
    seen['open_s'] = time.time() - t
    visible = 'return [...document.querySelectorAll("#grid .row:not(.hide) .cell:not(.off)")].length'
    seen['cells'] = len(d.find_elements(By.CSS_SELECTOR, '#grid .cell[data-t]'))
    seen['shown_all'] = d.execute_script(visible)
    Select(d.find_element(By.ID, 'f-domain')).select_by_value('travel')
    seen['shown_travel'] = d.execute_script(visible)
    seen['rows_travel'] = d.execute_script(
        'return [...document.querySelectorAll("#grid .row[data-t]:not(.hide) .uid")].map(e => e.textContent)')
    Select(d.find_element(By.ID, 'f-domain')).select_by_value('')
    Select(d.find_element(By.ID, 'f-verdict')).select_by_value('fail')
    seen['shown_fail'] = d.execute_script(visible)
    seen['shown_fail_classes'] = d.execute_script(
        'return [...new Set([...document.querySelectorAll("#grid .row:not(.hide) .cell:not(.off)")]'
        '.map(c => c.className))]')
    seen['counter'] = d.find_element(By.ID, 'shown').text
    cell = d.find_element(By.CSS_SELECTOR, '#grid .row:not(.hide) .cell.v1:not(.off)')
    cell.click()
    WebDriverWait(d, 10).until(lambda d: d.find_element(By.ID, 'detail').get_attribute('data-open'))
    det = d.find_element(By.ID, 'detail')
    seen['opened'] = det.get_attribute('data-open')
    seen['detail_text'] = det.text
    seen['diff_rows'] = len(det.find_elements(By.CSS_SELECTOR, 'table.diff tr')) - 1
    seen['messages'] = len(det.find_elements(By.CSS_SELECTOR, '.msg'))
    d.save_screenshot(shots + '/view.png')
    seen['errors'] = [e['message'] for e in d.get_log('browser') if e['level'] == 'SEVERE']  # since the site's
finally:
    d.quit()
print(json.dumps(seen))
"""


def browser() -> tuple:
    "The system's Chromium and its driver; a skip saying how to install them (a failure under CI=true)."
    paths = [shutil.which(n) for n in ('chromium', 'chromedriver')]
    if None in paths:
        why = f'no headless browser (chromium, chromedriver): {INSTALL}'
        if os.environ.get('CI') == 'true':
            pytest.fail(why)
        pytest.skip(why)
    return paths


def test_site_and_view_in_a_browser(tmp_path):
    chromium, driver = browser()
    from test_docs import build_pages

    site = build_pages(tmp_path / 'docs')
    view = write_view(PAIR, tmp_path / 'view.html')
    assert view.stat().st_size <= 25e6, view.stat().st_size  # the largest committed pair stays a page to mail
    py = cached_venv('selenium', ['selenium>=4.20'])
    shots = tmp_path / 'screenshots'
    shots.mkdir()
    r = subprocess.run(
        [py, '-c', DRIVER, chromium, driver, str(site), str(view), str(shots)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    seen = json.loads(r.stdout.strip().splitlines()[-1])
    print(f'screenshots in {shots}; the view page drawn in {seen["open_s"]:.1f} s')

    # the site: the README as landing page, with search and the pages built; a method notebook with its outputs
    assert seen['home_title'] == 'thinkingbox_training' and 'make docs' in seen['home_text']
    assert {'17_view.html', 'view.html'} <= set(seen['nav']) and 'view' in seen['search']  # search works from disk
    assert not seen['site_errors']  # nothing failed to load: nothing is fetched from the web
    assert seen['method_title'].startswith('view') and 'change 1.0' in seen['method_text']  # a kept output shown
    assert seen['method_images'] >= 1  # the screenshot in the notebook, loaded from the site

    # the view: one cell an attempt; the domain filter hides the other domain's rows; failed attempts only; one opened
    metas = [read_meta(c) for c in PAIR]
    assert seen['cells'] == seen['shown_all'] == sum(len(m['tasks']) * m['k'] for m in metas)
    travel = sum(sum(u.startswith('travel/') for u in m['tasks']) * m['k'] for m in metas)
    assert seen['shown_travel'] == travel and all(u.startswith('travel/') for u in seen['rows_travel'])
    assert 0 < seen['shown_fail'] < seen['cells'] and seen['shown_fail_classes'] == ['cell v1']
    assert seen['counter'] == f'{seen["shown_fail"]} of {seen["cells"]} attempts shown'
    assert 'Database: final state against the expected state' in seen['detail_text'] and seen['diff_rows'] >= 1
    assert 'reward 0' in seen['detail_text'] and seen['messages'] >= 2 and not seen['errors']
    assert all((shots / f).stat().st_size > 10_000 for f in ('site-home.png', 'site-method.png', 'view.png'))
