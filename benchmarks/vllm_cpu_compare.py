"""Tokens per second of our sampler (`HFPolicy.sample`) against vLLM on a CPU, same model, same prompts.

    OMP_NUM_THREADS=1 python benchmarks/vllm_cpu_compare.py [--model data/models/tiny-qwen3] [--n 8,32,64]
        [--max-tokens 96] [--vllm-python /path/to/venv/bin/python]

The prompts are first turns of bench tasks (system turn with the domain's policy and tools, then the user's query),
rendered by our `ChatFormat`, and go to both as token ids. Each side samples at temperature 1 up to --max-tokens
tokens a sequence (ending at <|im_end|> as in an episode), N sequences at once, for each N: sampled tokens / wall
seconds, after one warm-up batch. Ours runs in this process with one torch thread; vLLM runs in its own Python
(`--vllm-python` or $VLLM_PYTHON: a separate environment with `vllm-cpu`, see benchmarks/vllm_cpu.md; never the
project's .venv) in a child process, with its offline `LLM` engine, float32 and VLLM_CPU_KVCACHE_SPACE=1. When no
vLLM is importable the script says so and prints ours alone.
The last lines are `ours_tok_s_<N>=`, and with vLLM `vllm_tok_s_<N>=` and `ours_vs_vllm_<N>=` (goal: >= 0.5 at 32).
"""

import argparse, json, os, subprocess, sys, tempfile, time

os.environ.setdefault('OMP_NUM_THREADS', '1')
import torch

torch.set_num_threads(int(os.environ['OMP_NUM_THREADS']))
from thinkingbox_training.episode import SYSTEM_PROMPT
from thinkingbox_training.policies import HFPolicy, SamplingConfig
from thinkingbox_training.tasks import generate_tasks, get_domain

VLLM_SIDE = r"""
import json, os, sys, time
os.environ.setdefault('VLLM_CPU_KVCACHE_SPACE', '1')
from vllm import LLM, SamplingParams
from vllm.inputs import TokensPrompt
a = json.load(open(sys.argv[1]))
llm = LLM(model=a['model'], dtype='float32', max_model_len=a['max_model_len'], seed=0)
out = {}
for n in a['n']:
    ps = [TokensPrompt(prompt_token_ids=a['prompts'][i % len(a['prompts'])]) for i in range(n)]
    sp = [SamplingParams(temperature=1.0, max_tokens=a['max_tokens'], seed=i, stop_token_ids=[a['eos']])
          for i in range(n)]
    llm.generate(ps, sp, use_tqdm=False)  # warm-up
    t0 = time.perf_counter()
    res = llm.generate(ps, sp, use_tqdm=False)
    dt = time.perf_counter() - t0
    out[n] = (sum(len(r.outputs[0].token_ids) for r in res), dt)
print('RESULT ' + json.dumps(out))
"""


def prompts(pol, n):
    out = []
    for d in ('travel', 'retail'):
        dom = get_domain(d)
        for t in generate_tasks(d, 'bench', seed=11, n=1)[: n // 2]:
            msgs = [
                {'role': 'system', 'content': SYSTEM_PROMPT.format(domain=dom.name, policy=dom.policy)},
                {'role': 'user', 'content': t.query},
            ]
            out.append(pol.fmt.prompt_ids(msgs, dom.tool_specs()))
    return out


def find_vllm(given):
    "A Python that imports vllm: --vllm-python, $VLLM_PYTHON, or this one; (python, why not) otherwise None."
    for py in [given, os.environ.get('VLLM_PYTHON'), sys.executable]:
        if not py:
            continue
        r = subprocess.run([py, '-c', 'import vllm'], capture_output=True, text=True)
        if r.returncode == 0:
            return py, None
        last = (r.stderr.strip().splitlines() or ['?'])[-1]
    return None, last


if __name__ == '__main__':
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--model', default='data/models/tiny-qwen3')
    ap.add_argument('--n', default='8,32,64')
    ap.add_argument('--max-tokens', type=int, default=96)
    ap.add_argument('--vllm-python', default=None)
    a = ap.parse_args()
    ns = [int(x) for x in a.n.split(',')]
    pol = HFPolicy(a.model, sampling=SamplingConfig(temperature=1.0, max_tokens=a.max_tokens, seed=0))
    ps = prompts(pol, 16)
    print(f'{len(ps)} distinct first-turn prompts of {min(map(len, ps))}-{max(map(len, ps))} tokens, model {a.model}')
    ours = {}
    for n in ns:
        batch = [ps[i % len(ps)] for i in range(n)]
        pol.sample(batch, list(range(n)))  # warm-up (and the shared system turns' caches, as in a campaign)
        t0, c0 = time.perf_counter(), time.process_time()
        gs = pol.sample(batch, [1000 + i for i in range(n)])
        dt, dc = time.perf_counter() - t0, time.process_time() - c0
        toks = sum(len(g.token_ids) for g in gs)
        ours[n] = toks / dt
        print(f'  ours  N={n:3}: {toks:5} tokens in {dt:6.2f} s = {ours[n]:7.0f} tok/s ({toks / dc:7.0f} per CPU s)')
    py, why = find_vllm(a.vllm_python)
    theirs = {}
    if py is None:
        print(f'vllm is not importable here ({why}): ours alone (install: benchmarks/vllm_cpu.md, then --vllm-python)')
    else:
        spec = dict(model=a.model, n=ns, prompts=ps, max_tokens=a.max_tokens, eos=pol.fmt.eos_id, max_model_len=4096)
        with tempfile.NamedTemporaryFile('w', suffix='.json', delete=False) as f:
            json.dump(spec, f)
        env = {**os.environ, 'OMP_NUM_THREADS': os.environ['OMP_NUM_THREADS']}
        r = subprocess.run([py, '-c', VLLM_SIDE, f.name], capture_output=True, text=True, env=env)
        line = next((x for x in r.stdout.splitlines() if x.startswith('RESULT ')), None)
        if line is None:
            print(f'vllm failed (exit {r.returncode}): {r.stderr.strip()[-2000:]}')
        else:
            for n, (toks, dt) in json.loads(line[7:]).items():
                theirs[int(n)] = toks / dt
                print(f'  vllm  N={int(n):3}: {toks:5} tokens in {dt:6.2f} s = {theirs[int(n)]:7.0f} tok/s')
    for n in ns:
        print(f'ours_tok_s_{n}={ours[n]:.0f}')
    for n in theirs:
        print(f'vllm_tok_s_{n}={theirs[n]:.0f}\nours_vs_vllm_{n}={ours[n] / theirs[n]:.2f}')
