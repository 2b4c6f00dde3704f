"""Installed from a wheel, outside any checkout, the package works: the wheel is built, installed into a fresh virtual
environment, and runs a scripted evaluation of the demo domain and reads its packaged data from a folder elsewhere.

The fresh environment takes its dependencies (torch, transformers, ...) from this one through a `.pth` line, which adds
their folder to `sys.path` without running this environment's own `.pth` files (the editable install's finder among
them): the package itself can only come from the wheel, and the test checks that it does."""

import hashlib, json, os, shutil, subprocess, sys, sysconfig, zipfile
from pathlib import Path
import pytest
from thinkingbox_training.tasks import Task, ToolCallSpec, write_tasks

ROOT = Path(__file__).resolve().parents[1]
PACKAGED = ['prices.yaml', 'tasks', 'models/tiny-qwen3']  # what pyproject's package-data puts in the wheel


def run(*args, **kw) -> subprocess.CompletedProcess:
    p = subprocess.run([str(a) for a in args], capture_output=True, text=True, **kw)
    assert p.returncode == 0, f'{args}: exit {p.returncode}\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}'
    return p


def data_files(root: Path) -> dict:
    "Relative path -> sha256 of every file of the packaged data under `root`."
    out = {}
    for what in PACKAGED:
        for p in [root / what] if (root / what).is_file() else sorted((root / what).rglob('*')):
            if p.is_file():
                out[p.relative_to(root).as_posix()] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


@pytest.fixture(scope='module')
def installed(tmp_path_factory):
    "(the wheel, the fresh environment's bin folder, a work folder outside the checkout, an environment for it)."
    tmp = tmp_path_factory.mktemp('wheel')
    # the wheel is built from a copy: a build writes build/ and *.egg-info beside its sources, never in the checkout
    src = tmp / 'src'
    shutil.copytree(
        ROOT / 'thinkingbox_training',
        src / 'thinkingbox_training',
        ignore=shutil.ignore_patterns('__pycache__', '*.pyc'),
    )
    for f in ['pyproject.toml', 'README.md']:
        shutil.copy(ROOT / f, src / f)
    for what in PACKAGED:
        (src / 'data' / what).parent.mkdir(parents=True, exist_ok=True)
        (shutil.copy if (ROOT / 'data' / what).is_file() else shutil.copytree)(
            ROOT / 'data' / what, src / 'data' / what
        )
    run(sys.executable, '-m', 'pip', 'wheel', '-q', '--no-deps', '--no-build-isolation', '-w', tmp / 'dist', src)
    (wheel,) = (tmp / 'dist').glob('*.whl')
    venv = tmp / 'venv'
    run(sys.executable, '-m', 'venv', '--without-pip', venv)
    py = venv / 'bin' / 'python'
    run(sys.executable, '-m', 'pip', '--python', py, 'install', '-q', '--no-deps', wheel)
    site = Path(run(py, '-c', 'import sysconfig; print(sysconfig.get_paths()["purelib"])').stdout.strip())
    (site / '_deps_of_the_project_venv.pth').write_text(sysconfig.get_paths()['purelib'] + '\n')
    work = tmp / 'elsewhere'
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ('PYTHONPATH', 'PYTHONHOME', 'VIRTUAL_ENV')}
    return wheel, venv / 'bin', work, env


def test_the_wheel_holds_every_subpackage_and_the_packaged_data(installed):
    wheel = installed[0]
    names = zipfile.ZipFile(wheel).namelist()
    inits = (ROOT / 'thinkingbox_training').rglob('__init__.py')
    subpackages = sorted(p.parent.relative_to(ROOT).as_posix() for p in inits if '__pycache__' not in p.parts)
    missing = [d for d in subpackages if f'{d}/__init__.py' not in names]
    assert not missing, f"{missing}: add to pyproject's [tool.setuptools] packages"
    with zipfile.ZipFile(wheel) as z:
        inside = {
            n[len('thinkingbox_training/data/') :]: hashlib.sha256(z.read(n)).hexdigest()
            for n in names
            if n.startswith('thinkingbox_training/data/') and not n.endswith('/')
        }
    assert inside == data_files(ROOT / 'data') and 'models/tiny-qwen3/model.safetensors' in inside, sorted(inside)


def test_installed_from_the_wheel_it_reads_its_data_outside_a_checkout(installed):
    _, bin, work, env = installed
    code = """
import json, thinkingbox_training
from thinkingbox_training.cli import checkout_dir, data_path, project_dir
from thinkingbox_training.metrics import load_prices
from thinkingbox_training.tasks import load_tasks
try: project_dir(); refused = ''
except FileNotFoundError as e: refused = str(e)
print(json.dumps({'file': thinkingbox_training.__file__, 'checkout': checkout_dir(), 'prices': sorted(load_prices()),
                  'tasks': len(load_tasks(data_path('tasks', 'retail_bench.jsonl'))), 'refused': refused,
                  'model': str(data_path('models', 'tiny-qwen3'))}))"""
    got = json.loads(run(bin / 'python', '-c', code, cwd=work, env=env).stdout)
    venv = bin.parent.resolve()
    assert Path(got['file']).resolve().is_relative_to(venv), got  # the package is the wheel's, not the checkout's
    assert got['checkout'] is None and 'tiny-qwen3' in got['prices'] and got['tasks'] > 0, got
    assert Path(got['model']).is_relative_to(venv) and (Path(got['model']) / 'model.safetensors').is_file(), got
    assert 'holds no pyproject.toml' in got['refused'] and '`tbt data`' in got['refused'], got
    path = run(bin / 'tbt', 'data', 'tasks/retail_bench.jsonl', cwd=work, env=env).stdout.strip()
    assert Path(path).is_relative_to(venv) and Path(path).is_file(), path
    bad = subprocess.run([bin / 'tbt', 'data', 'runs/tiny-cpu'], cwd=work, env=env, capture_output=True, text=True)
    assert bad.returncode == 1 and 'tbt data: no runs/tiny-cpu in ' in bad.stderr, bad.stderr
    assert 'an installed wheel carries only prices.yaml, tasks, models/tiny-qwen3' in bad.stderr, bad.stderr


def test_installed_from_the_wheel_it_runs_a_scripted_evaluation_of_the_demo_domain(installed):
    _, bin, work, env = installed
    tasks = [
        Task(
            uid=f'demo/pay/{i}',
            domain='demo',
            family='pay',
            split='bench',
            query=f'Pay {a} cents from AC-1.',
            golden=[ToolCallSpec(name='pay', arguments={'account_id': 'AC-1', 'amount_cents': a})],
            reply='Paid.',
        )
        for i, a in enumerate([100, 250, 999])
    ]
    write_tasks(tasks, work / 'demo_bench.jsonl')
    p = run(
        bin / 'tbt',
        'evaluate',
        '--tasks',
        'demo_bench.jsonl',
        '--policy',
        'scripted',
        '--k',
        '2',
        '--out',
        'run',
        '--quiet',
        cwd=work,
        env=env,
    )
    assert p.stdout.startswith('run: executed 6 attempt(s) this run; 6 expected; 0 system error(s) left'), p.stdout
    recs = [json.loads(l) for l in (work / 'run' / 'attempts.jsonl').read_text().splitlines()]
    assert len(recs) == 6 and all(r['reward'] == 1 for r in recs), recs
    assert not (ROOT / 'run').exists() and (work / 'run' / 'attempts.sqlite').is_file()
    # its metrics, priced by the wheel's own price table (without it: '(no cost index: ...)' and no cost column)
    agg = run(bin / 'tbt', 'aggregate', 'run', '--json', cwd=work, env=env)
    assert 'no cost index' not in agg.stderr, agg.stderr
    rows = json.loads(agg.stdout)['rows']
    assert json.loads(agg.stdout)['summary']['pass@1'] == 1 and 'cost' in rows[0], rows
