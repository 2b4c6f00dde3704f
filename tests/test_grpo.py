"""The GRPO trainer: config arithmetic, TRL's rollout_func contract, dynamic sampling, masks, skipped steps, logprobs,
main, two processes."""

import json, os, socket, subprocess, sys, warnings
from pathlib import Path
import pytest, torch

os.environ.setdefault('TRL_EXPERIMENTAL_SILENCE', '1')
warnings.filterwarnings('ignore', message='.*use_cache=True.*')
from transformers import PrinterCallback, TrainerCallback
import trl
from trl import GRPOConfig, GRPOTrainer, TrlParser
from thinkingbox_training.grpo import (
    TBTConfig,
    TBTTrainer,
    batch_plan,
    check_rollout_contract,
    check_sampling,
    dynamic_sample,
    load_pool,
    main,
    prompt_task_uid,
    sampling_config,
    task_dataset,
    task_prompt,
)
from thinkingbox_training.policies import SamplingConfig, ScriptedPolicy, tiny_qwen3
from thinkingbox_training.tasks import BenchmarkOverlap, write_tasks
from grpo_fixtures import pay_task, crash_task, tokenizer, flaw_by_family, sampled_logprobs, cpu_config

HERE = Path(__file__).parent
TOK = tokenizer()
TASKS = [pay_task(i) for i in range(8)]


def cfg(tmp_path, **kw):
    return cpu_config(tmp_path / 'out', **kw)


def trainer(tmp_path, pool=TASKS, policy='canned', model=None, callbacks=None, train_dataset=None, **kw):
    pol = ScriptedPolicy(flaw=0.5, tokenizer=TOK) if policy == 'canned' else policy
    t = TBTTrainer(
        model or tiny_qwen3(TOK),
        cfg(tmp_path, **kw),
        pool,
        processing_class=TOK,
        policy=pol,
        callbacks=callbacks,
        train_dataset=train_dataset,
    )
    t.remove_callback(PrinterCallback)
    return t


# ---------------------------------------------------------------- configuration


def test_config_derives_the_batch_and_spells_out_the_reference_defaults(tmp_path):
    c = cfg(tmp_path, groups_per_step=3, group_size=4, per_device_train_batch_size=3)
    assert (c.num_generations, c.gradient_accumulation_steps, c.steps_per_generation, c.generation_batch_size) == (
        4,
        4,
        4,
        12,
    )
    reference = (
        c.scale_rewards,
        c.epsilon,
        c.weight_decay,
        c.max_grad_norm,
        c.lr_scheduler_type,
        c.loss_type,
        c.beta,
        c.num_iterations,
    )
    assert reference == ('group', 0.2, 0.0, 1.0, 'constant', 'dapo', 0.0, 1)
    assert c.max_completion_length == c.max_episode_tokens
    with pytest.raises(ValueError, match='choose one of'):
        cfg(tmp_path, groups_per_step=3, group_size=4, per_device_train_batch_size=5)
    with pytest.raises(ValueError, match='contradicts group_size'):
        cfg(tmp_path, num_generations=8)
    with pytest.raises(ValueError, match='num_iterations must be 1'):
        cfg(tmp_path, num_iterations=2)
    with pytest.raises(ValueError, match='launched with 1 process'):
        cfg(tmp_path, num_processes=2)
    ref = cfg(tmp_path, groups_per_step=18, group_size=8, num_processes=24, per_device_train_batch_size=3, dry_run=True)
    assert (ref.plan.episodes_per_process, ref.gradient_accumulation_steps, ref.steps_per_generation) == (6, 2, 2)
    assert batch_plan(18, 8, 24).per_device_train_batch_size == 6


def test_config_reads_yaml_with_trl_parser(tmp_path):
    args = [
        '--config',
        str(HERE / 'grpo_tiny.yaml'),
        '--output_dir',
        str(tmp_path),
        '--group_size',
        '2',
        '--user',
        'openai:stand-in',
    ]
    (c,) = TrlParser([TBTConfig]).parse_args_and_config(args)
    assert (c.groups_per_step, c.group_size, c.max_turns, c.user, c.learning_rate) == (2, 2, 4, 'openai:stand-in', 1e-5)
    assert c.task_files == ['tasks.jsonl'] and c.gradient_accumulation_steps == 2 and c.per_device_train_batch_size == 2


def test_sampling_is_derived_from_the_training_config_and_checked(tmp_path):
    # top-k is corrected on the vLLM path only
    c = cfg(tmp_path, temperature=0.7, top_k=5, max_tokens_per_turn=32, use_vllm=True)
    s = sampling_config(c)
    assert (s.temperature, s.top_p, s.top_k, s.max_tokens, s.seed) == (0.7, 1.0, 5, 32, 0)
    check_sampling(c, s)
    with pytest.raises(ValueError, match='max_tokens: policy 256, config 32'):
        check_sampling(c, SamplingConfig(temperature=0.7, top_k=5))
    with pytest.raises(ValueError, match='repetition_penalty'):
        check_sampling(cfg(tmp_path, repetition_penalty=1.1), sampling_config(c))

    class Fixed(ScriptedPolicy):
        sampling = SamplingConfig(temperature=0.6)

    with pytest.raises(ValueError, match='temperature'):
        trainer(tmp_path, policy=Fixed(tokenizer=TOK))


# ---------------------------------------------------------------- TRL's rollout_func contract


def test_trl_rollout_func_contract(tmp_path):
    """TRL gives rollout_func each process's whole generation batch, every prompt already repeated num_generations
    times (measured on 1.16; 1.15's rollout_func call sites are line for line the same)."""
    assert trl.__version__ in ('1.15.0', '1.16.0'), (
        'rollout_func is experimental: re-check this contract before moving TRL'
    )
    seen = []

    def rollout(prompts, trainer):
        seen.append(list(prompts))
        n = len(prompts)
        return {
            'prompt_ids': [[5, 6]] * n,
            'completion_ids': [[7, TOK.eos_token_id]] * n,
            'logprobs': [[0.0, 0.0]] * n,
            'r': [float(i % 2) for i in range(n)],
        }

    args = GRPOConfig(
        output_dir=str(tmp_path),
        num_generations=2,
        per_device_train_batch_size=2,
        gradient_accumulation_steps=3,
        max_steps=2,
        use_cpu=True,
        bf16=False,
        report_to='none',
        save_strategy='no',
        gradient_checkpointing=False,
        disable_tqdm=True,
    )
    ds = task_dataset(TASKS)
    t = GRPOTrainer(
        tiny_qwen3(TOK),
        lambda prompts, completions, r, **kw: r,
        args=args,
        train_dataset=ds,
        processing_class=TOK,
        rollout_func=rollout,
    )
    t.remove_callback(PrinterCallback)
    t.train()
    assert len(seen) == 2  # once per optimizer step, not per micro-step
    for prompts in seen:
        assert len(prompts) == 6  # per_device_train_batch_size x steps_per_generation
        assert prompts[0::2] == prompts[1::2]  # already repeated num_generations times, in a row
        assert len(set(prompts)) == 3 and all(prompt_task_uid(p) in {t.uid for t in TASKS} for p in prompts)
        check_rollout_contract(prompts, 2, n_groups=3)
    with pytest.raises(RuntimeError, match='contract changed'):
        check_rollout_contract(sorted(set(seen[0])), 2)


def test_prompts_name_their_task():
    ds = task_dataset(TASKS[:2])
    assert ds[0] == {'prompt': 'task: demo/pay/0000', 'task_uid': 'demo/pay/0000'}
    assert prompt_task_uid(task_prompt('travel/x/train-0-0001')) == 'travel/x/train-0-0001'
    with pytest.raises(ValueError, match='must name its task'):
        prompt_task_uid('Please pay.')


# ---------------------------------------------------------------- dynamic sampling (pure)


def test_dynamic_sample_refills_and_fills_the_shortfall_with_masked_groups():
    asked, rounds = [], []

    def refill(k, need):
        rounds.append((k, need))
        return [[1, 1]] * need  # the pool only has all-pass tasks

    s = dynamic_sample([[0, 1], [None, 1], [0, 0]], refill, 3, max_rounds=2, agree=lambda go: asked.append(go) or go)
    assert rounds == [(1, 2), (2, 2)] and asked == [True, True, False]  # the last "stop" is agreed too
    assert s.selected == [0] and s.short == 2
    assert s.fillers == [2, 3]  # zero-variance fillers before system-error ones
    s = dynamic_sample([[None, 1], [0, 0]], lambda k, need: [], 2, max_rounds=1)
    assert s.selected == [] and s.fillers == [1, 0]
    s = dynamic_sample([[0, 1], [1, 0]], lambda k, need: 1 / 0, 2, max_rounds=5)  # nothing to replace: no refill
    assert (s.selected, s.fillers, s.refill_rounds) == ([0, 1], [], 0)


# ---------------------------------------------------------------- the mechanisms in the trainer


def test_zero_variance_groups_are_replaced(tmp_path):
    pool = [pay_task(i, 'easy') for i in range(4)] + [pay_task(i) for i in range(4)]
    # the steps' own tasks are all easy: every first group is all-pass
    t = trainer(
        tmp_path,
        pool=pool,
        policy=ScriptedPolicy(flaw=flaw_by_family, tokenizer=TOK),
        max_steps=2,
        max_refill_rounds=6,
        train_dataset=task_dataset(pool[:4]),
    )
    t.train()
    for rec in t.step_log:
        first = [k for k, r in zip(rec['kinds'], rec['rounds']) if r == 0]
        assert first == ['zero_variance'] * 2
        assert len(rec['selected']) == 2 and not rec['fillers'] and not rec['skipped']
        assert all(rec['kinds'][i] == 'useful' and rec['rounds'][i] > 0 for i in rec['selected'])
        chosen = {rec['groups'][i][0][0] for i in rec['selected']}
        assert all(u.startswith('demo/pay/') for u in chosen)
    logs = [h for h in t.state.log_history if 'loss' in h]
    assert [h['tbt/zero_variance_share'] for h in logs] == [1.0, 1.0]
    assert all(h['tbt/groups_refilled'] >= 2 for h in logs)
    assert all(r.uid.startswith('demo/pay/') and not r.filler for r in t.last_batch)


def test_system_error_groups_are_refilled(tmp_path):
    pool = [crash_task(0), crash_task(1)] + [pay_task(i) for i in range(4)]
    t = trainer(tmp_path, pool=pool, train_dataset=task_dataset(pool[:2]), max_refill_rounds=4)
    t.train()
    rec = t.step_log[0]
    assert rec['kinds'][:2] == ['system_error'] * 2
    assert all(all(rw is None for _, _, rw in g) for g in rec['groups'][:2])  # voided, never scored as 0
    assert len(rec['selected']) == 2 and all(rec['rounds'][i] > 0 for i in rec['selected'])
    log = t.state.log_history[0]
    assert log['tbt/system_errors'] == 8 and log['tbt/system_error_groups'] == 2 and log['tbt/groups_short'] == 0
    assert not any(r.reward is None for r in t.last_batch)


def capture(t) -> list:
    "Keep what TRL computed for each step of `t`: the rollouts and TRL's tensors (advantages, masks, token count)."
    seen, orig = [], t._generate_and_score_completions

    def gen(inputs):
        out = orig(inputs)
        seen.append((list(t.last_batch), out))
        return out

    t._generate_and_score_completions = gen
    return seen


def test_bound_hit_trains_on_fewer_groups_with_fillers_masked(tmp_path, caplog):
    pool = [pay_task(0, 'easy'), pay_task(1, 'easy'), pay_task(0, 'hard'), pay_task(0)]
    # round 0: the two easy tasks (all pass); the one refill round allowed: the hard task (all fail) and a mixed one
    t = trainer(
        tmp_path,
        pool=pool,
        policy=ScriptedPolicy(flaw=flaw_by_family, tokenizer=TOK),
        groups_per_step=2,
        max_refill_rounds=1,
        train_dataset=task_dataset(pool[:2]),
    )
    cap = capture(t)
    with caplog.at_level('WARNING', logger='thinkingbox_training.grpo'):
        t.train()
    rec = t.step_log[0]
    assert len(rec['selected']) == 1 and len(rec['fillers']) == 1 and not rec['skipped']
    assert any('training on 1, 1 filler group(s) masked out' in m for m in caplog.messages)
    rows, out = cap[0]
    filler = torch.tensor([r.filler for r in rows])
    loss_mask = out['completion_mask'] * out['tool_mask']
    assert filler.sum() == 4 and (out['advantages'][filler] == 0).all() and (loss_mask[filler].sum(1) == 0).all()
    assert (out['advantages'][~filler] != 0).all()
    # the token mean's denominator
    assert int(out['num_items_in_batch']) == sum(sum(r.env_mask) for r in rows if not r.filler)
    assert t.state.log_history[0]['tbt/groups_short'] == 1


def test_only_sampled_tokens_carry_loss(tmp_path):
    t = trainer(tmp_path, max_refill_rounds=0)
    cap = capture(t)
    t.train()
    rows, out = cap[0]
    loss_mask = (out['completion_mask'] * out['tool_mask']).tolist()
    for r, lm in zip(rows, loss_mask):
        n = len(r.completion_ids)
        assert lm[:n] == ([0] * n if r.filler else r.env_mask) and sum(lm[n:]) == 0
        if not r.filler:
            assert r.completion_ids[-1] == TOK.convert_tokens_to_ids('<|im_end|>') and r.env_mask[-1] == 1
    with_tools = [r for r in rows if 0 in r.env_mask]
    assert with_tools, 'expected episodes with tool results'
    for r in with_tools:  # tool results and the next assistant header are observations, never trained on
        text = TOK.decode([tok for m, tok in zip(r.env_mask, r.completion_ids) if m == 0])
        assert '<tool_response>' in text and '<|im_start|>assistant' in text and '<tool_call>' not in text


def test_all_zero_step_leaves_weights_and_adam_moments(tmp_path):
    class AfterFirstStep(TrainerCallback):
        def __init__(self, policy):
            self.policy, self.after = policy, None

        def on_step_end(self, args, state, control, model=None, optimizer=None, **kw):
            if state.global_step != 1:
                return
            self.policy.flaw = 0.0  # from now on every group is all-pass
            self.after = (
                {k: v.detach().clone() for k, v in model.named_parameters()},
                {n: {k: v.clone() for k, v in optimizer.state[p].items()} for n, p in model.named_parameters()},
            )

    pol = ScriptedPolicy(flaw=0.5, tokenizer=TOK)
    cb = AfterFirstStep(pol)
    t = trainer(tmp_path, policy=pol, callbacks=[cb], max_steps=3, max_refill_rounds=0)
    t.train()
    assert [r['skipped'] for r in t.step_log] == [False, True, True]
    params, moments = cb.after
    assert any(float(m['exp_avg'].abs().sum()) > 0 for m in moments.values())  # the first step really moved the moments
    opt = t.optimizer.optimizer
    for n, p in t.model.named_parameters():
        assert torch.equal(params[n], p.detach()), n
        for k in ('exp_avg', 'exp_avg_sq', 'step'):
            assert torch.equal(moments[n][k], opt.state[p][k]), (n, k)
    assert [h['tbt/skipped'] for h in t.state.log_history if 'loss' in h] == [0.0, 1.0, 1.0]


def test_recorded_logprobs_match_what_trl_recomputes(tmp_path):
    torch.manual_seed(0)
    tasks = [pay_task(0), pay_task(11)]  # prompts of different lengths: TRL left-pads one
    t = trainer(
        tmp_path,
        pool=tasks,
        policy=None,
        groups_per_step=1,
        group_size=2,
        temperature=0.7,
        max_tokens_per_turn=8,
        max_turns=2,
    )
    t.model.eval()
    # eval: rollout_func runs the episodes
    out = t._generate_and_score_completions([{'prompt': task_prompt(u.uid)} for u in tasks])
    assert out['prompt_mask'].sum(1).tolist()[0] != out['prompt_mask'].sum(1).tolist()[1]
    rec, trl_lp, mask = sampled_logprobs(t, out)
    assert mask.sum() > 8
    assert torch.allclose(rec[mask], trl_lp[mask], atol=1e-4), (rec[mask] - trl_lp[mask]).abs().max()
    assert (rec[~mask & out['completion_mask'].bool()] == 0).all()  # observations carry 0.0


def test_metrics_are_logged_per_step(tmp_path):
    pool = [crash_task(0)] + [pay_task(i) for i in range(4)]
    t = trainer(tmp_path, pool=pool, max_steps=2)
    t.train()
    logs = [h for h in t.state.log_history if 'loss' in h]
    assert len(logs) == 2
    for k in (
        'tbt/reward_mean',
        'tbt/zero_variance_share',
        'tbt/groups_generated',
        'tbt/groups_dropped',
        'tbt/groups_refilled',
        'tbt/system_errors',
        'tbt/episode_turns',
        'tbt/episode_tokens',
        'tbt/malformed_calls',
        'tbt/reward/demo',
        'tbt/skipped',
        'reward',
        'rewards/verdict/mean',
    ):
        assert all(k in h for h in logs), k


# ---------------------------------------------------------------- the pool and main


def test_load_pool_keeps_the_benchmark_out(tmp_path):
    bench = pay_task(7).model_copy(update={'split': 'bench'})
    write_tasks(TASKS[:6] + [bench], tmp_path / 't.jsonl')
    (tmp_path / 'bench.txt').write_text('demo/pay/0005\n')
    c = cfg(tmp_path, task_files=[str(tmp_path / 't.jsonl')], bench_file=str(tmp_path / 'bench.txt'))
    assert [t.uid for t in load_pool(c)] == [t.uid for t in TASKS[:5]]
    (tmp_path / 'pool.txt').write_text('demo/pay/0001\ndemo/pay/0005\n')
    overlapping = cfg(tmp_path, task_files=c.task_files, bench_file=c.bench_file, pool_file=str(tmp_path / 'pool.txt'))
    with pytest.raises(BenchmarkOverlap, match='benchmark'):
        load_pool(overlapping)


def _recipe(tmp_path, **kw):
    write_tasks(TASKS, tmp_path / 'tasks.jsonl')
    lines = {
        'task_files': [str(tmp_path / 'tasks.jsonl')],
        'groups_per_step': 2,
        'group_size': 2,
        'use_cpu': True,
        'bf16': False,
        'report_to': 'none',
        'save_strategy': 'no',
        'gradient_checkpointing': False,
        'output_dir': str(tmp_path / 'run'),
        **kw,
    }
    (tmp_path / 'r.yaml').write_text(''.join(f'{k}: {json.dumps(v)}\n' for k, v in lines.items()))
    return str(tmp_path / 'r.yaml')


def test_main_dry_run_loads_no_model(tmp_path, capsys):
    assert main(['--config', _recipe(tmp_path, policy_model=str(tmp_path / 'missing')), '--dry-run']) == 0
    out = capsys.readouterr().out
    assert 'pool: 8 tasks' in out and "lr_scheduler_type: 'constant'" in out
    assert 'gradient_accumulation_steps = steps_per_generation = 1' in out
    # a pool of 8 cannot fill 9 groups
    assert main(['--config', _recipe(tmp_path), '--dry-run', '--groups_per_step', '9']) == 1
    # a GPU recipe, data not made yet
    gpu = _recipe(tmp_path, task_files=['missing.jsonl'], bf16=True, use_cpu=False)
    assert main(['--config', gpu, '--dry-run']) == 0
    assert 'pool: not checked' in capsys.readouterr().out
    with pytest.raises(ValueError, match='choose one of'):
        main(
            [
                '--config',
                _recipe(tmp_path),
                '--dry-run',
                '--num_processes',
                '24',
                '--groups_per_step',
                '18',
                '--group_size',
                '8',
                '--per_device_train_batch_size',
                '4',
            ]
        )


def test_main_trains_and_saves_a_plain_model_directory(tmp_path):
    from transformers import AutoModelForCausalLM

    base = tmp_path / 'base'
    m = tiny_qwen3(TOK)
    m.save_pretrained(base)
    TOK.save_pretrained(base)
    assert (
        main(
            [
                '--config',
                _recipe(tmp_path),
                '--policy_model',
                str(base),
                '--max_steps',
                '1',
                '--max_turns',
                '1',
                '--max_tokens_per_turn',
                '6',
                '--max_refill_rounds',
                '0',
                '--disable_tqdm',
                'true',
            ]
        )
        == 0
    )
    run = tmp_path / 'run'
    assert (run / 'model.safetensors').exists() and (run / 'config.json').exists() and (run / 'tokenizer.json').exists()
    back = AutoModelForCausalLM.from_pretrained(run)
    # the random model fails every task: the step is skipped, and the saved weights are the base's
    assert all(torch.equal(a, b) for a, b in zip(m.state_dict().values(), back.state_dict().values()))


# ---------------------------------------------------------------- two processes


def _free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_two_processes_make_the_same_decisions(tmp_path):
    "Two CPU processes (gloo): same dynamic-sampling decisions, equal batch sizes, same weights after training."
    env = {**os.environ, 'OMP_NUM_THREADS': '1', 'PYTHONPATH': str(HERE)}
    launch_config = HERE.parent / 'scripts' / 'accelerate' / 'cpu_2proc.yaml'
    cmd = [
        sys.executable,
        '-m',
        'accelerate.commands.launch',
        '--config_file',
        str(launch_config),
        '--main_process_port',
        str(_free_port()),
        str(HERE / 'grpo_two_ranks.py'),
        str(tmp_path),
    ]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    a, b = [json.loads((tmp_path / f'rank{i}.json').read_text()) for i in (0, 1)]
    assert a['world'] == b['world'] == 2 and a['gradient_accumulation_steps'] == 3
    assert a['step_log'] == b['step_log'] and len(a['step_log']) == 3
    assert a['sizes'] == b['sizes'] == [[3, 3]] * 3  # every process: 3 prompts in, 3 rollouts out, each step
    assert a['params'] == b['params']
    # a skipped step under DDP with accumulation
    assert [rec['skipped'] for rec in a['step_log']] == [False, False, True]
    kinds = {k for rec in a['step_log'] for k in rec['kinds']}
    assert {'useful', 'zero_variance', 'system_error'} <= kinds  # every kind of decision was exercised
    assert any(r > 0 for rec in a['step_log'] for r in rec['rounds'])


def test_a_model_in_eval_mode_still_trains_on_episodes(tmp_path):
    """from_pretrained gives a model in eval mode;
    the trainer must still run its episode rollouts (found in the main job)."""
    model = tiny_qwen3(TOK).eval()
    t = trainer(tmp_path, model=model)
    t.train()
    assert len(t.step_log) == 1 and t.step_log[0]['kinds']


# ---------------------------------------------------------------- budgets and callbacks


def test_a_runs_budgets_replace_each_tasks_own(tmp_path):
    from thinkingbox_training.grpo import with_budgets
    from thinkingbox_training.tasks import Limits

    limits = Limits(max_turns=16, max_tokens_per_turn=256, max_episode_tokens=15360, wall_clock_s=99)
    task = pay_task(0).model_copy(update={'limits': limits})
    lim = with_budgets(task, cfg(tmp_path, max_turns=30, max_tokens_per_turn=2048, max_episode_tokens=32768)).limits
    assert (lim.max_turns, lim.max_tokens_per_turn, lim.max_episode_tokens, lim.wall_clock_s) == (30, 2048, 32768, 99)
    lim = with_budgets(task, cfg(tmp_path, max_turns=4, max_tokens_per_turn=32, max_episode_tokens=1024)).limits
    assert (lim.max_turns, lim.max_tokens_per_turn, lim.max_episode_tokens) == (4, 32, 1024)


def test_dry_run_prints_the_effective_budgets(tmp_path, capsys):
    recipe = _recipe(tmp_path, max_turns=30, max_tokens_per_turn=2048, max_episode_tokens=32768)
    assert main(['--config', recipe, '--dry-run']) == 0
    out = capsys.readouterr().out
    assert 'effective episode budgets: 30 turns, 2048 tokens a turn, 32768 tokens an episode, for every task' in out
    assert (
        'their own limits, replaced by the budgets above: 12 turns, 256 tokens a turn, 8192 an episode '
        "(each task's own)"
    ) in out


def test_dry_run_builds_the_callbacks_a_recipe_names(tmp_path, capsys, monkeypatch):
    import transformers.integrations.integration_utils as iu

    monkeypatch.setattr(iu, 'is_tensorboard_available', lambda: False)  # as on a machine without the gpu extra
    assert main(['--config', _recipe(tmp_path, report_to='tensorboard'), '--dry-run']) == 1
    out = capsys.readouterr().out
    assert "report_to=['tensorboard']: TensorBoardCallback cannot start" in out and 'pip install -e ".[gpu]"' in out


def test_load_pool_warns_when_its_probe_ran_under_other_budgets(tmp_path):
    from thinkingbox_training.budgets import BudgetsDiffer

    write_tasks(TASKS, tmp_path / 't.jsonl')
    (tmp_path / 'pool').mkdir()
    (tmp_path / 'pool' / 'pool.txt').write_text('demo/pay/0001\ndemo/pay/0002\n')
    probe = {'source': 'tasks', 'max_turns': 12, 'max_tokens_per_turn': 256, 'max_episode_tokens': 8192}
    (tmp_path / 'pool' / 'manifest.json').write_text(json.dumps({'probe_budgets': probe}))
    c = cfg(
        tmp_path,
        task_files=[str(tmp_path / 't.jsonl')],
        pool_file=str(tmp_path / 'pool' / 'pool.txt'),
        max_turns=10,
        max_tokens_per_turn=96,
        max_episode_tokens=8192,
    )
    said = r'probing campaign of .*12 turns, 256 tokens a turn.*this run: 10 turns, 96 tokens a turn'
    with pytest.warns(BudgetsDiffer, match=said):
        assert len(load_pool(c)) == 2
    same = dict(probe, source='run', max_turns=10, max_tokens_per_turn=96)
    (tmp_path / 'pool' / 'manifest.json').write_text(json.dumps({'probe_budgets': same}))
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        load_pool(c)  # the same budgets: no warning


def test_the_reference_recipe_states_the_reference_runs_budgets_and_seed(capsys):
    "The public run: 8,192 tokens a turn, 26,624 + 106,496 tokens an episode, seed 42, one episode per micro-batch."
    recipe = HERE.parent / 'scripts' / 'recipes' / 'reference_qwen3.yaml'
    assert main(['--config', str(recipe), '--dry-run', '--report_to', 'none']) == 0
    out = capsys.readouterr().out
    assert 'effective episode budgets: 30 turns, 8192 tokens a turn, 133120 tokens an episode, for every task' in out
    assert 'seed: 42' in out and '6 micro-batch(es) of 1' in out
    assert 'top_p: 0.95' in out and 'top_k: 20' in out and 'use_vllm: True' in out


def test_the_logprob_gap_is_logged_and_a_fixed_policys_zero_logprobs_are_said(tmp_path, caplog):
    # the scripted expert records 0.0 for every token it "samples"
    t = trainer(tmp_path, max_steps=1)
    with caplog.at_level('WARNING'):
        t.train()
    h = [h for h in t.state.log_history if 'loss' in h][0]
    assert h['tbt/logprob_gap/mean'] > 1.0 and h['tbt/logprob_gap/max'] >= h['tbt/logprob_gap/mean']
    assert h['tbt/logprob_unknown_share'] == 0
    # said, not silent; the fixed policy still trains (mechanism tests)
    assert 'is not the model being trained' in caplog.text


# ---------------------------------------------------------------- checkpoints, resuming, a new pool mid-run


def _losses(t) -> list:
    "Each step's loss and gradient norm as TRL logged them."
    return [(h['loss'], h['grad_norm']) for h in t.state.log_history if 'loss' in h]


def _decisions(t) -> list:
    "What each step sampled (task, repetition, reward of every episode) and decided, comparable across runs."
    keys = ('step', 'groups', 'kinds', 'rounds', 'selected', 'fillers', 'skipped')
    return [json.dumps({k: rec[k] for k in keys}) for rec in t.step_log]


def _first_round(rec) -> list:
    return [g[0][0] for g, r in zip(rec['groups'], rec['rounds']) if r == 0]


def _weights(model) -> dict:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


class _At(TrainerCallback):
    "Call `fn(state)` at the end of step `step`."

    def __init__(self, step, fn):
        self.step, self.fn = step, fn

    def on_step_end(self, args, state, control, **kw):
        if state.global_step == self.step:
            self.fn(kw)


def test_a_resumed_run_repeats_the_uninterrupted_one(tmp_path):
    """Checkpoint at step 2, resume in a new trainer: step 3 draws the same tasks, plays the same episodes, gets the
    same rewards and the same loss as the run that went on. 4 tasks and 2 groups a step: step 3 opens the second epoch
    of the task order, the case TRL's own sampler gets wrong (it would restart the order of the first)."""
    import shutil
    from thinkingbox_training.policies import HFPolicy

    pool, saved = TASKS[:4], {}
    run = dict(pool=pool, max_steps=3, save_strategy='steps', save_steps=2)
    full = trainer(tmp_path / 'full', callbacks=[_At(2, lambda kw: saved.update(_weights(kw['model'])))], **run)
    full.train()
    assert _first_round(full.step_log[2]) != _first_round(full.step_log[0])  # else this test could not fail
    assert not any(rec['skipped'] for rec in full.step_log)
    ckpt = tmp_path / 'full' / 'out' / 'checkpoint-2'
    for f in (
        'model.safetensors',
        'tokenizer.json',
        'trainer_state.json',
        'optimizer.pt',
        'rng_state.pth',
        'tbt_state.json',
    ):
        assert (ckpt / f).exists(), f
    pol = HFPolicy(str(ckpt))  # what the learning curve evaluates
    assert all(torch.equal(saved[k], v) for k, v in pol.model.state_dict().items())
    assert pol.tokenizer.get_vocab() == TOK.get_vocab()

    # a new trainer (as in a new process) whose output_dir holds what the interrupted run left: checkpoint-2
    (tmp_path / 'resumed' / 'out').mkdir(parents=True)
    shutil.copytree(ckpt, tmp_path / 'resumed' / 'out' / 'checkpoint-2')
    again = trainer(tmp_path / 'resumed', **run)
    again.train(resume_from_checkpoint='true')  # the last checkpoint in output_dir
    assert _decisions(again) == _decisions(full)  # steps 1-2 restored, step 3 drawn and played the same
    assert [r.completion_ids for r in again.last_batch] == [r.completion_ids for r in full.last_batch]
    # The same float32 operations on the same machine: equal in practice (measured difference 0.0); 1e-6 only
    # leaves room for a BLAS that splits its sums differently from one process to the next.
    (loss, gn), (loss0, gn0) = _losses(again)[-1], _losses(full)[-1]
    assert len(_losses(again)) == 3 and abs(loss - loss0) <= 1e-6 and abs(gn - gn0) <= 1e-6 * max(1.0, gn0)
    after, after0 = _weights(again.model), _weights(full.model)
    assert all(torch.allclose(after[k], after0[k], rtol=0, atol=1e-6) for k in after0)
    assert not all(torch.equal(after[k], saved[k]) for k in saved)  # and step 3 did move the weights

    other = trainer(tmp_path / 'other', pool=TASKS[:5], max_steps=3)
    with pytest.raises(ValueError, match='trained on another pool'):
        other.train(resume_from_checkpoint=str(ckpt))


def test_set_pool_draws_the_next_steps_from_the_new_pool_and_a_resume_keeps_it(tmp_path):
    old, new = TASKS[:4], [pay_task(i) for i in range(20, 26)]
    swap = _At(1, lambda kw: t.set_pool(new, probe_episodes=24))  # as a re-probe between steps 1 and 2 would
    run = dict(pool=old, max_steps=3, save_strategy='steps', save_steps=2)
    t = trainer(tmp_path / 'a', callbacks=[swap], **run)
    t.train()
    olds, news = {x.uid for x in old}, {x.uid for x in new}
    assert set(_first_round(t.step_log[0])) <= olds
    for rec in t.step_log[1:]:
        assert {g[0][0] for g in rec['groups']} <= news  # every round, refills too
    firsts = _first_round(t.step_log[1]) + _first_round(t.step_log[2])
    assert len(set(firsts)) == 4  # an epoch of the new pool: no task twice
    assert t.pool_log == [{'step': 1, 'pool': [x.uid for x in new], 'probe_episodes': 24}]
    generated = sum(h['tbt/groups_generated'] for h in t.state.log_history if 'loss' in h) * 4
    assert t.training_episodes == generated and t.episodes_used == generated + 24

    # resumed from step 2 by a trainer built on the old pool, as the study's driver builds it: the new pool is back
    again = trainer(tmp_path / 'b', **run)
    again.train(resume_from_checkpoint=str(tmp_path / 'a' / 'out' / 'checkpoint-2'))
    assert list(again.pool) == [x.uid for x in new] and again.pool_log == t.pool_log
    assert _decisions(again) == _decisions(t) and again.episodes_used == t.episodes_used

    with pytest.raises(ValueError, match='never trained on'):
        t.set_pool(new[:3] + [pay_task(30).model_copy(update={'split': 'bench'})])
    with pytest.raises(ValueError, match="cannot fill a step's 2 groups"):
        t.set_pool(new[:1])


def test_main_saves_checkpoints_and_resumes_from_the_last(tmp_path):
    from thinkingbox_training.policies import HFPolicy

    base = tmp_path / 'base'
    m = tiny_qwen3(TOK)
    m.save_pretrained(base)
    TOK.save_pretrained(base)
    argv = [
        '--config',
        _recipe(tmp_path),
        '--policy_model',
        str(base),
        '--max_turns',
        '1',
        '--max_tokens_per_turn',
        '6',
        '--max_refill_rounds',
        '0',
        '--disable_tqdm',
        'true',
        '--save_strategy',
        'steps',
        '--save_steps',
        '1',
    ]
    assert main(argv + ['--max_steps', '2']) == 0
    run = tmp_path / 'run'
    assert (run / 'checkpoint-1' / 'tbt_state.json').exists() and (run / 'checkpoint-2').exists()
    back = HFPolicy(str(run / 'checkpoint-1')).model.state_dict()  # the random model's steps are skipped
    assert all(torch.equal(v, back[k]) for k, v in m.state_dict().items())
    assert main(argv + ['--max_steps', '3', '--resume_from_checkpoint', 'true']) == 0
    log = json.loads((run / 'training_log.json').read_text())
    assert [s['step'] for s in log['steps']] == [0, 1, 2]  # two restored from checkpoint-2, one new
    assert len([h for h in log['log_history'] if 'loss' in h]) == 3 and log['episodes_used'] == 3 * 4


# ---------------------------------------------------------------- micro-batches by length


def test_micro_batches_by_length_keep_the_gradient(tmp_path):
    """8 episodes a step in 4 micro-batches of 2, cut by length and each padded to its own longest row: the same loss
    and gradient as one micro-batch of 8, with less padding."""
    from thinkingbox_training.grpo import padding_share

    class Grads(TrainerCallback):
        def on_pre_optimizer_step(self, args, state, control, model=None, **kw):
            self.g = {k: p.grad.detach().clone() for k, p in model.named_parameters() if p.grad is not None}

    runs = {}
    for bs in (8, 2):
        cb = Grads()
        t = trainer(tmp_path / str(bs), callbacks=[cb], per_device_train_batch_size=bs, max_refill_rounds=0)
        t.train()
        runs[bs] = (t, cb.g, _losses(t)[0][0])
    (one, g1, loss1), (four, g4, loss4) = runs[8], runs[2]
    assert four.args.gradient_accumulation_steps == 4 and len(four._buffered_inputs) == 4
    assert _decisions(one) == _decisions(four) and g1 and g1.keys() == g4.keys()  # the same episodes
    # float32 sums in another order: 1e-5 relative is far below the gradient's own size and far above rounding
    assert abs(loss1 - loss4) <= 1e-5 * max(1.0, abs(loss1))
    for k in g1:
        assert torch.allclose(g1[k], g4[k], rtol=1e-4, atol=1e-7), k
    mbs = four._buffered_inputs
    lengths = [(m['prompt_mask'].sum(1) + m['completion_mask'].sum(1)).tolist() for m in mbs]
    assert all(min(a) >= max(b) for a, b in zip(lengths, lengths[1:]))  # longest first, never mixed
    assert all(m['completion_ids'].size(1) == max(m['completion_mask'].sum(1)) for m in mbs)  # own width
    assert padding_share(mbs) < padding_share(one._buffered_inputs)


# ---------------------------------------------------------------- the step as it always ran


def _close(a, b, path='') -> list:
    "Where `a` and `b` (JSON values) differ beyond float noise (1e-6 relative)."
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return [f'{path}: keys {sorted(a.keys() ^ b.keys())}']
        return [d for k in a for d in _close(a[k], b[k], f'{path}/{k}')]
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f'{path}: {len(a)} != {len(b)} items']
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in _close(x, y, f'{path}[{i}]')]
    if isinstance(a, float) and isinstance(b, (int, float)) and not isinstance(b, bool):
        same = a == b or (a != a and b != b) or abs(a - b) <= 1e-6 * max(1.0, abs(a), abs(b))  # nan: a != a
        return [] if same else [f'{path}: {a} != {b}']
    return [] if a == b else [f'{path}: {a!r} != {b!r}']


@pytest.mark.parametrize('policy', ['scripted', 'self'])
def test_two_steps_log_and_train_what_they_always_did(tmp_path, policy):
    """Two steps at seed 0 (a trained and a skipped path) give the losses, logged metrics, step records and weights
    recorded in tests/grpo_two_steps.json: the trainer's structure may change, its steps may not."""
    from grpo_fixtures import two_steps

    want = json.loads((HERE / 'grpo_two_steps.json').read_text())[policy]
    assert _close(two_steps(tmp_path, policy), want) == []


# ---------------------------------------------------------------- TRL's private names, listed once

from thinkingbox_training.grpo import TRL_PRIVATE, trl_private_problem


@pytest.mark.parametrize('name', list(TRL_PRIVATE))
def test_trl_private_name_is_as_recorded(name):
    "Each private name of TRL the trainer relies on is still there, with the parameters it is overridden or called."
    assert trl_private_problem(name) is None, trl_private_problem(name)


def test_every_private_trl_name_the_trainer_uses_is_listed():
    """A private name of TRL's trainer (or transformers' Trainer) used anywhere in the trainer's modules (the core and
    the adapter) is in TRL_PRIVATE: the list is the whole of what a TRL upgrade must be checked against."""
    import re, inspect
    import thinkingbox_training.grpo_core as core, thinkingbox_training.trl_adapter as adapter

    src = inspect.getsource(core) + inspect.getsource(adapter)
    trl_src = inspect.getsource(GRPOTrainer)
    listed = {k.split('.', 1)[-1] for k in TRL_PRIVATE}
    used = set(re.findall(r'\.(_[a-z]\w*)\b', src))
    theirs = {n for n in used if hasattr(GRPOTrainer, n) or re.search(rf'self\.{n}\s*=', trl_src)}
    assert theirs - listed == set()
    assert {'_step', '_buffered_inputs', '_metrics', '_generate_and_score_completions'} <= theirs  # the scan sees them
    # the trainer overrides no private TRL method that is not listed
    ours = {n for n, v in vars(TBTTrainer).items() if n.startswith('_') and not n.startswith('__') and callable(v)}
    assert {n for n in ours if hasattr(GRPOTrainer, n)} - listed == set()


# ---------------------------------------------------------------- the pass@k advantage option


def test_passk_rewards_are_an_unbiased_pass_at_k_gradient():
    """Over every outcome vector of a group (n <= 6, every k <= n), exactly: the transformed rewards' group mean has
    expectation pass@k, and sum_i s_i dlog P(x_i) has expectation n/k times pass@k's gradient (a Bernoulli logit)."""
    import itertools
    from fractions import Fraction
    from thinkingbox_training.grpo import passk_rewards

    p = Fraction(2, 7)
    for n in range(2, 7):
        for k in range(1, n + 1):
            mean = grad = Fraction(0)
            for x in itertools.product((0, 1), repeat=n):
                w, s = p ** sum(x) * (1 - p) ** (n - sum(x)), passk_rewards(list(x), k, exact=True)
                mean += w * sum(s) / n
                grad += w * sum(si * (xi - p) for si, xi in zip(s, x))
            assert mean == 1 - (1 - p) ** k, (n, k)
            assert grad == Fraction(n, k) * k * p * (1 - p) ** k, (n, k)
    assert passk_rewards([1, 0, 0, 0], 2) == [1.0, 1 / 3, 1 / 3, 1 / 3]
    assert passk_rewards([0, 1, 1, 0], 1) == [0.0, 1.0, 1.0, 0.0]  # k = 1: the Verdicts
    with pytest.raises(ValueError, match='binary rewards'):
        passk_rewards([1, 2], 1)
    with pytest.raises(ValueError, match='k=5'):
        passk_rewards([1, 0, 0, 0], 5)


def test_passk_zero_variance_groups_are_replaced_like_all_pass_ones():
    """Under the transform a group of n with more than n - k successes carries no signal (all its transformed rewards
    are 1), as all-0 and all-1 groups do: dynamic sampling replaces it; a system error is still a system error."""
    import functools
    from thinkingbox_training.grpo import passk_kind

    assert [passk_kind([1] * c + [0] * (8 - c), 4) for c in range(9)] == (
        ['zero_variance'] + ['useful'] * 4 + ['zero_variance'] * 4
    )
    assert passk_kind([None, 1, 0, 0], 2) == 'system_error'
    s = dynamic_sample(
        [[1, 1, 1, 0], [1, 0, 0, 0]],
        lambda k, need: [[1, 1, 0, 0]] * need,
        2,
        max_rounds=2,
        kind=functools.partial(passk_kind, k=2),
    )
    assert s.kinds == ['zero_variance', 'useful', 'useful'] and s.selected == [1, 2]
    assert dynamic_sample([[1, 1, 1, 0], [1, 0, 0, 0]], lambda k, need: 1 / 0, 2, max_rounds=2).selected == [0, 1]


def test_passk_option_weights_each_groups_advantages_with_k_annealed(tmp_path):
    """advantage: passk: each step's k follows the schedule (2, 2, 1 over 3 steps), only groups useful under it are
    chosen, and the advantages are TRL's of the Verdicts times the group's pass@k weight, which are the centred
    transformed rewards over the Verdicts' group std; TRL's rewards and the step log keep the Verdicts."""
    from thinkingbox_training.grpo import passk_kind, passk_rewards, passk_weight

    t = trainer(tmp_path, advantage='passk', passk_k=2, passk_k_end=1, max_steps=3)
    cap = capture(t)
    t.train()
    assert [rec['passk_k'] for rec in t.step_log] == [2, 2, 1]
    assert [h['tbt/passk_k'] for h in t.state.log_history if 'loss' in h] == [2, 2, 1]
    weighted = 0
    for rec, (rows, out) in zip(t.step_log, cap):
        k = rec['passk_k']
        for i, g in enumerate(rec['groups']):
            assert rec['kinds'][i] == passk_kind([rw for _, _, rw in g], k)
        assert all(rec['kinds'][i] == 'useful' for i in rec['selected'])
        for j in range(0, len(rows), 4):
            g = rows[j : j + 4]
            if g[0].filler:
                continue
            f = torch.tensor([float(r.reward) for r in g])
            assert {r.weight for r in g} == {passk_weight(int(f.sum()), 4, k)}
            s = torch.tensor(passk_rewards([r.reward for r in g], k))
            assert torch.allclose(out['advantages'][j : j + 4], (s - s.mean()) / (f.std() + 1e-4), atol=1e-5)
            weighted += g[0].weight < 1
    assert weighted > 0  # some group was down-weighted, not only filtered
    assert {rw for rec in t.step_log for g in rec['groups'] for _, _, rw in g} <= {0, 1}


def test_passk_at_k_1_trains_exactly_as_plain_grpo(tmp_path):
    "With k = 1 the transformed rewards are the Verdicts: the same steps, logs and weights as advantage: grpo."
    runs = {}
    for adv in ('grpo', 'passk'):
        t = trainer(tmp_path / adv, advantage=adv, passk_k=1, max_steps=2)
        t.train()
        logs = [
            {
                k: v
                for k, v in h.items()
                if k
                not in (
                    'step_time',
                    'train_runtime',
                    'train_samples_per_second',
                    'train_steps_per_second',
                    'tbt/passk_k',
                )
            }
            for h in t.state.log_history
        ]
        runs[adv] = (
            logs,
            [{k: v for k, v in r.items() if k != 'passk_k'} for r in t.step_log],
            [p.detach().clone() for p in t.model.parameters()],
            [r.get('passk_k') for r in t.step_log],
        )
    assert runs['grpo'][0] == runs['passk'][0] and runs['grpo'][1] == runs['passk'][1]
    assert all(torch.equal(a, b) for a, b in zip(runs['grpo'][2], runs['passk'][2]))
    assert runs['grpo'][3] == [None, None] and runs['passk'][3] == [1, 1]  # plain GRPO records no k


def test_passk_recipe_differs_from_the_tiny_recipe_only_in_the_option(tmp_path, capsys):
    """The pass@k arm's recipe is tiny_cpu.yaml with the option (and its own output folder); bad option values are
    refused in one line naming the key."""
    import yaml
    from thinkingbox_training.grpo import ConfigError, parse_config

    recipes = HERE.parent / 'scripts' / 'recipes'
    plain, passk = (yaml.safe_load((recipes / f).read_text()) for f in ('tiny_cpu.yaml', 'tiny_cpu_passk.yaml'))
    differ = {k for k in plain.keys() | passk.keys() if plain.get(k) != passk.get(k)}
    assert differ == {'advantage', 'passk_k', 'passk_k_end', 'output_dir'}
    args = parse_config(['--config', str(recipes / 'tiny_cpu_passk.yaml'), '--dry_run', 'true'])
    assert (args.advantage, args.passk_k, args.passk_k_end) == ('passk', passk['passk_k'], passk['passk_k_end'])
    from thinkingbox_training.grpo import describe

    assert f"advantage: 'passk', k = {passk['passk_k']} -> {passk['passk_k_end']} over the steps" in describe(args)
    assert 'advantage' not in describe(parse_config(['--config', str(recipes / 'tiny_cpu.yaml'), '--dry_run', 'true']))
    for change, key in (
        (('passk_k: 4', 'passk_k: 8'), 'passk_k'),
        (('advantage: passk', 'advantage: pass'), 'advantage'),
    ):
        bad = tmp_path / 'bad.yaml'
        bad.write_text((recipes / 'tiny_cpu_passk.yaml').read_text().replace(*change))
        with pytest.raises(ConfigError, match=key) as e:
            parse_config(['--config', str(bad), '--dry_run', 'true'])
        assert str(bad) in str(e.value) and '\n' not in str(e.value)


def test_an_episode_budget_ends_the_run_and_paces_the_passk_schedule(tmp_path):
    """episode_budget: training stops after the step past which the next step's 8 episodes would not fit (max_steps
    is far), and the pass@k k moves with the share of the budget spent before each step, down to passk_k_end."""
    from thinkingbox_training.grpo import passk_k_at

    t = trainer(tmp_path, advantage='passk', passk_k=3, passk_k_end=1, max_steps=30, episode_budget=48)
    t.train()
    spent = [sum(len(g) for g in rec['groups']) for rec in t.step_log]
    assert t.state.global_step == len(spent) < 30
    assert sum(spent[:-1]) + 8 <= 48 < sum(spent) + 8 and t.training_episodes == sum(spent)
    assert [rec['passk_k'] for rec in t.step_log] == [passk_k_at(sum(spent[:i]), 49, 3, 1) for i in range(len(spent))]
    assert t.step_log[0]['passk_k'] == 3
    with pytest.raises(ValueError, match='episode_budget=7'):
        cfg(tmp_path, episode_budget=7)


def test_passk_refills_system_error_groups_and_a_resumed_budgeted_run_stops_where_the_whole_one_did(tmp_path):
    """Under advantage: passk a group with a voided episode is a system-error group: refilled, never weighted or trained
    on. A budgeted pass@k run resumed from a checkpoint takes the same k and stops at the same step as the run that
    went on (the budget is counted from the step records the checkpoint keeps)."""
    import shutil

    pool = [crash_task(0), crash_task(1)] + [pay_task(i) for i in range(4)]
    t = trainer(
        tmp_path / 'crash',
        pool=pool,
        train_dataset=task_dataset(pool[:2]),
        max_refill_rounds=4,
        advantage='passk',
        passk_k=2,
    )
    t.train()
    rec = t.step_log[0]
    assert rec['kinds'][:2] == ['system_error'] * 2 and len(rec['selected']) == 2
    assert not any(r.reward is None for r in t.last_batch) and all(r.weight > 0 for r in t.last_batch)

    run = dict(
        pool=TASKS[:4],
        advantage='passk',
        passk_k=3,
        passk_k_end=1,
        max_steps=30,
        episode_budget=48,
        save_strategy='steps',
        save_steps=2,
    )
    full = trainer(tmp_path / 'full', **run)
    full.train()
    (tmp_path / 'resumed' / 'out').mkdir(parents=True)
    shutil.copytree(tmp_path / 'full' / 'out' / 'checkpoint-2', tmp_path / 'resumed' / 'out' / 'checkpoint-2')
    again = trainer(tmp_path / 'resumed', **run)
    again.train(resume_from_checkpoint='true')
    assert again.state.global_step == full.state.global_step > 2
    assert [r['passk_k'] for r in again.step_log] == [r['passk_k'] for r in full.step_log]
    assert again.training_episodes == full.training_episodes


def test_report_to_trackio_and_wandb_log_a_run_offline(tmp_path):
    """report_to trackio and wandb (the train extra) through scripts/train.py, no network: Trackio writes the run's
    metrics, ours (tbt/*) and TRL's, and a sample of each step's groups as a table, to its local SQLite store; W&B
    writes an offline run."""
    import sqlite3

    recipe = _recipe(
        tmp_path,
        report_to=['trackio', 'wandb'],
        policy_model=str(HERE.parent / 'data/models/tiny-qwen3'),
        max_steps=1,
        max_turns=2,
        max_tokens_per_turn=8,
        disable_tqdm=True,
        project='tbt-test',
        run_name='offline',
    )
    env = {
        **os.environ,
        'OMP_NUM_THREADS': '1',
        'HF_HUB_OFFLINE': '1',
        'TRACKIO_DIR': str(tmp_path / 'trackio'),
        'WANDB_MODE': 'offline',
        'WANDB_DIR': str(tmp_path),
        'WANDB_PROJECT': 'tbt-test',
        'WANDB_SILENT': 'true',
    }
    r = subprocess.run(
        [sys.executable, str(HERE.parent / 'scripts' / 'train.py'), '--config', recipe],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    with sqlite3.connect(tmp_path / 'trackio' / 'tbt-test.db') as db:
        rows = db.execute('select run_name, metrics from metrics').fetchall()
    keys = set().union(*(json.loads(m) for _, m in rows))
    assert {name for name, _ in rows} == {'offline'}
    assert {'train/tbt/skipped', 'train/rewards/verdict/mean', 'train/loss'} <= keys, sorted(keys)
    # the step's groups as a table (`view.log_step_trace`): each group's task, kind and use
    [table] = [json.loads(m)['tbt/groups'] for _, m in rows if 'tbt/groups' in json.loads(m)]
    assert table['_type'] == 'trackio.table' and table['_value'] and {'task', 'kind', 'use'} <= set(table['_value'][0])
    assert list((tmp_path / 'wandb').glob('offline-run-*/run-*.wandb')), list(tmp_path.rglob('*'))[:20]


# ---------------------------------------------------------------- LoRA through TRL's peft_config

from thinkingbox_training.grader import Grader, Verdict


class _ParityGrader(Grader):
    "Reward 1 when the last message has an even length: a random model's groups are mixed, and steps train."

    async def grade(self, task, db, final_message='', transcript=None):
        return Verdict(reward=int(len(final_message) % 2 == 0))


class _Steps(TrainerCallback):
    "Counts the steps this process ran (a resumed run's restored steps are not counted)."

    n = 0

    def on_step_end(self, args, state, control, **kw):
        self.n += 1


def _lora_run(out, steps, resume=None):
    from peft import LoraConfig

    tok = tokenizer()
    args = TBTConfig(
        output_dir=str(out),
        groups_per_step=2,
        group_size=4,
        max_steps=steps,
        max_refill_rounds=1,
        learning_rate=5e-2,
        seed=0,
        use_cpu=True,
        bf16=False,
        gradient_checkpointing=False,
        report_to='none',
        save_strategy='steps',
        save_steps=1,
        disable_tqdm=True,
        max_turns=2,
        max_tokens_per_turn=10,
    )
    peft = LoraConfig(r=4, lora_alpha=8, target_modules=['q_proj', 'v_proj'], lora_dropout=0.0, task_type='CAUSAL_LM')
    t = TBTTrainer(
        tiny_qwen3(tok),
        args,
        TASKS,
        processing_class=tok,
        grader=_ParityGrader(),
        peft_config=peft,
        callbacks=[_Steps()],
    )
    t.remove_callback(PrinterCallback)
    t.train(resume_from_checkpoint=resume)
    return t


def test_lora_trains_only_the_adapters_serves_merged_and_resumes(tmp_path):
    """LoRA through TRL's peft_config on the tiny policy: only the adapters move (the base weights are bit for bit the
    initial ones), the merged model saved as a plain checkpoint is a policy that samples what the adapted model
    samples, and a run resumed from its step-1 checkpoint ends with the adapters of the uninterrupted run."""
    from peft import PeftModel
    from thinkingbox_training.policies import HFPolicy

    tok = tokenizer()
    base0 = {k: v.clone() for k, v in tiny_qwen3(tok).state_dict().items()}
    t = _lora_run(tmp_path / 'full', 2)
    assert isinstance(t.model, PeftModel) and sum(not r['skipped'] for r in t.step_log) == 2, t.step_log
    trainable = {n for n, p in t.model.named_parameters() if p.requires_grad}
    assert trainable and all('lora_' in n for n in trainable)
    lora = {n: p.detach().clone() for n, p in t.model.named_parameters() if 'lora_B' in n}
    assert any(float(p.abs().max()) > 0 for p in lora.values())  # B starts at zero: the adapters moved
    for n, p in t.model.get_base_model().named_parameters():
        if 'lora_' not in n:
            assert torch.equal(p, base0[n.replace('.base_layer', '')]), n
    # the merged checkpoint serves as a policy: token for token what the adapted model samples
    prompt = t.fmt.prompt_ids([{'role': 'user', 'content': 'Please pay 300 cents from AC-1.'}])
    adapted = HFPolicy(t.model, tok, SamplingConfig(max_tokens=10)).sample([prompt] * 2, [3, 4], 10)
    merged = t.model.merge_and_unload()
    merged.save_pretrained(tmp_path / 'merged')
    from transformers import AutoModelForCausalLM

    served = HFPolicy(AutoModelForCausalLM.from_pretrained(tmp_path / 'merged'), tok, SamplingConfig(max_tokens=10))
    again = served.sample([prompt] * 2, [3, 4], 10)
    assert [g.token_ids for g in again] == [g.token_ids for g in adapted]
    for a, b in zip(again, adapted):
        assert max(abs(x - y) for x, y in zip(a.logprobs, b.logprobs)) < 1e-4
    # resume from the step-1 checkpoint (an adapter checkpoint): the same adapters as the uninterrupted run
    r = _lora_run(tmp_path / 'full', 2, resume=str(tmp_path / 'full' / 'checkpoint-1'))
    ran = next(c for c in r.callback_handler.callbacks if isinstance(c, _Steps))
    assert ran.n == 1 and r.state.global_step == 2 and [s['step'] for s in r.step_log] == [0, 1]
    got = {n: p.detach() for n, p in r.model.named_parameters() if 'lora_B' in n}
    assert got.keys() == lora.keys() and all(torch.allclose(got[n], lora[n], atol=1e-6) for n in lora)


# ---------------------------------------------------------------- the memory plan, its refusal, the LoRA recipe

from thinkingbox_training.grpo import ConfigError, parse_config  # noqa: E402

RECIPES = Path(__file__).parent.parent / 'scripts' / 'recipes'


def test_memory_plan_matches_a_measured_cpu_peak():
    """The plan's gradients + activations + logits for the tiny policy at 2,048 tokens (float32, checkpointing) are
    within 20% of the measured growth of the peak RSS of one forward and backward (its own process)."""
    from transformers import AutoConfig
    from thinkingbox_training.grpo import memory_plan

    root = Path(__file__).parent.parent
    out = subprocess.run(
        [sys.executable, 'benchmarks/train_step_memory.py', '--one', 'tiny', '2048'],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, 'OMP_NUM_THREADS': '1'},
    )
    got = int(out.stdout.split()[-1])
    p = memory_plan(AutoConfig.from_pretrained(root / 'data/models/tiny-qwen3'), 2048, dtype_bytes=4)
    assert 0.8 < (p.gradients + p.activations + p.logits) / got < 1.2, (p, got)


def _ref_shape(d):
    from transformers import Qwen3Config

    Qwen3Config(
        hidden_size=5120,
        num_hidden_layers=64,
        intermediate_size=17408,
        num_attention_heads=64,
        num_key_value_heads=8,
        head_dim=128,
        vocab_size=151936,
        tie_word_embeddings=False,
    ).save_pretrained(d)
    return str(d)


def test_reference_recipe_refused_up_front_when_an_episode_cannot_fit(tmp_path, capsys):
    """The reference recipe's 133,120 tokens an episode on a 141 GiB GPU: refused in one line naming the option and
    the length that fits, before any model loads (a 27B-shaped config.json, no weights); 32,768 tokens pass."""
    model = _ref_shape(tmp_path / 'm')
    argv = [
        '--config',
        str(RECIPES / 'reference_qwen3.yaml'),
        '--dry-run',
        '--policy_model',
        model,
        '--gpu_memory_gb',
        '141',
    ]
    with pytest.raises(
        ConfigError,
        match=r'^max_episode_tokens=133120: the memory plan needs 354 GiB a GPU, over '
        r'gpu_memory_gb=141 .*at most 50944 tokens fit\)$',
    ):
        main(argv)
    assert main(argv + ['--max_episode_tokens', '32768']) == 0
    assert 'memory: plan 32768 tokens: 93.1 GiB' in capsys.readouterr().out
    # without a GPU and without gpu_memory_gb nothing is checked (a CPU run has no GPU memory to plan for)
    assert main(argv[:-2]) == 0 and 'memory:' not in capsys.readouterr().out


def test_lora_recipe_dry_run_plans_one_gpu(tmp_path, capsys):
    """The one-GPU LoRA recipe parses, builds TRL's peft_config, samples locally (no vLLM) and its plan fits an
    80 GiB GPU at its 16,384 tokens (an 8B-shaped config.json, no weights); 32,768 tokens would not."""
    from transformers import Qwen3Config
    from thinkingbox_training.grpo import lora_config

    Qwen3Config(
        hidden_size=4096,
        num_hidden_layers=36,
        intermediate_size=12288,
        num_attention_heads=32,
        num_key_value_heads=8,
        head_dim=128,
        vocab_size=151936,
        tie_word_embeddings=False,
    ).save_pretrained(tmp_path / 'q8')
    argv = [
        '--config',
        str(RECIPES / 'lora_qwen3_8b.yaml'),
        '--dry-run',
        '--policy_model',
        str(tmp_path / 'q8'),
        '--gpu_memory_gb',
        '80',
    ]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert 'LoRA: rank 32, alpha 64' in out and 'use_vllm: False' in out and 'num_processes: 1' in out
    assert 'memory: plan 16384 tokens: 50.7 GiB' in out
    with pytest.raises(ConfigError, match='max_episode_tokens=32768: .* at most 30208 tokens fit'):
        main(argv + ['--max_episode_tokens', '32768'])
    peft = lora_config(parse_config(argv))
    assert (
        peft.r == 32
        and peft.lora_alpha == 64
        and set(peft.target_modules) == {'q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'}
    )
    assert lora_config(parse_config(['--config', str(RECIPES / 'tiny_cpu.yaml'), '--dry_run', 'true'])) is None


def test_gpu_smoke_cpu_check_runs_the_gpu_code_on_tiny_shapes(tmp_path):
    """benchmarks/gpu_smoke.sh --cpu-check: the GPU smoke's LoRA GRPO-loss steps on a tiny Qwen3 on CPU, each with
    its tokens/s, measured peak and the memory plan (read from the trainer module's source) within a factor of 1.5;
    without CUDA and without --cpu-check it refuses with status 2 and a line saying why."""
    root = Path(__file__).parent.parent
    env = {**os.environ, 'OMP_NUM_THREADS': '1', 'CUDA_VISIBLE_DEVICES': ''}
    r = subprocess.run(
        ['bash', 'benchmarks/gpu_smoke.sh', '--cpu-check', '--out', str(tmp_path / 's.json')],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads((tmp_path / 's.json').read_text())
    assert [s['tokens'] for s in got['steps']] == [256, 512] and got['failed'] == []
    assert 0 < got['trainable'] < got['parameters']  # only the adapters train
    for s in got['steps']:
        assert s['tokens_per_s'] > 0 and 1 / 1.5 < s['plan_over_peak'] < 1.5, s
    assert got['ahead']['tokens'] == 256 and got['ahead']['plan_gib'] > 0  # sampling ahead's part (a GPU's to compare)
    r = subprocess.run(['bash', 'benchmarks/gpu_smoke.sh'], cwd=root, env=env, capture_output=True, text=True)
    assert r.returncode == 2 and 'no CUDA device here' in r.stderr
