"""Our tasks as a verifiers environment (environments/tbt_tasks), evaluated with verifiers' own `vf-eval` entry point.

verifiers 0.4.0 pins mcp==2.0.0 and openai<3, which the project's environment does not hold (mcp 2.3, openai 3), so
it runs in an environment of its own, built once under ~/.cache/thinkingbox_training/ and keyed by its requirements
(tests/venvs.py), with the checkout on PYTHONPATH. Every model is a local OpenAI-compatible server in this process:
the parity tests' recording server, which plays the scripted agent, user and judge, and our stand-in server answering
with the tiny policy. One `vf-eval` process runs every configuration below, the same tasks and scripts run through
`tbt evaluate`, and the verdicts, the ends and every request are compared. Under CI=true a missing environment or
ThinkingBox checkout fails the run instead of skipping."""

import json, os, subprocess, sys
from pathlib import Path
import pytest
from conftest import skip_unless_ci
from thinkingbox_parity import RecordingServer, agent_script, compare
from venvs import verifiers_python
from thinkingbox_training.tasks import load_tasks, write_tasks
from thinkingbox_training.users import StandInServer

ROOT = Path(__file__).parent.parent
ENV_DIR = ROOT / 'environments' / 'tbt_tasks'
N_PER_DOMAIN = 20
TB_FILE = 'email_system_org.py'
# ThinkingBox development tasks carry no golden path: the agent's script for each, one of them left short (it fails)
TB_SCRIPTS = {
    'test_email_manager_of_manager': [
        ('', [('get_user_profile', {})]),
        ('', [('get_contact', {'contact_id': 'contact-001'})]),
        (
            '',
            [
                (
                    'send_email',
                    {
                        'to': 'carol@company.com',
                        'cc': '',
                        'subject': 'Project A',
                        'body': 'Are you free for a meeting regarding Project A on Thursday?',
                    },
                )
            ],
        ),
    ],
    'test_organizational_structure_contact_lookup': [('', [('get_contact', {'contact_id': 'contact-001'})])],
    'test_contact_hierarchy_navigation': [('', [('get_contact', {'contact_id': 'contact-001'})])],  # no list_contacts
}
FINAL = 'Everything you asked for is done. Thank you for contacting us. <DONE>'

# What differs between `tbt evaluate` and the same episodes through verifiers, request by request: field -> reason.
# An unlisted difference fails, and so does a listed one that no longer occurs. None today: every request of the
# agent, the simulated user and the judge is the same, sampling parameters included (verifiers' eval passes a request's
# own parameters on where its `sampling` configuration sets none, as here).
DIFFERENCES = {}

# verifiers' whole-episode retries, opt-in: one more episode after a system error
RETRY_SYSTEM_ERRORS = """[[env.retries.rules]]
type = "EpisodeSystemError"
max_retries = 1
"""

# The driver, run by the verifiers environment's Python: every configuration through verifiers' eval runner (the
# `run_eval` that `vf-eval` runs, all at once), the guard, and verifiers' loader on the environment as `pip install`
# puts it. Writes what it saw to a JSON file.
DRIVER = r"""
import importlib, json, subprocess, sys
from pathlib import Path
configs, out_file, release, env_dir, site, first = sys.argv[1:7]
# `pip install` of the environment's folder (a copy: the build leaves its files beside the sources), meanwhile: the
# loader is checked on what it installs, at the end
import shutil
src = Path(site).with_name('tbt_tasks_src')
shutil.copytree(env_dir, src, ignore=shutil.ignore_patterns('build', '*.egg-info', '__pycache__'))
pip = subprocess.Popen([sys.executable, '-m', 'pip', 'install', '-q', '--no-deps', '--no-build-isolation', '--target',
                        site, src], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
import asyncio, tomllib
from verifiers.v1.cli.eval.runner import run_eval
from verifiers.v1.configs.cli.eval import EvalConfig
configs = {name: (toml, EvalConfig.model_validate(tomllib.loads(Path(toml).read_text())))
           for name, toml in json.loads(configs).items()}

async def every():  # the runs at once, as one process serves several evaluations
    return await asyncio.gather(*(run_eval(c) for _, c in configs.values()))

asyncio.run(every())
out = {'runs': {}}
keep = ('ok', 'errors', 'rewards', 'info', 'stop_condition', 'num_turns')
for name, (toml, _) in configs.items():
    rows = []
    for f in (Path(toml).parent / 'out').rglob('traces.jsonl'):
        for line in f.read_text().splitlines():
            rows += [{'key': t['task']['key'], 'nodes': len(t['nodes']), **{k: t.get(k) for k in keep}}
                     for t in json.loads(line)['traces']]
    out['runs'][name] = rows
from tbt_tasks.taskset import TbtTaskset, TbtTasksetConfig
try:
    list(TbtTaskset(TbtTasksetConfig(id='tbt-tasks', tasks=[release])))
    out['guard'] = None
except Exception as e:
    out['guard'] = f'{type(e).__name__}: {e}'
out['pip'] = [pip.wait(), pip.stdout.read()[-2000:]]
for m in [m for m in sys.modules if m == 'tbt_tasks' or m.startswith('tbt_tasks.')]:
    del sys.modules[m]
sys.path.insert(0, site)
importlib.invalidate_caches()
from verifiers.v1.utils.loaders import environment_class, taskset_class, default_harness_id
import verifiers.v1 as vf
import tbt_tasks
env = vf.load_environment(vf.resolve_env_config({'taskset': {'id': 'tbt-tasks', 'tasks': [first]}}))
out['load_environment'] = [type(env).__name__, type(env._harnesses['agent']).__name__, len(list(env.taskset))]
# a task shipped as data to a process that never loaded the taskset (an env server): its file is loaded at setup
import types
from tbt_tasks import taskset as ts
ts._TASKS.clear()
uid = json.loads(Path(first).read_text().splitlines()[0])['uid']
task = ts.TbtTask(ts.TbtData(task_uid=uid, domain='retail', source=first), ts.TbtTaskConfig())
trace = types.SimpleNamespace(state=ts.TbtState(), info={})

async def shipped():
    await task.setup(trace, None)
    ep = trace.state.episode
    try:
        return [ep.task.uid, len(ep.tools), ep.messages[-1]['content']]
    finally:
        await ep.close()

out['shipped'] = [uid, *asyncio.run(shipped())]
out['installed_at'] = tbt_tasks.__file__
out['classes'] = [environment_class('tbt-tasks').__name__, taskset_class('tbt-tasks').__name__,
                  default_harness_id('tbt-tasks')]
Path(out_file).write_text(json.dumps(out))
"""


def eval_toml(
    folder: Path, url: str, tasks: list, uids: list, user='scripted', judge='rule', user_url='', more=''
) -> str:
    "A `vf-eval` configuration: our environment, every model at `url`, these tasks, the output under `folder/out`."
    folder.mkdir(parents=True)
    (folder / 'eval.toml').write_text(
        f"""model = "agent"
push = false
rich = "None"
max_concurrent = 16
output_dir = "{folder / 'out'}"
[client]
base_url = "{url}"
api_key_var = "TBT_VF_KEY"
[env.taskset]
id = "tbt-tasks"
tasks = {json.dumps([str(t) for t in tasks])}
uids = {json.dumps(uids)}
[env.taskset.task]
user = "{user}"
judge = "{judge}"
{f'user_base_url = "{user_url}"' if user_url else ''}
{more}"""
    )
    return str(folder / 'eval.toml')


def tiny_chat(tools: list):
    "The stand-in server's answer: the tiny policy's greedy turn on the conversation, its tool calls parsed by ours."
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from thinkingbox_training.interpret import parse_assistant

    loaded = []  # the model, loaded at the first request (meanwhile the other runs go on)

    def chat(messages):
        if not loaded:
            path = ROOT / 'data/models/tiny-qwen3'
            loaded.extend([AutoTokenizer.from_pretrained(path), AutoModelForCausalLM.from_pretrained(path).eval()])
        tok, model = loaded
        msgs = []
        for m in messages:
            m = dict(m)
            for c in m.get('tool_calls') or []:
                c['function']['arguments'] = json.loads(c['function']['arguments'] or '{}')
            msgs.append(m)
        ids = tok.apply_chat_template(msgs, tools=tools, add_generation_prompt=True, return_dict=False)
        with torch.no_grad():
            out = model.generate(torch.tensor([ids]), max_new_tokens=40, do_sample=False)
        text = tok.decode(out[0, len(ids) :], skip_special_tokens=False)
        turn = parse_assistant(text, tools)
        calls = [
            {'id': f'call_{i}', 'type': 'function', 'function': {'name': c.name, 'arguments': json.dumps(c.arguments)}}
            for i, c in enumerate(turn.tool_calls)
        ]
        message = {'role': 'assistant', 'content': turn.content or ('' if calls else text)}
        if calls:
            message['tool_calls'] = calls
        choice = {'index': 0, 'finish_reason': 'tool_calls' if calls else 'stop', 'message': message}
        usage = {'prompt_tokens': len(ids), 'completion_tokens': out.shape[1] - len(ids), 'total_tokens': out.shape[1]}
        return {
            'id': 'c',
            'object': 'chat.completion',
            'created': 0,
            'model': 'tiny',
            'choices': [choice],
            'usage': usage,
        }

    return chat


def run_tbt_evaluate(url: str, files: list, out: Path, user: str, judge: str) -> list:
    "`tbt evaluate` (one attempt a task, the `chat:agent` policy) with every model at `url`: its attempt rows."
    from thinkingbox_training.campaigns import evaluate

    keys = ['TBT_POLICY_BASE_URL', 'TBT_USER_BASE_URL', 'TBT_JUDGE_BASE_URL']
    saved = {k: os.environ.get(k) for k in keys}
    os.environ.update({k: url for k in keys})
    try:
        rc = evaluate(
            tasks=','.join(map(str, files)),
            policy='chat:agent',
            k=1,
            out=str(out),
            split='',
            user=user,
            judge=judge,
            quiet=True,
            shards=1,
        )
    finally:
        for k, v in saved.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
    assert rc == 0, f'tbt evaluate exited {rc}'
    return [json.loads(line) for line in (out / 'attempts.jsonl').read_text().splitlines() if line.strip()]


HOSTILE = ROOT / 'tests' / 'reliability' / 'hostile_calls.py'


def hostile_turns() -> list | None:
    """The reliability suite's hostile calls as agent turns, when tests/reliability/hostile_calls.py is in the tree
    (None when not): its `HOSTILE_CALLS` (or `CALLS`), each a raw assistant text, a (tool, arguments) pair or a
    {'name', 'arguments'} dict, one turn each."""
    if not HOSTILE.exists():
        return None
    import importlib.util

    spec = importlib.util.spec_from_file_location('hostile_calls', HOSTILE)
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault('hostile_calls', mod)  # its SQLModel tables resolve their annotations through sys.modules
    spec.loader.exec_module(mod)
    items = getattr(mod, 'HOSTILE_CALLS', None) or getattr(mod, 'CALLS', None)
    assert items, f'{HOSTILE} names neither HOSTILE_CALLS nor CALLS: name its list of calls for this test'
    turns = []
    for x in items:
        if isinstance(x, str):
            turns.append((x, []))
        elif isinstance(x, dict):
            turns.append(('', [(x['name'], x.get('arguments', {}))]))
        else:
            name, arguments = x[:2]
            turns.append(('', [(name, arguments)]))
    return turns


def picked_hostile(tasks: list) -> str:
    "The task that plays the hostile calls: the last retail one picked."
    return [t.uid for t in tasks if t.domain == 'retail'][-1]


def distinct_queries(tasks: list, n: int) -> list:
    "The first `n` tasks whose queries no other task's contains (the recording server finds a task by its query)."
    out = []
    for t in tasks:
        q = t.query.strip()
        if all(q not in o.query and o.query.strip() not in q for o in out):
            out.append(t)
        if len(out) == n:
            break
    return out


@pytest.fixture(scope='module')
def runs(tmp_path_factory):
    "The same tasks and scripts through `vf-eval` and through `tbt evaluate`, plus one tiny-policy rollout."
    if not os.environ.get('THINKINGBOX_DATA'):
        skip_unless_ci('THINKINGBOX_DATA is not set (the thinkingbox-data checkout)')
    from thinkingbox_training.thinkingbox import RELEASES, data_dir, load_thinkingbox
    from thinkingbox_training.ecosystem import domain_tool_specs

    data = data_dir()
    try:
        py = verifiers_python(ROOT)
    except Exception as e:
        skip_unless_ci(f'the verifiers environment could not be built: {e}')
    work = tmp_path_factory.mktemp('verifiers')

    # the first tasks of each domain's bench file, written to files of their own (`tbt evaluate` runs whole files)
    hostile = hostile_turns()
    files, ours = {}, []
    for d in ('retail', 'travel'):
        n = N_PER_DOMAIN + (1 if hostile and d == 'retail' else 0)  # one more retail task plays the hostile calls
        picked = distinct_queries(load_tasks(ROOT / f'data/tasks/{d}_bench.jsonl'), n)
        write_tasks(picked, work / f'{d}.jsonl')
        files[d], ours = work / f'{d}.jsonl', ours + picked
    tb_file = data / 'dataset' / 'test_case' / TB_FILE
    tb = load_thinkingbox(TB_FILE)
    # every other task of ours stops before its last golden call: the verdicts hold passes and failures
    scripts = {
        t.query.strip(): agent_script(t.golden if i % 2 == 0 else t.golden[:-1] or t.golden) for i, t in enumerate(ours)
    }
    scripts |= {t.query.strip(): TB_SCRIPTS[t.uid.split(':')[1]] + [(FINAL, [])] for t in tb}
    if hostile:  # the hostile calls first, then the expert path: failed calls, never an error of the rollout
        h = next(t for t in ours if t.domain == 'retail' and t.uid == picked_hostile(ours))
        scripts[h.query.strip()] = hostile + agent_script(h.golden)
    questions = {r.question: t.query.strip() for t in tb for r in t.rubric}
    release = data / RELEASES['dataset_2604_airline_tau_bench']

    servers = [RecordingServer(scripts, questions) for _ in range(3)]  # verifiers', ours, the void rollout's agent
    with servers[0] as vsrv, servers[1] as osrv, servers[2] as xsrv:
        tiny_server = StandInServer(chat=tiny_chat(domain_tool_specs('retail')), model='tiny')
        with tiny_server as tiny, StandInServer(fail_first=10**9) as down:
            configs = {
                # a system error: the simulated user's endpoint fails (HTTP 503) after its retries
                'void': eval_toml(
                    work / 'void',
                    xsrv.base_url,
                    [files['retail']],
                    [ours[1].uid],
                    'openai:u',
                    user_url=down.base_url,
                    more=RETRY_SYSTEM_ERRORS,
                ),
                'ours': eval_toml(work / 'ours', vsrv.base_url, list(files.values()), [t.uid for t in ours]),
                'thinkingbox': eval_toml(
                    work / 'tb', vsrv.base_url, [tb_file], [t.uid for t in tb], 'openai:user', 'openai:judge'
                ),
                'tiny': eval_toml(work / 'tiny', tiny.base_url, [files['retail']], [ours[0].uid]),
            }
            env = dict(
                os.environ,
                PYTHONPATH=f'{ROOT}:{ENV_DIR}',
                TBT_VF_KEY='none',
                TBT_USER_BASE_URL=vsrv.base_url,
                TBT_JUDGE_BASE_URL=vsrv.base_url,
                THINKINGBOX_DATA=str(data),
            )
            env.pop('VIRTUAL_ENV', None)
            driver = subprocess.Popen(
                [
                    py,
                    '-c',
                    DRIVER,
                    json.dumps(configs),
                    work / 'out.json',
                    release,
                    ENV_DIR,
                    work / 'site',
                    files['retail'],
                ],
                env=env,
                cwd=work,
                stdout=subprocess.DEVNULL,
                stderr=open(work / 'driver.log', 'w'),
            )
            # meanwhile, ours: the same tasks, scripts and models through `tbt evaluate`
            rows = run_tbt_evaluate(osrv.base_url, list(files.values()), work / 'eval-ours', 'scripted', 'rule')
            rows += run_tbt_evaluate(osrv.base_url, [tb_file], work / 'eval-tb', 'openai:user', 'openai:judge')
            rc = driver.wait(600)
            log = (work / 'driver.log').read_text()
            assert rc == 0, f'vf-eval failed ({rc}): {log[-4000:]}'
            out = json.loads((work / 'out.json').read_text())
            tiny_requests = [body for path, body in tiny.requests if path.endswith('/chat/completions')]
            down_requests = len(down.requests)
    queries = {t.uid: t.query.strip() for t in ours + tb}
    vf_traces = [t for name in ('ours', 'thinkingbox') for t in out['runs'][name]]
    return dict(
        out=out,
        tasks=ours + tb,
        scripts=scripts,
        log=log,
        tiny_requests=tiny_requests,
        down_requests=down_requests,
        ours={
            'requests': osrv.requests,
            'verdicts': {queries[r['task_uid']]: r['reward'] for r in rows},
            'ends': {queries[r['task_uid']]: r['termination'] for r in rows},
        },
        verifiers={
            'requests': vsrv.requests,
            'verdicts': {queries[t['key']]: _reward(t) for t in vf_traces},
            'ends': {queries[t['key']]: t['info'].get('tbt', {}).get('termination') for t in vf_traces},
        },
        traces=vf_traces,
    )


def _reward(trace: dict):
    "A trace's verdict: its `verdict` reward (None when the rollout erred, as a system error does)."
    r = trace['rewards'].get('verdict')
    return None if r is None else int(r['score'])


def test_the_environment_installs_with_pip_and_verifiers_loads_it(runs):
    "`pip install` of the folder, then verifiers' own loader finds its taskset, env and harness by the id."
    out = runs['out']
    assert out['pip'][0] == 0, out['pip'][1]
    assert '/site/tbt_tasks/' in out['installed_at']  # the pip-installed copy, not the checkout's folder
    assert out['classes'] == ['TbtEnv', 'TbtTaskset', 'tbt-tasks']
    # verifiers' `load_environment` builds it from a config naming the id: our env, our harness, the tasks named
    assert out['load_environment'] == ['TbtEnv', 'TbtHarness', sum(t.domain == 'retail' for t in runs['tasks'])]
    # a task that reaches a process as data only (an env server's) is loaded from its file at setup
    uid, got, n_tools, opening = out['shipped']
    task = next(t for t in runs['tasks'] if t.uid == uid)
    assert got == uid and n_tools > 3 and opening == task.query


def test_the_same_task_and_script_give_the_same_verdict_through_verifiers(runs):
    ours, vf = runs['ours'], runs['verifiers']
    by_domain = {}
    for t in runs['tasks']:
        by_domain[t.domain] = by_domain.get(t.domain, 0) + 1
    assert (
        by_domain['retail'] >= N_PER_DOMAIN
        and by_domain['travel'] >= N_PER_DOMAIN
        and by_domain['email_system_org'] == len(TB_SCRIPTS)
    )
    assert len(vf['verdicts']) == len(ours['verdicts']) == len(runs['tasks'])
    assert all(t['ok'] for t in runs['traces']), [t['errors'] for t in runs['traces'] if not t['ok']][:2]
    assert vf['verdicts'] == ours['verdicts']
    assert set(vf['verdicts'].values()) == {0, 1}  # both outcomes compared
    assert vf['ends'] == ours['ends']


def test_every_request_matches_tbt_evaluate_but_as_listed(runs):
    "Every request of the agent, the simulated user and the judge, field by field (the parity tests' comparison)."
    diffs = compare(
        *[{**r, 'requests': json_arguments(r['requests'])} for r in (runs['ours'], runs['verifiers'])], runs['scripts']
    )
    diffs.pop('end.reason', None)  # the ends are compared above, by their names
    unlisted = {k: v[:2] for k, v in diffs.items() if k not in DIFFERENCES}
    gone = sorted(set(DIFFERENCES) - set(diffs))
    assert not unlisted, f'differences from `tbt evaluate` that the list does not name: {unlisted}'
    assert not gone, f'listed differences that no longer occur (remove them from the list): {gone}'


def json_arguments(requests: list) -> list:
    "The records with each call's arguments as JSON text (a malformed call's raw text as a JSON string), for `compare`."
    import copy

    out = copy.deepcopy(requests)
    for q in out:
        for m in q['body'].get('messages') or []:
            for c in m.get('tool_calls') or []:
                try:
                    json.loads(c['function']['arguments'] or '{}')
                except ValueError:
                    c['function']['arguments'] = json.dumps(c['function']['arguments'])
    return out


def test_a_rollout_of_the_tiny_policy_through_verifiers(runs):
    "One rollout against our stand-in server answering with the tiny policy: verifiers records it and our verdict."
    [trace] = runs['out']['runs']['tiny']
    assert trace['ok'], trace['errors']
    assert trace['rewards']['verdict']['score'] in (0.0, 1.0)
    info = trace['info']['tbt']
    assert info['turns'] == len(runs['tiny_requests']) >= 1
    assert trace['nodes'] >= 2  # verifiers' interception recorded the conversation it relayed
    sent = runs['tiny_requests'][0]
    assert {t['function']['name'] for t in sent['tools']} >= {'get_order', 'find_customer_orders'}


def test_a_system_error_is_an_error_of_the_rollout_never_a_reward(runs):
    """The user's endpoint down: verifiers records the rollout's error, no reward at all (not 0), the trace not ok; a
    retry rule on the error's type runs the episode again."""
    [trace] = runs['out']['runs']['void']
    assert not trace['ok'] and trace['rewards'].get('verdict') is None
    assert trace['errors'][-1]['type'] == 'EpisodeSystemError'
    assert 'failed after 4 attempts' in trace['errors'][-1]['message'], trace['errors']
    assert trace['info']['tbt']['termination'] == 'system_error'
    # the retry rule on the error's type ran the episode once more (a fresh database, the user asked 4 times again)
    assert runs['down_requests'] == 2 * 4


def test_release_tasks_are_refused(runs):
    "The evaluation-only guard: a ThinkingBox release's tasks are refused by the taskset, naming task and clause."
    assert runs['out']['guard'] is not None
    assert (
        runs['out']['guard'].startswith('EvaluationOnly: task ')
        and 'may not be used for a verifiers environment' in (runs['out']['guard'])
    )


def test_hostile_calls_through_the_environment(runs):
    """The reliability suite's hostile-call fixture (tests/reliability/hostile_calls.py) played by one retail task
    through this environment before its expert path: failed calls the agent reads, never an error of the rollout, and
    the same verdict and requests as `tbt evaluate` (the tests above cover that task too)."""
    if not HOSTILE.exists():
        pytest.skip('tests/reliability/hostile_calls.py is not in this tree')
    uid = picked_hostile(runs['tasks'])
    [trace] = [t for t in runs['traces'] if t['key'] == uid]
    assert trace['ok'], trace['errors']
    info = trace['info']['tbt']
    assert info['malformed_calls'] + sum(m['role'] == 'tool' and 'rror' in m['content'] for m in info['messages']) > 0
