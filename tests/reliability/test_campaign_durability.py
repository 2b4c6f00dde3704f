"""Campaign durability: real `tbt evaluate` processes killed with SIGKILL at random points and resumed (nothing lost,
nothing duplicated, the same aggregate), a second writer refused, changed inputs refused on resume, damaged stores
named and never overwritten, defective tasks refused before any attempt, a judge that is down reported, not hidden."""

import json, os, random, signal, sqlite3, subprocess, sys, time
from pathlib import Path
import pytest
from thinkingbox_training.tasks import Task, ToolCallSpec, RubricItem, Limits, load_tasks, write_tasks
from thinkingbox_training.campaigns import (
    AttemptStore,
    CampaignError,
    CampaignLock,
    aggregate,
    load_campaign,
    run_campaign,
)
from thinkingbox_training.episode import EpisodeRunner
from thinkingbox_training.grader import Grader, OpenAIJudge
from thinkingbox_training.policies import SamplingConfig, ScriptedPolicy
from thinkingbox_training.users import StandInServer

ROOT = Path(__file__).resolve().parents[2]
CLI = 'import sys; from thinkingbox_training.cli import main; sys.exit(main())'
EVAL = ['--policy', 'scripted:flaw=0.3', '--k', '4', '--concurrency', '2', '--quiet']


def demo_tasks(n, rubric=False):
    return [
        Task(
            uid=f'demo/pay/{i:03d}',
            domain='demo',
            family='pay',
            split='bench',
            query=f'Pay {i + 1} cents from AC-1.',
            golden=[ToolCallSpec(name='pay', arguments={'account_id': 'AC-1', 'amount_cents': i + 1})],
            reply='Paid.',
            rubric=[RubricItem(question='Does the agent say it paid?', require=['paid'])] if rubric else [],
        )
        for i in range(n)
    ]


def tbt(*args, env=None):
    return subprocess.Popen(
        [sys.executable, '-c', CLI, *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )


def count(db):
    try:
        with sqlite3.connect(f'file:{db}?mode=ro', uri=True) as c:
            return c.execute('SELECT count(*) FROM attempts').fetchone()[0]
    except sqlite3.Error:
        return 0


@pytest.fixture(scope='module')
def task_file(tmp_path_factory):
    p = tmp_path_factory.mktemp('tasks') / 'tasks.jsonl'
    write_tasks(demo_tasks(16), p)
    return p


@pytest.fixture(scope='module')
def reference(task_file, tmp_path_factory):
    "The uninterrupted campaign, with the command's settings (run in this process: outcomes are seeded per attempt)."
    out = tmp_path_factory.mktemp('ref') / 'ref'
    run_campaign(
        out, load_tasks(task_file), 'scripted:flaw=0.3', k=4, concurrency=2, task_files=[str(task_file)], progress=False
    )
    return load_campaign(out)


def aggregate_json(out, capsys):
    "`tbt aggregate OUT --json` (in this process): its exit code and its answer."
    capsys.readouterr()
    rc = aggregate(str(out), json=True)
    o, e = capsys.readouterr()
    return rc, (json.loads(o) if rc == 0 else e)


def kill_and_resume(task_file, out, at):
    "Run the campaign, SIGKILL it once `at` attempts are stored (at < 0: right after start), resume it to the end."
    p = tbt('evaluate', '--tasks', str(task_file), *EVAL, '--out', str(out))
    t0 = time.time()
    if at < 0:
        time.sleep(-at)
    else:
        while count(out / 'attempts.sqlite') < at and p.poll() is None and time.time() - t0 < 300:
            time.sleep(0.01)
    p.send_signal(signal.SIGKILL)
    p.communicate()
    before = count(out / 'attempts.sqlite')
    r = tbt('evaluate', '--tasks', str(task_file), *EVAL, '--out', str(out))
    o, e = r.communicate(timeout=600)
    assert r.returncode == 0, e
    return before


def check_resumed(out, reference, before, capsys):
    s = AttemptStore(out / 'attempts.sqlite')
    recs, inv = s.records(out.name), s.invocations(out.name)
    s.close()
    assert len(recs) == 64 and len({(x['task_uid'], x['repetition']) for x in recs}) == 64  # none lost, none twice
    assert sum(i['executed'] for i in inv) == 64 and inv[-1]['finished']  # none run twice
    if len(inv) > 1:
        assert inv[0]['executed'] == before and not inv[0]['finished']
    assert load_campaign(out).rewards.tolist() == reference.rewards.tolist()
    rc, agg = aggregate_json(out, capsys)
    assert rc == 0 and abs(agg['summary']['pass@1'] - reference.rewards.mean()) < 1e-12, agg


# kill -9 at points drawn at random (seeded) over the campaign; one in the fast suite (two processes, ~20 s of CPU)
KILL_POINTS = [
    pytest.param(('seed', 1), id='random-seed1'),
    pytest.param(('at', 63), id='last-attempt', marks=pytest.mark.slow),
    pytest.param(('seed', 2), id='random-seed2', marks=pytest.mark.slow),
    pytest.param(('seed', 3), id='random-seed3', marks=pytest.mark.slow),
    pytest.param(('at', 1), id='first-attempt', marks=pytest.mark.slow),
    pytest.param(('at', -0.5), id='while-starting', marks=pytest.mark.slow),
]


@pytest.mark.parametrize('point', KILL_POINTS)
def test_kill_9_then_resume_loses_and_duplicates_nothing(point, task_file, reference, tmp_path, capsys):
    kind, v = point
    at = random.Random(v).randrange(2, 62) if kind == 'seed' else v
    out = tmp_path / 'killed'
    before = kill_and_resume(task_file, out, at)
    check_resumed(out, reference, before, capsys)


def test_a_second_invocation_is_refused_while_a_run_holds_the_directory(task_file, tmp_path):
    out = tmp_path / 'busy'
    run_campaign(out, demo_tasks(2), 'scripted', k=1, progress=False)
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.name != 'campaign.lock'}
    with CampaignLock(out):  # as a running `tbt evaluate` holds it
        with pytest.raises(
            CampaignError, match=f'is being run by pid {os.getpid()}.*one campaign directory, one invocation'
        ):
            run_campaign(out, demo_tasks(2), 'scripted', k=1, progress=False)
        p = tbt('evaluate', '--tasks', str(task_file), *EVAL, '--out', str(out))
        o, e = p.communicate(timeout=300)
        assert p.returncode == 2 and f'is being run by pid {os.getpid()}' in e and 'Traceback' not in e, e
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.name != 'campaign.lock'} == before  # nothing written
    assert run_campaign(out, demo_tasks(2), 'scripted', k=1, progress=False)['executed'] == 0  # released: it resumes


@pytest.mark.slow
def test_two_real_invocations_the_second_refused_the_first_interrupted_then_resumed(tmp_path, capsys):
    tf = tmp_path / 'many.jsonl'
    write_tasks(demo_tasks(100), tf)
    args = [
        'evaluate',
        '--tasks',
        str(tf),
        '--policy',
        'scripted:flaw=0.3',
        '--k',
        '4',
        '--concurrency',
        '2',
        '--quiet',
        '--user',
        'openai:m',
        '--out',
        str(tmp_path / 'two'),
    ]
    with StandInServer(delay_s=0.3) as srv:  # a user taking 0.3 s a reply keeps the first run going for a minute
        env = {'TBT_USER_BASE_URL': srv.base_url}
        first = tbt(*args, env=env)
        t0 = time.time()
        while count(tmp_path / 'two' / 'attempts.sqlite') < 1 and first.poll() is None and time.time() - t0 < 300:
            time.sleep(0.01)
        second = tbt(*args, env=env)
        o, e = second.communicate(timeout=300)
        assert second.returncode == 2 and 'is being run by pid' in e, e
        assert first.poll() is None, 'the first run ended before the second was refused: make the campaign longer'
        first.send_signal(signal.SIGINT)  # Ctrl-C ends the run (a loser used to hang in epoll_wait, deaf to it)
        first.communicate(timeout=120)
        r = tbt(*args, env=env)
        o, e = r.communicate(timeout=900)
        assert r.returncode == 0, e
    s = AttemptStore(tmp_path / 'two' / 'attempts.sqlite')
    recs, inv = s.records('two'), s.invocations('two')
    s.close()
    assert len(recs) == 400 and len({(x['task_uid'], x['repetition']) for x in recs}) == 400
    assert sum(i['executed'] for i in inv) == 400 and len(inv) == 2


def test_an_exception_in_on_done_ends_the_run_at_once():
    jobs = [(t, 0) for t in demo_tasks(6)]
    seen = []

    def store(ep):
        seen.append(ep)
        if len(seen) == 2:
            raise sqlite3.OperationalError('disk I/O error')

    t0 = time.perf_counter()
    with pytest.raises(sqlite3.OperationalError, match='disk I/O error'):
        EpisodeRunner(ScriptedPolicy(), concurrency=1).run_sync(jobs, on_done=store)
    assert len(seen) == 2 and time.perf_counter() - t0 < 30  # no later episode starts, nothing hangs


# ---------- a resume with anything that changes verdicts refused, naming it ----------
def base_kw():
    return dict(tasks=demo_tasks(3), policy='scripted', k=2, progress=False)


CHANGES = {
    'judge': (
        {'grader': Grader(judge=OpenAIJudge(model='m', base_url='http://127.0.0.1:9/v1'))},
        'judge: stored "rule", now "openai:m"',
    ),
    'user': ({'user': 'openai:m'}, 'user: stored "scripted", now "openai:m"'),
    'k': ({'k': 3}, 'k: stored 2, now 3'),
    'policy': ({'policy': 'scripted:flaw=0.5'}, 'policy: stored'),
    'sampling': ({'sampling': SamplingConfig(seed=7)}, 'sampling: stored'),
    'task_content': (
        {
            'tasks': [
                t.model_copy(
                    update={'golden': [ToolCallSpec(name='pay', arguments={'account_id': 'AC-1', 'amount_cents': 2})]}
                )
                for t in demo_tasks(3)
            ]
        },
        'tasks_sha256: stored',
    ),
    'budgets': (
        {'tasks': [t.model_copy(update={'limits': Limits(max_turns=3)}) for t in demo_tasks(3)]},
        'tasks_sha256: stored',
    ),
    'tool_limit': ({'runner_kw': {'tool_timeout_s': 1.0}}, 'tool_timeout_s: stored 10.0, now 1.0'),
}


@pytest.mark.parametrize('change', list(CHANGES))
def test_a_resume_that_changes_what_verdicts_depend_on_is_refused(change, tmp_path):
    run_campaign(tmp_path / 'c', **base_kw())
    kw, words = CHANGES[change]
    store = (tmp_path / 'c' / 'attempts.sqlite').read_bytes()
    with pytest.raises(CampaignError, match='holds another campaign') as e:
        run_campaign(tmp_path / 'c', **{**base_kw(), **kw})
    assert words in str(e.value), str(e.value)
    assert (tmp_path / 'c' / 'attempts.sqlite').read_bytes() == store
    assert run_campaign(tmp_path / 'c', **base_kw())['executed'] == 0  # the same settings resume (nothing left to run)


# ---------- damaged stores: named, with what to do, never overwritten ----------
def truncate_half(p):
    b = p.read_bytes()
    p.write_bytes(b[: len(b) // 2])


def garbage(p):
    p.write_bytes(os.urandom(8192))


def zero_page(p):
    b = bytearray(p.read_bytes())
    b[4096:8192] = bytes(4096)
    p.write_bytes(bytes(b))


def bad_record(p, text):
    c = sqlite3.connect(p)
    c.execute("UPDATE attempts SET record=? WHERE task_uid='demo/pay/001' AND repetition=1", (text,))
    c.commit()
    c.close()


def truncate_json(p):
    b = p.read_bytes()
    p.write_bytes(b[: len(b) // 3])


DAMAGE = {  # name: (file, how, words of the error)
    'store_truncated_half': ('attempts.sqlite', truncate_half, ['attempts.sqlite is damaged', 'left as it is']),
    'store_garbage': ('attempts.sqlite', garbage, ['attempts.sqlite is damaged', 'file is not a database']),
    'store_zeroed_page': ('attempts.sqlite', zero_page, ['attempts.sqlite is damaged']),
    'record_not_json': (
        'attempts.sqlite',
        lambda p: bad_record(p, '{"task_uid": "demo/pay/0'),
        ['attempt demo/pay/001#1', 'is damaged', 'DELETE FROM attempts'],
    ),
    'record_other_attempt': (
        'attempts.sqlite',
        lambda p: bad_record(p, json.dumps({'task_uid': 'demo/pay/000', 'repetition': 0})),
        ['attempt demo/pay/001#1', 'is damaged'],
    ),
    'campaign_json_truncated': (
        'campaign.json',
        truncate_json,
        ['campaign.json is damaged', 'JSONDecodeError', 'Restore it'],
    ),
    'campaign_json_empty': ('campaign.json', lambda p: p.write_text(''), ['campaign.json is damaged']),
    'campaign_json_list': (
        'campaign.json',
        lambda p: p.write_text('[]'),
        ['campaign.json is damaged', 'lacks campaign'],
    ),
}


@pytest.fixture(scope='module')
def finished(tmp_path_factory):
    out = tmp_path_factory.mktemp('fin') / 'c'
    run_campaign(out, demo_tasks(30), 'scripted', k=2, progress=False)
    return out


@pytest.mark.parametrize('damage', list(DAMAGE))
def test_a_damaged_store_is_named_and_never_overwritten(damage, finished, tmp_path, capsys):
    import shutil

    out = tmp_path / 'c'
    shutil.copytree(finished, out)
    f, how, words = DAMAGE[damage]
    how(out / f)
    snapshot = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file() and p.name != 'campaign.lock'}
    with pytest.raises(CampaignError) as e:
        run_campaign(out, demo_tasks(30), 'scripted', k=2, progress=False)
    for w in words:
        assert w in str(e.value), str(e.value)
    assert str(out / f) in str(e.value)
    rc, agg = aggregate_json(out, capsys)
    assert rc == 1 and str(out / f) in agg, agg  # `tbt aggregate` says the same, without a traceback
    after = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file() and p.name in snapshot}
    assert after == snapshot  # nothing was written over (attempts.jsonl included)


def test_defective_tasks_are_refused_before_any_attempt(tmp_path):
    ts = demo_tasks(3) + [
        demo_tasks(5)[4].model_copy(
            update={'golden': [ToolCallSpec(name='pay', arguments={'account_id': 'AC-9', 'amount_cents': 5})]}
        )
    ]
    with pytest.raises(
        CampaignError, match=r'1 defective task\(s\), refused before any attempt:\n  task demo/pay/004: golden\[0\]'
    ):
        run_campaign(tmp_path / 'd', ts, 'scripted', k=2, progress=False)
    assert count(tmp_path / 'd' / 'attempts.sqlite') == 0 and not (tmp_path / 'd' / 'campaign.json').exists()


def test_a_judge_that_is_down_is_a_reported_system_error_then_repaired(tmp_path, capsys):
    # a judge that is down: TBT_JUDGE_BASE_URL=http://127.0.0.1:9/v1 tbt evaluate ... --judge openai:m
    tf = tmp_path / 'rubric.jsonl'
    write_tasks(demo_tasks(3, rubric=True), tf)
    args = [
        'evaluate',
        '--tasks',
        str(tf),
        '--policy',
        'scripted',
        '--k',
        '2',
        '--judge',
        'openai:m',
        '--out',
        str(tmp_path / 'j'),
        '--quiet',
    ]
    env = {'TBT_JUDGE_BASE_URL': 'http://127.0.0.1:9/v1', 'TBT_JUDGE_MAX_RETRIES': '0'}
    p = tbt(*args, env=env)
    o, e = p.communicate(timeout=300)
    assert p.returncode == 1 and '6 system error(s) left' in o and 'grading failed: APIConnectionError' in e, (o, e)
    s = AttemptStore(tmp_path / 'j' / 'attempts.sqlite')
    recs, inv = s.records('j'), s.invocations('j')
    s.close()
    assert {r['status'] for r in recs} == {'system_error'} and all(
        'grading failed' in r['verdict']['system_error'] for r in recs
    )
    assert inv[0]['executed'] == 6 * 3  # tried, then retried twice
    rc, agg = aggregate_json(tmp_path / 'j', capsys)
    assert rc == 1 and '6 system errors' in agg, agg
    with StandInServer(chat=lambda m: 'yes') as srv:  # the judge is back: the same command repairs it
        p = tbt(*args, env={**env, 'TBT_JUDGE_BASE_URL': srv.base_url})
        o, e = p.communicate(timeout=300)
    assert p.returncode == 0 and '0 system error(s) left' in o, (o, e)
    assert load_campaign(tmp_path / 'j').rewards.tolist() == [[1, 1]] * 3
