"""Campaigns in shards: worker processes writing one store give the records of one process; a shard killed mid-way (or
the parent) leaves the store consistent and the same command completes it."""

import functools, json, os, signal, sqlite3, time
from pathlib import Path
import pytest
from thinkingbox_training.tasks import load_tasks, write_tasks
from thinkingbox_training.campaigns import AttemptStore, CampaignError, campaign_records, run_campaign
from thinkingbox_training.policies import HFPolicy, SamplingConfig
from test_campaigns import demo_tasks, tbt

ROOT = Path(__file__).resolve().parents[1]
TINY = str(ROOT / 'data' / 'models' / 'tiny-qwen3')


def untimed(recs):
    return [{f: v for f, v in r.items() if f not in ('duration_s', 'campaign')} for r in recs]


def executed(out: Path) -> list:
    s = AttemptStore(out / 'attempts.sqlite')
    try:
        return s.invocations(out.name)
    finally:
        s.close()


def test_shards_store_the_records_of_one_process_scripted(tmp_path):
    ts = demo_tasks(7)
    one = run_campaign(tmp_path / 'one', ts, 'scripted:flaw=0.4', k=3, progress=False)
    three = run_campaign(tmp_path / 'three', ts, 'scripted:flaw=0.4', k=3, progress=False, shards=3)
    assert (one['executed'], three['executed'], three['expected']) == (21, 21, 21)
    a, b = campaign_records(tmp_path / 'one'), campaign_records(tmp_path / 'three')
    assert untimed(a) == untimed(b) and 0 < sum(r['reward'] for r in a) < 21  # mixed outcomes, the same ones
    assert [i['executed'] for i in executed(tmp_path / 'three')] == [21]  # one invocation, counted by all shards
    assert sum(three['stats']['batch_sizes']) == sum(one['stats']['batch_sizes'])  # every shard's turns counted
    # the export is the store's
    lines = (tmp_path / 'three' / 'attempts.jsonl').read_text().splitlines()
    assert [json.loads(x) for x in lines] == b


def test_shards_store_the_records_of_one_process_tiny_model(tmp_path):
    "The real tiny model: a spec in one process, a recipe (functools.partial) in two; sampled records are equal."
    ts = [t for t in load_tasks(ROOT / 'data' / 'tasks' / 'retail_bench.jsonl')][:3]
    s = SamplingConfig(temperature=1.0, max_tokens=16, seed=5)
    budgets = {'max_turns': 3, 'max_tokens_per_turn': 16, 'max_episode_tokens': 4096}
    kw = dict(k=2, sampling=s, budgets=budgets, progress=False, runner_kw={'tool_transport': 'inprocess'})
    one = run_campaign(tmp_path / 'one', ts, TINY, **kw)
    two = run_campaign(tmp_path / 'two', ts, functools.partial(HFPolicy, TINY, sampling=s), shards=2, **kw)
    assert one['executed'] == two['executed'] == 6 and one['system_errors_left'] == two['system_errors_left'] == 0
    a, b = campaign_records(tmp_path / 'one'), campaign_records(tmp_path / 'two')
    assert untimed(a) == untimed(b)
    assert all(r['usage']['agent']['output'] > 0 for r in a) and len({r['tokens'] for r in a}) > 1  # really sampled
    assert json.loads((tmp_path / 'two' / 'campaign.json').read_text())['policy'] == 'tiny-qwen3'


def test_a_policy_object_cannot_be_sharded(tmp_path):
    from thinkingbox_training.policies import ScriptedPolicy

    with pytest.raises(CampaignError, match=r'a policy object \(ScriptedPolicy\)'):
        run_campaign(tmp_path / 'c', demo_tasks(2), ScriptedPolicy(), k=2, shards=2, progress=False)
    assert not (tmp_path / 'c' / 'attempts.sqlite').exists()  # refused before anything was written


def count(db):
    try:
        with sqlite3.connect(db) as c:
            return c.execute('SELECT count(*) FROM attempts').fetchone()[0]
    except sqlite3.OperationalError:
        return 0


def shard_pids(pid: int) -> list:
    "The spawned shard processes of the campaign process `pid`."
    try:
        kids = Path(f'/proc/{pid}/task/{pid}/children').read_text().split()
    except OSError:
        return []
    out = []
    for k in kids:
        try:
            cmd = Path(f'/proc/{k}/cmdline').read_bytes()
        except OSError:
            continue
        if b'spawn_main' in cmd:
            out.append(int(k))
    return out


ARGS = ['--policy', 'scripted:flaw=0.3', '--k', '6', '--concurrency', '2', '--quiet', '--tool-transport', 'inprocess']


@pytest.fixture(scope='module')
def reference(tmp_path_factory):
    "One uninterrupted process: the records a killed and completed sharded campaign must end with."
    d = tmp_path_factory.mktemp('shards')
    tasks = d / 'tasks.jsonl'
    write_tasks(demo_tasks(40), tasks)
    r = tbt('evaluate', '--tasks', str(tasks), *ARGS, '--out', str(d / 'ref'))
    o, e = r.communicate(timeout=600)
    assert r.returncode == 0, e
    return tasks, campaign_records(d / 'ref')


# a killed shard in `make test`; a killed parent (the same guarantees, through the lock's inheritance) in test-slow
@pytest.mark.parametrize('victim', ['shard', pytest.param('parent', marks=pytest.mark.slow)])
def test_a_killed_shard_or_parent_leaves_the_store_consistent_and_a_rerun_completes_it(victim, reference, tmp_path):
    tasks, ref = reference
    out = tmp_path / 'killed'
    args = ['evaluate', '--tasks', str(tasks), *ARGS, '--out', str(out), '--shards', '2']
    p = tbt(*args)
    # shard 1 runs the odd positions of the pending attempts; kill once it has stored some of them
    odd = {(x['task_uid'], x['repetition']) for x in ref[1::2]}
    t0, kids = time.time(), []
    while p.poll() is None and time.time() - t0 < 300:
        kids = kids or shard_pids(p.pid)
        try:
            with sqlite3.connect(out / 'attempts.sqlite') as c:
                keys = set(c.execute('SELECT task_uid, repetition FROM attempts'))
        except sqlite3.OperationalError:
            keys = set()
        if kids and len(keys & odd) >= 3:
            break
        time.sleep(0.02)
    assert kids and p.poll() is None, 'the campaign ended before a shard could be killed: make it longer'
    os.kill(kids[0] if victim == 'shard' else p.pid, signal.SIGKILL)
    o, e = p.communicate(timeout=300)
    if victim == 'shard':
        assert p.returncode == 2 and 'shard 1 died (exit code -9)' in e, e
    t0 = time.time()  # an orphaned shard notices its parent is gone and ends (the lock goes with the last of them)
    while (
        any(
            Path(f'/proc/{k}').exists() and b'zombie' not in Path(f'/proc/{k}/status').read_bytes().lower()
            for k in kids
        )
        and time.time() - t0 < 30
    ):
        time.sleep(0.1)
    n_before = count(out / 'attempts.sqlite')
    assert 0 < n_before < 240, n_before
    r = tbt(*args)
    o, e = r.communicate(timeout=600)
    assert r.returncode == 0, e
    inv = executed(out)
    recs = campaign_records(out)
    assert len(recs) == 240 and len({(x['task_uid'], x['repetition']) for x in recs}) == 240  # none lost or doubled
    assert sum(i['executed'] for i in inv) == 240 and inv[0]['executed'] == n_before  # none run twice
    assert not inv[0]['finished'] and inv[-1]['finished']
    assert untimed(recs) == untimed(ref)  # one process's records
