"""The instrument of tests/test_thinkingbox_parity.py: a recording OpenAI-compatible server that plays agent, simulated
user and judge with scripted answers, ThinkingBox's own harness (`tb infer` behind their session proxy) in a separate
cached environment, and our `tbt thinkingbox-bench`, both pointed at the server.

The server tells the three roles apart by the model name each harness is configured with (`agent`, `user`, `judge`)
and a task by its first user message. The agent's script, the same for both harnesses: ask the user a question, call
the task's first golden tool with one argument left out, call a tool that does not exist, make the golden calls one a
turn, then a final message ending in `<DONE>`. The user answers the question, and once the agent's last message ends in
`<DONE>` answers with our stop marker (unused now: both harnesses end on `<DONE>` before asking it). The judge answers
`Yes`."""

import json, os, shutil, socket, subprocess, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from venvs import cached_venv

ROOT = Path(__file__).parent.parent
PINS = ['fastmcp==3.4.11', 'mcp==1.30.0']  # runs both their harness and their servers (nbs/19_stack.ipynb)
SERVER_PACKAGES = ['servers/tb_business_ops_servers_202606', 'servers/thinkingbox_tools']
# two release tasks of every benchmark domain, both rubric variants among them, each with a short golden path
TASKS = [
    'sandbox_external_retail_group1.py:test_case_ST003_003',
    'sandbox_external_retail_group1.py:test_case_ST004_008',
    'external_booking_v1_group1.py:test_hdr_002',
    'external_booking_v1_group1_rubrics_yesno.py:test_gbi_002',
    'sandbox_auto_insurance_group1.py:test_ldr_008',
    'sandbox_auto_insurance_group1.py:test_bil_010',
    'sandbox_neobank_support_v1_group1.py:test_ei_012',
    'sandbox_neobank_support_v1_group1_rubrics_yesno.py:test_pi_007',
    'sandbox_consulting_group1.py:test_onb_014',
    'sandbox_consulting_group1.py:test_csa_004',
]
QUESTION = 'Before I start: could you confirm the email address on your account?'
USER_ANSWER = 'I would rather not repeat it; everything you need is in my first message. Please go ahead.'
FINAL = 'Everything you asked for is done. Thank you for contacting us. <DONE>'
UNKNOWN_TOOL = 'lookup_everything'
UNKNOWN_QUERY = '$60 × 0.5'  # not ASCII: the call's argument text is written as a model's server writes it (below)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def agent_script(golden: list) -> list:
    "The agent's turns for a task with these golden calls: (content, [(name, arguments)]) each."
    first = next((c for c in golden if c.arguments), golden[0])
    partial = dict(list(first.arguments.items())[1:])  # its first argument left out
    return (
        [(QUESTION, []), ('', [(first.name, partial)]), ('', [(UNKNOWN_TOOL, {'query': UNKNOWN_QUERY})])]
        + [('', [(c.name, c.arguments)]) for c in golden]
        + [(FINAL, [])]
    )


class RecordingServer:
    "A real HTTP `/v1/chat/completions` that answers by script and records every request with its role and task."

    def __init__(
        self,
        scripts: dict,  # first user message (stripped) -> agent_script(...)
        questions: dict = None,  # a rubric item's question -> the query of its task (for the judge)
        tokenizer=None,
    ):  # serves `/v1/completions` token-exact (an `endpoint:` agent) with it
        self.scripts, self.questions, self.requests, self.lock = scripts, questions or {}, [], threading.Lock()
        self.tok = tokenizer
        outer = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _send(self, code, obj):
                body = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header('Content-Type', 'application/json')
                self.send_header('Content-Length', str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                models = [{'id': m, 'object': 'model'} for m in ('agent', 'user', 'judge')]
                self._send(200, {'object': 'list', 'data': models})

            def do_POST(self):
                req = json.loads(self.rfile.read(int(self.headers.get('Content-Length', 0))) or b'{}')
                answer = outer.complete if self.path.endswith('/v1/completions') else outer.answer
                try:
                    code, obj = 200, answer(req)
                except Exception as e:
                    code, obj = 400, {'error': {'message': f'recording server: {e!r}'}}
                self._send(code, obj)

        self.httpd = ThreadingHTTPServer(('127.0.0.1', 0), H)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f'http://127.0.0.1:{self.httpd.server_address[1]}/v1'

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *a):
        self.httpd.shutdown()
        self.httpd.server_close()

    def complete(self, req: dict) -> dict:
        """An `endpoint:` agent's turn: the prompt's token ids decoded, the task found by its query and the turn by the
        assistant turns already in the prompt; the scripted answer in the chat format's own tool-call text, as ids."""
        text = self.tok.decode(req['prompt'], skip_special_tokens=False)
        hits = [q for q in self.scripts if q in text]
        if not hits:
            raise ValueError('no task query found in the prompt')
        query = max(hits, key=len)
        turn = text.count('<|im_start|>assistant') - 1
        script = self.scripts[query]
        content, calls = script[min(turn, len(script) - 1)]
        out = content + ''.join(
            f'<tool_call>\n{json.dumps({"name": n, "arguments": a}, ensure_ascii=False)}\n</tool_call>'
            for n, a in calls
        )
        ids = self.tok.encode(out, add_special_tokens=False) + [self.tok.convert_tokens_to_ids('<|im_end|>')]
        with self.lock:
            self.requests.append({'role': 'agent', 'task': query, 'body': {**req, 'prompt_text': text}})
        choice = {
            'index': 0,
            'text': self.tok.decode(ids, skip_special_tokens=False),
            'finish_reason': 'stop',
            'logprobs': None,
            'token_ids': ids,
            'prompt_token_ids': req['prompt'],
        }
        return {
            'id': 'rec',
            'object': 'text_completion',
            'created': 0,
            'model': req.get('model'),
            'choices': [choice],
            'usage': {
                'prompt_tokens': len(req['prompt']),
                'completion_tokens': len(ids),
                'total_tokens': len(req['prompt']) + len(ids),
            },
        }

    def task_of(self, req: dict) -> str:
        "The task whose query opens the conversation (agent, user), or whose rubric item is asked (judge)."
        text = json.dumps(req.get('messages'))
        if req.get('model') == 'judge':
            hits = [self.questions[q] for q in self.questions if json.dumps(q)[1:-1] in text]
            return max(hits, key=len) if hits else None
        hits = [q for q in self.scripts if json.dumps(q)[1:-1] in text]
        if not hits:
            raise ValueError('no task query found in the request')
        return max(hits, key=len)

    def answer(self, req: dict) -> dict:
        role, msgs = req.get('model'), req.get('messages') or []
        query = self.task_of(req)
        message, finish = {'role': 'assistant', 'content': ''}, 'stop'
        if role == 'agent':
            turn = sum(m.get('role') == 'assistant' for m in msgs)
            script = self.scripts[query]
            content, calls = script[min(turn, len(script) - 1)]
            message['content'] = content or None
            if calls:
                # ids of the server's own, and arguments as vLLM's tool parsers write them (characters unescaped)
                message['tool_calls'] = [
                    {
                        'id': f'call_{turn}_{i}',
                        'type': 'function',
                        'function': {'name': n, 'arguments': json.dumps(a, ensure_ascii=False)},
                    }
                    for i, (n, a) in enumerate(calls)
                ]
                finish = 'tool_calls'
        elif role == 'user':
            last = str(msgs[-1].get('content') if msgs else '')
            message['content'] = 'Thank you. ###STOP###' if FINAL in last else USER_ANSWER
        elif role == 'judge':
            message['content'] = 'Yes'
        else:
            raise ValueError(f'unknown model {role!r}: expected agent, user or judge')
        with self.lock:
            self.requests.append({'role': role, 'task': query, 'body': req})
        return {
            'id': 'rec',
            'object': 'chat.completion',
            'created': 0,
            'model': role,
            'choices': [{'index': 0, 'finish_reason': finish, 'message': message}],
            'usage': {'prompt_tokens': 1, 'completion_tokens': 1, 'total_tokens': 2},
        }


# ---- their harness, in its own environment ----


def their_python(data: Path, harness: Path) -> Path:
    """The Python of an environment holding their harness (installed) and their server packages (on its path, as their
    editable install puts them: the servers read data files beside their code), with the pins; built once, cached."""
    import tomllib

    deps = sorted(
        {
            d
            for p in SERVER_PACKAGES
            for d in tomllib.loads((data / p / 'pyproject.toml').read_text())['project']['dependencies']
        }
    )
    reqs = [*PINS, str(harness), *deps]
    paths = [str((data / p).resolve()) for p in SERVER_PACKAGES]

    def servers_on_path(py):
        site = subprocess.run(
            [py, '-c', 'import sysconfig; print(sysconfig.get_path("purelib"))'],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        (Path(site) / 'thinkingbox_servers.pth').write_text(''.join(f'{p}\n' for p in paths))

    return cached_venv('thinkingbox-venv', reqs, [paths, (harness / 'pyproject.toml').read_text()], servers_on_path)


def dataset_without_sources(data: Path, out: Path) -> Path:
    """A copy of their `dataset/` whose scenarios carry no knowledge-base `sources`: their session proxy indexes those
    into a Typesense server, which cannot run here (so their knowledge-base tools answer with an error)."""
    import yaml

    shutil.copytree(data / 'dataset', out)
    for f in (out / 'scenario').glob('*.yaml'):
        sc = yaml.safe_load(f.read_text())
        for conf in (sc.get('world_state') or {}).values():
            if isinstance(conf, dict):
                conf.pop('sources', None)
        f.write_text(yaml.safe_dump(sc, allow_unicode=True, sort_keys=False, width=10**9))
    return out


def harness_dir(data: Path) -> Path:
    "Their harness's checkout, found as `tbt thinkingbox-bench` finds it."
    from thinkingbox_training.thinkingbox import harness_dir as ours

    return ours(data)


def their_config(harness: Path, url: str, proxy_port: int) -> str:
    "Their `config/config_vllm.yaml` with every model at the recording server, each role under its own model name."
    import yaml

    cfg = yaml.safe_load((harness / 'config' / 'config_vllm.yaml').read_text())
    cfg['mcp_proxy']['endpoint_url'] = f'http://127.0.0.1:{proxy_port}'
    roles = [(('orchestrator', 'agent_model'), 'agent'), (('judge_model',), 'judge'), (('user_model',), 'user')]
    for key, name in roles:
        d = cfg
        for k in key:
            d = d[k]
        d['deployment'], d['endpoint_url'] = name, f'{url}/chat/completions'
    return yaml.safe_dump(cfg, sort_keys=False)


def run_theirs(py: Path, data: Path, url: str, work: Path, tasks=TASKS) -> list:
    "Their `tb infer` on `tasks` behind their session proxy, every model at `url`: the rows of its output JSONL."
    work.mkdir(parents=True, exist_ok=True)
    ds = dataset_without_sources(data, work / 'dataset')
    port = free_port()
    (work / 'config.yaml').write_text(their_config(harness_dir(data), url, port))
    (work / 'tests.yaml').write_text(''.join(f'- {t}\n' for t in tasks))
    env = {k: v for k, v in os.environ.items() if k not in ('PYTHONPATH', 'VIRTUAL_ENV')}
    env.update(THINKINGBOX_DATA=str(data), TYPESENSE_API_KEY='Fake', PATH=f'{py.parent}:{env.get("PATH", "")}')
    log = open(work / 'proxy.log', 'w')
    proxy = subprocess.Popen(
        [
            py,
            '-m',
            'thinkingbox.cli.main',
            'mcp-start',
            '--port',
            str(port),
            '--servers',
            str(data / 'servers' / 'servers.yaml'),
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=work,
    )
    try:
        t0 = time.time()
        while True:
            with socket.socket() as s:
                if s.connect_ex(('127.0.0.1', port)) == 0:
                    break
            if proxy.poll() is not None or time.time() - t0 > 120:
                raise RuntimeError(f'their session proxy did not start: {(work / "proxy.log").read_text()[-2000:]}')
            time.sleep(0.2)
        r = subprocess.run(
            [
                py,
                '-m',
                'thinkingbox.cli.main',
                'infer',
                '-c',
                str(work / 'config.yaml'),
                '--dataset',
                str(ds),
                '--agent',
                'think',
                '--test-list',
                str(work / 'tests.yaml'),
                '--batch-size',
                '5',
                '--output',
                str(work / 'out.jsonl'),
            ],
            env=env,
            cwd=work,
            capture_output=True,
            text=True,
            timeout=900,
        )
        (work / 'infer.log').write_text(r.stdout + r.stderr)
        if r.returncode:
            raise RuntimeError(f'tb infer failed ({r.returncode}): {(r.stdout + r.stderr)[-3000:]}')
    finally:
        proxy.terminate()
        try:
            proxy.wait(30)
        except subprocess.TimeoutExpired:
            proxy.kill()
        log.close()
    return [json.loads(line) for line in (work / 'out.jsonl').read_text().splitlines() if line.strip()]


# ---- our harness ----


def run_ours(data: Path, url: str, work: Path, policy: str = 'chat:agent', tasks=TASKS, tokenizer: str = None) -> list:
    """Our `tbt thinkingbox-bench` on `tasks` (one attempt each) with `policy`, user `openai:user` and judge
    `openai:judge`, every model at `url`: the campaign's attempt rows."""
    from thinkingbox_training.thinkingbox import thinkingbox_bench

    work.mkdir(parents=True, exist_ok=True)
    (work / 'tests.yaml').write_text(''.join(f'- {t}\n' for t in tasks))
    keys = ['TBT_POLICY_BASE_URL', 'TBT_USER_BASE_URL', 'TBT_JUDGE_BASE_URL', 'TBT_POLICY_TOKENIZER']
    saved = {k: os.environ.get(k) for k in keys}
    os.environ.update(TBT_POLICY_BASE_URL=url, TBT_USER_BASE_URL=url, TBT_JUDGE_BASE_URL=url)
    if tokenizer:
        os.environ['TBT_POLICY_TOKENIZER'] = tokenizer
    try:
        rc = thinkingbox_bench(
            release=str(work / 'tests.yaml'),
            policy=policy,
            k=1,
            out=str(work / 'campaign'),
            user='openai:user',
            judge='openai:judge',
            data=str(data),
            quiet=True,
        )
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    if rc:
        raise RuntimeError(f'tbt thinkingbox-bench {policy} exited {rc}')
    return [json.loads(line) for line in (work / 'campaign' / 'attempts.jsonl').read_text().splitlines() if line]


# ---- the comparison ----

SAMPLING_SKIP = ('messages', 'tools', 'model')


def _by_task(requests: list, role: str) -> dict:
    out = {}
    for q in requests:
        if q['role'] == role:
            out.setdefault(q['task'], []).append(q['body'])
    return out


def _schema_diffs(a, b, path=()):
    "Where two JSON schemas differ: the key under which each difference sits."
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                yield k
            else:
                yield from _schema_diffs(a[k], b[k], path + (k,))
    elif a != b:
        yield path[-1] if path else 'root'


def _calls(m: dict) -> list:
    return [(c['function']['name'], json.loads(c['function']['arguments'] or '{}')) for c in m.get('tool_calls') or []]


def _sampling(role: str, theirs: dict, ours: dict, add):
    for k in sorted(set(theirs) | set(ours)):
        if k in SAMPLING_SKIP:
            continue
        if theirs.get(k) != ours.get(k):
            add(f'{role}.sampling.{k}', f'theirs {theirs.get(k)!r}, ours {ours.get(k)!r}')


def compare(theirs: dict, ours: dict, scripts: dict, kb_tools=lambda name: name.startswith('knowledge_base')) -> dict:
    """Every difference between two recorded runs on the same tasks: {field: [(task query's first 40 characters,
    detail)]}. `theirs`/`ours`: {'requests': the server's records, 'verdicts': {query: pass}, 'ends': {query: why}}."""
    diffs = {}
    for query, script in scripts.items():
        tag = query[:40]

        def add(key, detail='', tag=tag):
            diffs.setdefault(key, []).append((tag, detail[:300]))

        ta, oa = (_by_task(x['requests'], 'agent').get(query, []) for x in (theirs, ours))
        if not ta or not oa:
            add('agent.requests', f'theirs {len(ta)}, ours {len(oa)} requests')
            continue
        t0, o0 = ta[0], oa[0]
        sys_t = [m['content'] for m in t0['messages'] if m['role'] == 'system']
        sys_o = [m['content'] for m in o0['messages'] if m['role'] == 'system']
        if len(sys_t) != len(sys_o):
            add('agent.system.count', f'theirs {len(sys_t)}, ours {len(sys_o)}')
        if sys_t != sys_o:
            add('agent.system.text', f'theirs {[len(s) for s in sys_t]}, ours {[len(s) for s in sys_o]} characters')
        ut = next(m['content'] for m in t0['messages'] if m['role'] == 'user')
        uo = next(m['content'] for m in o0['messages'] if m['role'] == 'user')
        if ut != uo:
            add('agent.first_user_message', f'theirs ends {ut[-10:]!r}, ours {uo[-10:]!r}')
        tt = {t['function']['name']: t['function'] for t in t0.get('tools') or []}
        to = {t['function']['name']: t['function'] for t in o0.get('tools') or []}
        if set(tt) - set(to):
            add('agent.tools.only_theirs', ', '.join(sorted(set(tt) - set(to))))
        if set(to) - set(tt):
            add('agent.tools.only_ours', ', '.join(sorted(set(to) - set(tt))))
        common_t, common_o = [n for n in tt if n in to], [n for n in to if n in tt]
        if common_t != common_o:
            add('agent.tools.order', f'{sum(a != b for a, b in zip(common_t, common_o))} of {len(common_t)} positions')
        for n in common_t:
            if tt[n].get('description') != to[n].get('description'):
                add('agent.tools.description', n)
            for k in sorted(set(_schema_diffs(tt[n].get('parameters'), to[n].get('parameters')))):
                add(f'agent.tools.schema.{k if k in ("additionalProperties", "required") else "other"}', n)
        for i, (t, o) in enumerate(zip(ta, oa)):
            _sampling('agent', t, o, add)
            if set(json.dumps(x.get('tools')) for x in (t, t0)) != {json.dumps(t0.get('tools'))}:
                add('agent.tools.changed_in_episode', f'turn {i}')
        # the conversation after the first user message, at each harness's last agent request
        conv_t = [m for m in ta[-1]['messages'] if m['role'] != 'system'][1:]
        conv_o = [m for m in oa[-1]['messages'] if m['role'] != 'system'][1:]
        if len(conv_t) != len(conv_o):
            add('agent.messages.count', f'theirs {len(conv_t)}, ours {len(conv_o)}')
        step = -1
        for mt, mo in zip(conv_t, conv_o):
            if mt['role'] != mo['role']:
                add('agent.messages.role', f'{mt["role"]} / {mo["role"]}')
                break
            if json.dumps(mt, sort_keys=True) != json.dumps(
                mo, sort_keys=True
            ):  # the bytes each sends, key order aside
                keys = sorted(k for k in set(mt) | set(mo) if json.dumps(mt.get(k)) != json.dumps(mo.get(k)))
                add('agent.messages.bytes', f'{mt["role"]} at step {step + (mt["role"] == "assistant")}: {keys}')
            if mt['role'] == 'assistant':
                step += 1
                ct, co = mt.get('tool_calls') or [], mo.get('tool_calls') or []
                if [c['function']['arguments'] for c in ct] != [c['function']['arguments'] for c in co]:
                    args = [[c['function']['arguments'] for c in x] for x in (ct, co)]
                    add('agent.messages.arguments_text', f'step {step}: theirs {args[0]}, ours {args[1]}')
                if [c.get('id') for c in ct] != [c.get('id') for c in co]:
                    ids = [[c.get('id') for c in x] for x in (ct, co)]
                    add('agent.messages.tool_call_id', f'step {step}: theirs {ids[0]}, ours {ids[1]}')
                if (mt.get('content') or '') != (mo.get('content') or '') or _calls(mt) != _calls(mo):
                    add('agent.messages.assistant', f'step {step}')
                if bool(mt.get('reasoning_content')) != bool(mo.get('reasoning_content')):
                    add('agent.messages.reasoning', f'step {step}')
            elif mt['role'] == 'tool':
                if mt['content'] != mo['content']:
                    name = (script[step][1] or [('',)])[0][0] if step < len(script) else ''
                    kind = (
                        'missing_argument'
                        if step == 1
                        else 'unknown_tool'
                        if step == 2
                        else 'knowledge_base'
                        if kb_tools(name)
                        else 'golden'
                    )
                    add(f'agent.tool_result.{kind}', f'theirs {mt["content"][:100]!r}, ours {mo["content"][:100]!r}')
            elif (mt.get('content') or '') != (mo.get('content') or ''):
                add(f'agent.messages.{mt["role"]}', f'step {step}')
        if len(ta) != len(oa):
            add('end.agent_requests', f'theirs {len(ta)}, ours {len(oa)}')
        # the simulated user
        tu, ou = (_by_task(x['requests'], 'user').get(query, []) for x in (theirs, ours))
        if len(tu) != len(ou):
            add('end.user_requests', f'theirs {len(tu)}, ours {len(ou)}')
        if any('<tool_call>' in json.dumps(b['messages']) for b in ou) != any(
            '<tool_call>' in json.dumps(b['messages']) for b in tu
        ):
            add('user.messages.tool_call_text', "the text of the agent's tool calls reaches one harness's user")
        for t, o in zip(tu, ou):
            st = [m['content'] for m in t['messages'] if m['role'] == 'system']
            so = [m['content'] for m in o['messages'] if m['role'] == 'system']
            if st != so:
                add('user.system', f'theirs {[len(s) for s in st]}, ours {[len(s) for s in so]} chars')
            rt = [m for m in t['messages'] if m['role'] != 'system']
            ro = [m for m in o['messages'] if m['role'] != 'system']
            if rt != ro:
                add('user.messages', f'theirs {len(rt)} message(s), ours {len(ro)}')
            _sampling('user', t, o, add)
        # the judge
        tj, oj = (_by_task(x['requests'], 'judge').get(query, []) for x in (theirs, ours))
        if len(tj) != len(oj):
            add('judge.requests', f'theirs {len(tj)}, ours {len(oj)}')
        for t, o in zip(sorted(tj, key=json.dumps), sorted(oj, key=json.dumps)):
            if t['messages'] != o['messages']:
                roles = [[m['role'] for m in x['messages']] for x in (t, o)]
                add('judge.messages', f'theirs {roles[0]}, ours {roles[1]}')
            _sampling('judge', t, o, add)
        if theirs['verdicts'].get(query) != ours['verdicts'].get(query):
            add('verdict', f'theirs {theirs["verdicts"].get(query)}, ours {ours["verdicts"].get(query)}')
        if (theirs['ends'].get(query), ours['ends'].get(query)) not in END_EQUIVALENT:
            add('end.reason', f'theirs {theirs["ends"].get(query)!r}, ours {ours["ends"].get(query)!r}')
    return diffs


END_EQUIVALENT = {('done', 'agent_done'), ('user_limit', 'max_user_turns'), ('agent_limit', 'max_turns')}


def theirs_summary(rows: list, requests: list, queries: dict) -> dict:
    "Their run as `compare` reads it (`queries`: task uid -> query)."
    return {
        'requests': requests,
        'verdicts': {queries[r['uid']].strip(): bool((r['test_result'] or {}).get('result')) for r in rows},
        'ends': {queries[r['uid']].strip(): r['finish_reason'] for r in rows},
    }


def ours_summary(rows: list, requests: list, queries: dict) -> dict:
    "Our run as `compare` reads it."
    return {
        'requests': requests,
        'verdicts': {queries[r['task_uid']].strip(): r['reward'] == 1 for r in rows},
        'ends': {queries[r['task_uid']].strip(): r['termination'] for r in rows},
    }


def endpoint_tokenizer(texts: list, out: Path) -> str:
    "A small byte-level BPE tokenizer in Qwen3's chat format, trained on `texts` and saved for an `endpoint:` agent."
    from thinkingbox_training.interpret import make_tokenizer

    tok = make_tokenizer(texts, vocab_size=4096)
    tok.save_pretrained(out)
    return str(out)


def endpoint_as_chat(endpoint: list, chat: list, tok) -> tuple:
    """An `endpoint:` run's records with each agent prompt replaced by the `chat:` run's request at the same task and
    turn (its messages and tools; the completion's own sampling parameters kept), after checking that the prompt is
    exactly that request rendered by our chat template. Returns (records, the prompts that differ)."""
    from thinkingbox_training.policies import ChatFormat

    fmt, out, differ = ChatFormat(tok), [], []
    chats = _by_task(chat, 'agent')
    for q in endpoint:
        if q['role'] != 'agent':
            out.append(q)
            continue
        body = q['body']
        turn = body['prompt_text'].count('<|im_start|>assistant') - 1
        c = chats.get(q['task'], [])
        if turn >= len(c):
            differ.append((q['task'][:40], turn, 'no chat request at this turn'))
            continue
        rendered = tok.decode(fmt.prompt_ids(c[turn]['messages'], c[turn].get('tools')), skip_special_tokens=False)
        if rendered != body['prompt_text']:
            differ.append((q['task'][:40], turn, 'the prompt differs'))
        sampling = {k: v for k, v in body.items() if k not in ('prompt', 'prompt_text')}
        out.append({**q, 'body': {**sampling, 'messages': c[turn]['messages'], 'tools': c[turn].get('tools')}})
    return out, differ
