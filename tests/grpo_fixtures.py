"""Fixtures shared by tests/test_grpo.py and the two-process script tests/grpo_two_ranks.py: demo tasks, a crashing
domain, a tokenizer."""

import json, random
from thinkingbox_training.tasks import DOMAINS, Task, ToolCallSpec
from thinkingbox_training.interpret import make_tokenizer
from thinkingbox_training.episode import SYSTEM_PROMPT
from thinkingbox_training.backend import Domain
from thinkingbox_training.domains.demo import DemoBase, demo


def pay_task(i: int, family: str = 'pay') -> Task:
    "A demo task: pay 100*(i+1) cents from AC-1."
    amount = 100 * (i + 1)
    return Task(
        uid=f'demo/{family}/{i:04d}',
        domain='demo',
        family=family,
        split='train',
        query=f'Please pay {amount} cents from AC-1.',
        reply=f'Paid {amount} cents from AC-1.',
        golden=[ToolCallSpec(name='pay', arguments={'account_id': 'AC-1', 'amount_cents': amount})],
    )


def broken_domain() -> Domain:
    "The demo domain plus a lookup whose backend crashes (a system error on every call)."
    if 'broken' in DOMAINS:
        return DOMAINS['broken']
    d = Domain('broken', DemoBase, seed=demo.seed, policy='A domain whose lookup crashes.')
    d.tools.update(demo.tools)
    d._arg_models.update(demo._arg_models)

    @d.tool
    def crashing_lookup(ctx, account_id: str) -> dict:
        "A lookup whose backend crashes."
        raise ConnectionError('database connection lost')

    return d


def crash_task(i: int = 0) -> Task:
    "A task whose expert path calls the crashing lookup: every episode is a system error."
    broken_domain()
    return Task(
        uid=f'broken/lookup/{i:04d}',
        domain='broken',
        family='lookup',
        split='train',
        query='Look up AC-1.',
        reply='Done.',
        golden=[ToolCallSpec(name='crashing_lookup', arguments={'account_id': 'AC-1'})],
    )


def tokenizer():
    "A small BPE tokenizer in the Qwen3 chat format, trained on demo-domain text."
    rng = random.Random(0)
    calls = [
        f'<tool_call>\n{{"name": "pay", "arguments": '
        f'{{"account_id": "AC-{rng.randint(1, 9)}", "amount_cents": {rng.randint(1, 9999)}}}}}\n</tool_call>'
        for _ in range(200)
    ]
    texts = (
        [SYSTEM_PROMPT.format(domain='demo', policy=demo.policy)]
        + [json.dumps(t['function']) for t in demo.tool_specs()]
        + calls
        + [pay_task(i).query + ' ' + pay_task(i).reply for i in range(16)]
    )
    return make_tokenizer(texts, vocab_size=600)


def flaw_by_family(task) -> float:
    "Easy tasks never go wrong (all-pass groups), 'pay' tasks half the time."
    return {'easy': 0.0, 'hard': 1.0}.get(task.family, 0.5)


def sampled_logprobs(t, out: dict) -> tuple:
    "The recorded logprobs of a step's episodes, the trainer's recomputed ones, and the mask of the sampled tokens."
    import torch

    ids = torch.cat([out['prompt_ids'], out['completion_ids']], 1)
    att = torch.cat([out['prompt_mask'], out['completion_mask']], 1)
    with torch.no_grad():
        lp, _, _ = t._get_per_token_logps_and_entropies(t.model, ids, att, out['completion_ids'].size(1))
    return out['sampling_per_token_logps'], lp, (out['completion_mask'] * out['tool_mask']).bool()


TIMING = ('step_time', 'train_runtime', 'train_samples_per_second', 'train_steps_per_second')


def two_steps(out_dir, policy='scripted') -> dict:
    """Two steps of the tiny model at seed 0 (scripted expert erring half the time, 2 micro-batches a step; or the
    model sampling its own episodes), and what they leave: every logged number but timings, every step's record, the
    weights' sums. Stored in tests/grpo_two_steps.json:
    `python -c "import json,sys; sys.path.insert(0,'tests'); from grpo_fixtures import two_steps;
    json.dump({p: two_steps('/tmp/two', p) for p in ('scripted', 'self')}, open('tests/grpo_two_steps.json','w'))"`"""
    import os, warnings

    os.environ.setdefault('TRL_EXPERIMENTAL_SILENCE', '1')
    warnings.filterwarnings('ignore')
    from transformers import PrinterCallback
    from thinkingbox_training.grpo import TBTTrainer
    from thinkingbox_training.policies import ScriptedPolicy, tiny_qwen3

    tok = tokenizer()
    kw = dict(max_steps=2)
    if policy == 'scripted':
        kw['per_device_train_batch_size'] = 2
        pol = ScriptedPolicy(flaw=0.5, tokenizer=tok)
    else:
        kw.update(max_tokens_per_turn=12, max_turns=2, max_refill_rounds=1)
        pol = None
    t = TBTTrainer(
        tiny_qwen3(tok), cpu_config(out_dir, **kw), [pay_task(i) for i in range(8)], processing_class=tok, policy=pol
    )
    t.remove_callback(PrinterCallback)
    t.train()
    return json.loads(
        json.dumps(
            {
                'log_history': [{k: v for k, v in h.items() if k not in TIMING} for h in t.state.log_history],
                'step_log': t.step_log,
                'weights': {
                    'sum': sum(float(p.detach().double().sum()) for p in t.model.parameters()),
                    'abs': sum(float(p.detach().double().abs().sum()) for p in t.model.parameters()),
                },
            }
        )
    )


def cpu_config(out_dir, **kw):
    """A `TBTConfig` for a test's training run on a CPU: one step of 2 groups of 4, seed 0, no bf16, checkpointing,
    saving, trackers or progress bars; `kw` overrides any of it."""
    from thinkingbox_training.grpo import TBTConfig

    base = dict(
        output_dir=str(out_dir),
        groups_per_step=2,
        group_size=4,
        max_steps=1,
        max_refill_rounds=3,
        learning_rate=1e-3,
        seed=0,
        use_cpu=True,
        bf16=False,
        gradient_checkpointing=False,
        report_to='none',
        save_strategy='no',
        disable_tqdm=True,
    )
    return TBTConfig(**{**base, **kw})
