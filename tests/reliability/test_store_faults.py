"""A campaign store is only ever appended to: a directory that lost its store, a read-only store and a full disk are
each refused (or stopped) with one line that says what to do, and nothing already recorded is lost or written over.
The read-only mount and the full disk are real where `unshare` gives this process a mount namespace (a read-only
bind mount, a tiny tmpfs: the slow suite); patched in-process everywhere."""

import json, os, shutil, sqlite3, subprocess, sys
from pathlib import Path
import pytest
from thinkingbox_training import campaigns
from thinkingbox_training.campaigns import AttemptStore, aggregate, evaluate
from thinkingbox_training.tasks import Task, ToolCallSpec, write_tasks

ROOT = Path(__file__).resolve().parents[2]
CLI = 'import sys; from thinkingbox_training.cli import main; sys.exit(main())'
N = 40


def demo_tasks(n=N):
    return [
        Task(
            uid=f'demo/pay/{i:03d}',
            domain='demo',
            family='pay',
            split='bench',
            query=f'Pay {i + 1} cents.',
            golden=[ToolCallSpec(name='pay', arguments={'account_id': 'AC-1', 'amount_cents': i + 1})],
            reply='Paid.',
        )
        for i in range(n)
    ]


@pytest.fixture(scope='module')
def task_file(tmp_path_factory):
    p = tmp_path_factory.mktemp('tasks') / 'demo.jsonl'
    write_tasks(demo_tasks(), p)
    return p


def ev(task_file, out, **kw):
    return evaluate(tasks=str(task_file), policy='scripted:flaw=0.3', k=2, out=str(out), quiet=True, **kw)


@pytest.fixture(scope='module')
def finished(task_file, tmp_path_factory):
    out = tmp_path_factory.mktemp('fin') / 'c'
    assert ev(task_file, out) == 0
    return out


def files(d):
    "The campaign's files (SQLite's WAL index aside, which any reader may touch)."
    return {
        p.name: p.read_bytes()
        for p in Path(d).iterdir()
        if p.is_file() and p.name not in ('campaign.lock', 'attempts.sqlite-shm')
    }


def rewards(out):
    return sorted((r['task_uid'], r['repetition'], r['reward']) for r in campaigns.campaign_records(out))


def one_line(err, *words):
    lines = [line for line in err.strip().splitlines() if line.strip()]
    assert len(lines) == 1 and 'Traceback' not in err, err
    for w in words:
        assert w in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize('cut', [False, True])
def test_a_directory_that_lost_its_store_is_refused_never_rerun(cut, finished, task_file, tmp_path, capsys):
    out = tmp_path / 'c'  # the same campaign (a directory's name is its campaign's)
    out.mkdir()
    for f in ('campaign.json', 'attempts.jsonl'):
        shutil.copy(finished / f, out / f)
    if cut:  # the copy's last line half cut
        b = (out / 'attempts.jsonl').read_bytes()
        (out / 'attempts.jsonl').write_bytes(b[: len(b) - 300])
    before = files(out)
    assert ev(task_file, out) == 2
    one_line(capsys.readouterr().err, 'but not attempts.sqlite', 'it was left as it is', 'Put attempts.sqlite')
    assert files(out) == before and not (out / 'attempts.sqlite').exists()
    rc = aggregate(str(out), json=True)
    got = capsys.readouterr()
    if cut:
        assert rc == 1 and one_line(got.err, 'attempts.jsonl:80', 'cut or damaged')
    else:
        assert rc == 0 and json.loads(got.out)['summary']
    assert files(out) == before


@pytest.mark.parametrize('lines', [80, 50])
def test_the_store_is_rebuilt_from_its_export_when_asked_and_only_what_it_lacks_runs(
    lines, finished, task_file, tmp_path, capsys
):
    out = tmp_path / 'c'
    out.mkdir()
    shutil.copy(finished / 'campaign.json', out / 'campaign.json')
    kept = (finished / 'attempts.jsonl').read_text().splitlines(keepends=True)[:lines]
    (out / 'attempts.jsonl').write_text(''.join(kept))
    assert ev(task_file, out, rebuild_store=True) == 0
    err = capsys.readouterr()
    assert f'rebuilt attempts.sqlite from attempts.jsonl: {lines} clean attempt(s)' in err.err
    assert f'executed {80 - lines} attempt(s) this run' in err.out
    assert rewards(out) == rewards(finished)
    assert set((out / 'attempts.jsonl').read_text().splitlines(keepends=True)) >= set(kept)  # appended to, not lost


def test_a_cut_export_is_not_rebuilt_from(finished, task_file, tmp_path, capsys):
    out = tmp_path / 'c'
    out.mkdir()
    shutil.copy(finished / 'campaign.json', out / 'campaign.json')
    b = (finished / 'attempts.jsonl').read_bytes()
    (out / 'attempts.jsonl').write_bytes(b[: len(b) - 300])
    before = files(out)
    assert ev(task_file, out, rebuild_store=True) == 2
    msg = one_line(capsys.readouterr().err, 'attempts.jsonl:80', 'but not attempts.sqlite')
    assert '--rebuild-store' not in msg and files(out) == before and not (out / 'attempts.sqlite').exists()


def test_the_projects_own_exports_are_regenerated_when_it_says_so(tmp_path, capsys):
    "The pipeline and the study regenerate the exports they commit (no store is committed): every attempt again."

    def run(out, **kw):
        return campaigns.run_campaign(out, demo_tasks(10), 'scripted:flaw=0.3', 2, name='c', progress=False, **kw)

    run(tmp_path / 'a')
    out = tmp_path / 'b'
    out.mkdir()
    for f in ('campaign.json', 'attempts.jsonl'):
        shutil.copy(tmp_path / 'a' / f, out / f)
    assert run(out, lost_store='regenerate')['executed'] == 20 and rewards(out) == rewards(tmp_path / 'a')
    assert 'every attempt runs again' in capsys.readouterr().err


def test_a_full_disk_stops_the_run_in_one_line_and_the_rerun_completes_it(
    finished, task_file, tmp_path, monkeypatch, capsys
):
    out, put, n = tmp_path / 'c', AttemptStore.put, [0]

    def fills_up(self, rec, inv):
        n[0] += 1
        if n[0] > 25:
            raise sqlite3.OperationalError('database or disk is full')
        return put(self, rec, inv)

    def no_space(store, name, path):
        raise OSError(28, 'No space left on device', str(path))

    monkeypatch.setattr(AttemptStore, 'put', fills_up)
    monkeypatch.setattr(campaigns, 'export_jsonl', no_space)  # the export after the run: no space either
    assert ev(task_file, out) == 2
    one_line(
        capsys.readouterr().err,
        'no space left on the disk',
        'the attempts stored so far are kept',
        'run the same command again',
    )
    assert len(AttemptStore(out / 'attempts.sqlite', readonly=True).records(out.name)) == 25
    monkeypatch.undo()  # space freed
    assert ev(task_file, out) == 0
    assert rewards(out) == rewards(finished)


def test_a_read_only_store_is_called_read_only_and_still_reads(finished, task_file, tmp_path, monkeypatch, capsys):
    out = tmp_path / 'c'
    shutil.copytree(finished, out)
    before = files(out)
    real = os.access
    monkeypatch.setattr(
        campaigns.os,
        'access',
        lambda p, mode: (
            False if Path(p).parent == out.parent or str(p).startswith(str(out)) and mode == os.W_OK else real(p, mode)
        ),
    )
    assert ev(task_file, out) == 2
    msg = one_line(capsys.readouterr().err, 'is read-only', 'nothing was written', f'tbt aggregate {out}')
    assert 'damaged' not in msg
    assert aggregate(str(out), json=True) == 0 and json.loads(capsys.readouterr().out)['summary']
    assert files(out) == before


# ---------- the same, on a real read-only mount and a real full disk ----------
def namespace_or_skip():
    try:
        ok = subprocess.run(['unshare', '-rm', 'true'], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        ok = False
    if not ok:
        pytest.skip(
            'unshare -rm (a user and mount namespace) is not available here: the patched tests above cover this machine'
        )


def in_namespace(script, tmp_path):
    env = {
        **os.environ,
        'PYTHONPATH': os.pathsep.join([str(ROOT), os.environ.get('PYTHONPATH', '')]),
        'PY': sys.executable,
        'CLI': CLI,
    }
    r = subprocess.run(
        ['unshare', '-rm', 'bash', '-c', script], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600
    )
    return r.stdout, r.stderr


@pytest.mark.slow  # ~40 s: `tbt` processes inside a mount namespace
def test_a_real_read_only_mount(finished, task_file, tmp_path):
    namespace_or_skip()
    d = tmp_path / 'ro'
    shutil.copytree(finished, d / 'c')
    before = files(d / 'c')
    script = f'''set -u
mount --bind {d} {d} && mount -o remount,bind,ro {d}
"$PY" -c "$CLI" evaluate --tasks {task_file} --policy scripted:flaw=0.3 --k 2 --out {d}/c --quiet; echo "evaluate=$?"
"$PY" -c "$CLI" aggregate {d}/c --json > {tmp_path}/agg.json; echo "aggregate=$?"'''
    out, err = in_namespace(script, tmp_path)
    assert 'evaluate=2' in out and 'aggregate=0' in out, (out, err)
    msg = one_line(err, 'is read-only', 'nothing was written')
    assert 'damaged' not in msg and json.loads((tmp_path / 'agg.json').read_text())['summary']
    assert files(d / 'c') == before


@pytest.mark.slow  # ~45 s: `tbt` processes inside a mount namespace
def test_a_real_full_disk(finished, task_file, tmp_path):
    namespace_or_skip()
    d = tmp_path / 'disk'
    d.mkdir()
    run = f'"$PY" -c "$CLI" evaluate --tasks {task_file} --policy scripted:flaw=0.3 --k 2 --out {d}/c --quiet'
    script = f"""set -u
mount -t tmpfs -o size=160k tmpfs {d}
{run}; echo "first=$?"
"$PY" -c "import sqlite3; c = sqlite3.connect('{d}/c/attempts.sqlite')
print('stored=%d' % c.execute('select count(*) from attempts').fetchone())"
mount -o remount,size=8m tmpfs {d}
{run}; echo "second=$?"
cp -r {d}/c {tmp_path}/kept"""
    out, err = in_namespace(script, tmp_path)
    assert 'first=2' in out and 'second=0' in out, (out, err)
    stored = int(out.split('stored=')[1].split()[0])
    assert 0 < stored < 2 * N, out  # the disk filled up part of the way
    first = err.strip().splitlines()[0]
    assert 'no space left on the disk' in first and 'Traceback' not in err, err
    assert rewards(tmp_path / 'kept') == rewards(finished)
