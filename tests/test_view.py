"`tbt view`: a campaign (or two side by side) as one self-contained page; its data read back; bad input named."

import contextlib, io, json, os, re, shutil
from pathlib import Path
import pytest
from thinkingbox_training.tasks import Task, ToolCallSpec
from thinkingbox_training.campaigns import run_campaign
from thinkingbox_training.cli import main
from thinkingbox_training.view import unpack, view_data

ROOT = Path(__file__).resolve().parents[1]


def tbt(*args) -> tuple:
    "`tbt ARGS` in this process: (exit code, stdout, stderr)."
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main([str(a) for a in args])
    return rc, out.getvalue(), err.getvalue()


def page_data(path: Path) -> dict:
    "The data block of a written page, as the page's script reads it."
    m = re.search(r'<script id="tbt-data" type="application/json">(.*?)</script>', path.read_text(), re.S)
    return json.loads(m.group(1))


@pytest.fixture(scope='module')
def camps(tmp_path_factory):
    "Two finished campaigns of the same demo tasks, in their stores: the flawless scripted expert and a flawed one."
    tasks = [
        Task(
            uid=f'demo/pay/{i:02d}',
            domain='demo',
            family='pay',
            split='bench',
            query=f'Pay {a} cents.',
            golden=[ToolCallSpec(name='pay', arguments={'account_id': 'AC-1', 'amount_cents': a})],
            reply='Paid.',
        )
        for i, a in enumerate([100, 250, 999, 120])
    ]
    root = tmp_path_factory.mktemp('view')
    for name, policy in (('good', 'scripted'), ('flawed', 'scripted:flaw=0.5')):
        assert run_campaign(root / name, tasks, policy, k=4, progress=False)['executed'] == 16
    return root


def test_one_campaign_page(camps, tmp_path):
    out = tmp_path / 'view.html'
    rc, said, err = tbt('view', camps / 'flawed', '--out', out)
    assert rc == 0 and str(out) in said and not err
    d = page_data(out)
    assert [len(c) for t in d['tasks'] for c in t['cells']] == [4] * 4  # 4 tasks x 4 attempts, from the store
    cells = [(t['uid'], c) for t in d['tasks'] for c in t['cells'][0]]
    failed = [(uid, c[0]) for uid, c in cells if d['verdicts'][c[1]] == 'fail']
    assert failed and len(failed) < 16  # the flaw rate gives both verdicts
    uid, rep = failed[0]
    rec = next(r for r in unpack(d['details'][f'0|{uid}']) if r['repetition'] == rep)
    assert rec['reward'] == 0 and rec['diff'] and rec['diff'][0]['table'] == 'account'  # the diff, from the reasons
    assert rec['messages'][0]['role'] == 'user'  # the conversation, from the user's request on
    every = [r for t in d['tasks'] for r in unpack(d['details'][f'0|{t["uid"]}'])]
    assert len(every) == 16 and any(m['role'] == 'tool' for r in every for m in r['messages'])
    assert not re.search(r'(src|href)\s*=\s*["\']?(https?:|//)', out.read_text())  # nothing fetched from elsewhere


def test_side_by_side_changed_first(camps):
    d = view_data([camps / 'good', camps / 'flawed'])
    assert [c['policy'] for c in d['campaigns']] == ['scripted', 'scripted:flaw=0.5']
    changes = [t['change'] for t in d['tasks']]
    assert changes == sorted(changes, reverse=True) and changes[0] > 0  # the tasks that changed come first
    t = d['tasks'][0]
    assert t['rates'][0] == 1.0 and t['change'] == pytest.approx(1.0 - t['rates'][1])


def test_system_error_is_void(camps, tmp_path):
    "A system error's attempt is `void`, not failed, and its kind is offered by the system error filter."
    c = tmp_path / 'export-only'
    c.mkdir()
    shutil.copy(camps / 'flawed' / 'campaign.json', c)
    recs = [json.loads(x) for x in (camps / 'flawed' / 'attempts.jsonl').read_text().splitlines()]
    recs[0]['verdict']['system_error'] = 'backend timed out after 30.0 s'
    (c / 'attempts.jsonl').write_text(''.join(json.dumps(r) + '\n' for r in recs))
    d = view_data([c])
    assert d['errors'] == ['backend timed out after N s']
    voids = [x for t in d['tasks'] for x in t['cells'][0] if d['verdicts'][x[1]] == 'void']
    assert len(voids) == 1 and voids[0][3] == 0


def test_bad_input_one_line(camps, tmp_path):
    out = tmp_path / 'view.html'
    out.write_text('an earlier page')
    damaged = tmp_path / 'damaged'
    shutil.copytree(camps / 'flawed', damaged)
    (damaged / 'attempts.sqlite').unlink()
    (damaged / 'attempts.jsonl').write_text('{"task_uid": \n')
    other = ROOT / 'data' / 'runs' / 'study' / 'base' / 'pool-k8'
    for args, rc, said in (
        ((tmp_path / 'nowhere',), 2, 'no such directory'),
        ((tmp_path,), 1, 'is not a campaign directory'),
        ((camps / 'good', '--out', tmp_path), 2, 'is a directory, not a file'),
        ((camps / 'good', other), 1, 'share no task'),
        ((damaged,), 1, 'attempts.jsonl'),
    ):
        got, _, err = tbt('view', *args, '--out', out) if '--out' not in args else tbt('view', *args)
        assert (got, len(err.strip().splitlines())) == (rc, 1) and said in err, (args, err)
    assert out.read_text() == 'an earlier page'  # a refused view leaves the page that was there


TRACE = r"""
import json, sys, trackio
from thinkingbox_training.view import log_step_trace
steps = json.load(open(sys.argv[1]))['steps']
print(json.dumps(log_step_trace(steps[0], ['tensorboard', 'trackio'], sys.argv[2])))  # no Trackio run open yet
trackio.init(project='tbt-trace', name='run', embed=False, auto_log_cpu=False)
print(json.dumps(log_step_trace(steps[1], ['tensorboard', 'trackio'], sys.argv[2], sample=3)))
trackio.finish()
"""


def test_trace_logged_to_tensorboard_and_trackio(tmp_path):
    "A step's groups logged as a table to TensorBoard and to an offline Trackio run, read back from their stores."
    import sqlite3, subprocess, sys
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    log = ROOT / 'data' / 'runs' / 'study' / 'seed0' / 'model' / 'training_log.json'
    env = dict(os.environ, TRACKIO_DIR=str(tmp_path / 'trackio'), HF_HUB_OFFLINE='1')
    r = subprocess.run(
        [sys.executable, '-c', TRACE, str(log), str(tmp_path / 'tb')], env=env, capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr[-2000:]
    said = [json.loads(x) for x in r.stdout.splitlines() if x.startswith('[')]
    assert said == [['tensorboard'], ['tensorboard', 'trackio']]
    ea = EventAccumulator(str(tmp_path / 'tb'))
    ea.Reload()
    texts = {e.step: e.tensor_proto.string_val[0].decode() for e in ea.Tensors('tbt/groups/text_summary')}
    step1 = json.load(open(log))['steps'][1]
    assert sorted(texts) == [0, 1] and len(texts[1].splitlines()) == 2 + 3  # header, rule, the 3 groups sampled
    assert step1['groups'][step1['selected'][0]][0][0] in texts[1]  # a trained group's task
    with sqlite3.connect(tmp_path / 'trackio' / 'tbt-trace.db') as db:
        (metrics,) = db.execute('select metrics from metrics').fetchone()
    table = json.loads(metrics)['tbt/groups']
    assert table['_type'] == 'trackio.table' and len(table['_value']) == 3
    assert {row['use'] for row in table['_value']} == {'trained'}


def test_training_run_page(tmp_path):
    "A training run's recorded groups: one row a group of a step, the group filter offering kinds, refills and use."
    run = ROOT / 'data' / 'runs' / 'study' / 'seed0'
    out = tmp_path / 'train.html'
    assert tbt('view', run / 'model', '--out', out)[0] == 0
    d = page_data(out)
    steps = json.loads((run / 'model' / 'training_log.json').read_text())['steps']
    assert len(d['tasks']) == sum(len(s['groups']) for s in steps) and d['labels'] == {'termination': 'group'}
    assert 'useful, trained, refill round 1' in d['terminations'] and 'zero_variance, dropped' in d['terminations']
    t = next(t for t in d['tasks'] if t['uid'].startswith('step 0000 group 04'))
    g = unpack(d['details'][f'0|{t["uid"]}'])[0]['trace']
    assert (g['round'], g['use'], g['task']) == (1, 'trained', steps[0]['groups'][4][0][0])
