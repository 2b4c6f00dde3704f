"Campaigns survive being killed: a real `tbt evaluate` process is SIGKILLed mid-way and the same command resumes it."
import json, os, signal, sqlite3, subprocess, sys, time
from pathlib import Path
import pytest
from thinkingbox_training.tasks import Task, ToolCallSpec, write_tasks
from thinkingbox_training.campaigns import AttemptStore, CampaignError, load_campaign, run_campaign
from thinkingbox_training.episode import AttemptRecord
from thinkingbox_training.metrics import CampaignIncomplete

ROOT = Path(__file__).resolve().parents[1]

def demo_tasks(n=30):
    return [Task(uid=f'demo/pay/{i:03d}', domain='demo', family='pay', split='bench', query=f'Pay {i + 1} cents from AC-1.',
                 golden=[ToolCallSpec(name='pay', arguments={'account_id': 'AC-1', 'amount_cents': i + 1})], reply='Paid.')
            for i in range(n)]

def tbt(*args, **kw):
    code = 'import sys; from thinkingbox_training.cli import main; sys.exit(main())'
    return subprocess.Popen([sys.executable, '-c', code, *args], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)

def count(db):
    try:
        with sqlite3.connect(db) as c: return c.execute('SELECT count(*) FROM attempts').fetchone()[0]
    except sqlite3.OperationalError: return 0

def test_killed_campaign_resumes_to_the_same_result(tmp_path):
    tasks = tmp_path/'tasks.jsonl'; write_tasks(demo_tasks(20), tasks)
    args = ['evaluate', '--tasks', str(tasks), '--policy', 'scripted:flaw=0.3', '--k', '6', '--concurrency', '4', '--quiet']
    # uninterrupted reference
    ref = tbt(*args, '--out', str(tmp_path/'ref')); ref.communicate(timeout=300); assert ref.returncode == 0
    # killed mid-way, then resumed by the same command
    out = tmp_path/'killed'
    p = tbt(*args, '--out', str(out))
    t0 = time.time()
    while count(out/'attempts.sqlite') < 30 and time.time() - t0 < 120 and p.poll() is None: time.sleep(0.05)
    p.send_signal(signal.SIGKILL); p.communicate()
    n_before = count(out/'attempts.sqlite')
    assert 0 < n_before < 120, n_before
    r = tbt(*args, '--out', str(out)); o, e = r.communicate(timeout=300); assert r.returncode == 0, e
    s = AttemptStore(out/'attempts.sqlite')
    inv = s.invocations('killed')
    recs = s.records('killed')
    assert len(recs) == 120 and len({(x['task_uid'], x['repetition']) for x in recs}) == 120   # none lost, none duplicated
    assert sum(i['executed'] for i in inv) == 120                                               # none re-run
    assert inv[0]['executed'] == n_before and not inv[0]['finished'] and inv[-1]['finished']
    a, b = load_campaign(tmp_path/'ref'), load_campaign(out)
    assert a.rewards.tolist() == b.rewards.tolist() and 0 < a.rewards.mean() < 1
    agg = subprocess.run([sys.executable, '-c', 'import sys; from thinkingbox_training.cli import main; sys.exit(main())',
                          'aggregate', str(out), '--json'], cwd=ROOT, capture_output=True, text=True)
    assert agg.returncode == 0, agg.stderr
    assert abs(json.loads(agg.stdout)['summary']['pass@1'] - a.rewards.mean()) < 1e-12

def test_a_clean_attempt_is_never_overwritten_and_another_campaign_is_refused(tmp_path):
    ts = demo_tasks(3)
    run_campaign(tmp_path/'c', ts, 'scripted', k=2, progress=False)
    s = AttemptStore(tmp_path/'c'/'attempts.sqlite')
    rec = AttemptRecord(**s.records('c')[0])
    with pytest.raises(ValueError, match='already stored'): s.put(rec, s.begin('c'))
    with pytest.raises(CampaignError, match=r'holds another campaign \(k: stored 2, now 3\)'): run_campaign(tmp_path/'c', ts, 'scripted', k=3, progress=False)

def test_system_errors_are_retried_then_left_visible_and_block_the_numbers(tmp_path):
    from thinkingbox_training.episode import EpisodeRunner
    from thinkingbox_training.policies import ScriptedPolicy
    class Flaky(ScriptedPolicy):
        "Fails every generation of repetition 1 (an endpoint that is down for those requests)."
        async def generate(self, reqs):
            if any(r.repetition == 1 for r in reqs): raise ConnectionError('endpoint down')
            return await super().generate(reqs)
    ts = demo_tasks(2)
    r = run_campaign(tmp_path/'e', ts, Flaky(), k=2, error_retries=1, concurrency=1, progress=False)
    assert r['system_errors_left'] == 2 and r['executed'] == 2 + 2 * 2   # 2 clean + 2 errors x (first try + 1 retry)
    with pytest.raises(CampaignIncomplete, match='2 system errors'): load_campaign(tmp_path/'e')
    r = run_campaign(tmp_path/'e', ts, ScriptedPolicy(), k=2, progress=False)                       # the repair run
    assert (r['executed'], r['system_errors_left']) == (2, 0)
    assert load_campaign(tmp_path/'e').rewards.tolist() == [[1, 1], [1, 1]]
