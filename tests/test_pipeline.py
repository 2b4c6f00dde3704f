"""The main job's reading of the trainer's step log."""

import json
from thinkingbox_training.pipeline import training_steps


def test_training_steps_count_what_each_step_trained_on(tmp_path):
    g = lambda *rs: [['t', i, r] for i, r in enumerate(rs)]
    steps = [
        {
            'step': 0,
            'groups': [g(1, 0), g(1, 1), g(0, 1)],
            'kinds': ['useful', 'zero_variance', 'useful'],
            'rounds': [0, 1, 1],
            'selected': [0, 2],
            'fillers': [],
            'skipped': False,
        },
        {
            'step': 1,
            'groups': [g(0, 0), g(1, 1)],
            'kinds': ['zero_variance', 'system_error'],
            'rounds': [0, 0],
            'selected': [],
            'fillers': [0],
            'skipped': True,
        },
    ]
    (tmp_path / 'training_log.json').write_text(json.dumps({'steps': steps, 'log_history': []}))
    a, b = training_steps(tmp_path)
    assert a == {
        'step': 1,
        'reward': 0.5,
        'groups': 3,
        'useful': 2,
        'zero_variance': 1,
        'system_error': 0,
        'refill_rounds': 1,
        'skipped': False,
    }
    # nothing trained on: nan
    assert b['skipped'] and b['useful'] == 0 and b['system_error'] == 1 and b['reward'] != b['reward']
    assert training_steps(tmp_path / 'missing') == []


# ---------------------------------------------------------------- budgets per campaign, costs, intervals


def _tasks():
    from grpo_fixtures import pay_task
    from thinkingbox_training.tasks import Limits

    return [
        pay_task(i).model_copy(
            update={'limits': Limits(max_turns=7 + i, max_tokens_per_turn=256, max_episode_tokens=7168)}
        )
        for i in range(2)
    ]


def test_probe_takes_the_runs_budgets_evaluation_the_tasks_own_and_comparing_them_warns(tmp_path):
    import pytest
    from thinkingbox_training.campaigns import run_campaign, load_campaign
    from thinkingbox_training.cli import main
    from thinkingbox_training.budgets import BudgetsDiffer
    from thinkingbox_training.metrics import compare
    from thinkingbox_training.policies import SamplingConfig

    run = {'max_turns': 10, 'max_tokens_per_turn': 96, 'max_episode_tokens': 8192}
    run_campaign(
        tmp_path / 'probe', _tasks(), 'scripted', 2, progress=False, budgets=run, sampling=SamplingConfig(max_tokens=96)
    )
    run_campaign(tmp_path / 'eval', _tasks(), 'scripted', 2, progress=False)
    probe, ev = (json.loads((tmp_path / d / 'campaign.json').read_text())['budgets'] for d in ('probe', 'eval'))
    assert probe == {'source': 'run', **run}
    assert ev == {'source': 'tasks', 'max_turns': [7, 8], 'max_tokens_per_turn': 256, 'max_episode_tokens': 7168}
    a, b = load_campaign(tmp_path / 'probe'), load_campaign(tmp_path / 'eval')
    assert (a.budgets, b.budgets) == (probe, ev)
    with pytest.warns(BudgetsDiffer, match=r'base: 10 turns, 96 tokens a turn.*trained: 7-8 turns, 256 tokens a turn'):
        compare(a, b)
    with pytest.warns(BudgetsDiffer):
        main(['compare', str(tmp_path / 'probe'), str(tmp_path / 'eval')])


def test_the_jobs_probe_uses_the_recipes_budgets_and_the_bench_its_own(tmp_path):
    from trl import TrlParser
    from thinkingbox_training.grpo import TBTConfig
    from thinkingbox_training.pipeline import campaign_settings

    (args,) = TrlParser([TBTConfig]).parse_args_and_config(
        ['--config', 'scripts/recipes/tiny_cpu.yaml', '--output_dir', str(tmp_path), '--dry_run', 'true']
    )
    how = campaign_settings(args, _tasks())
    assert how['probe'].budgets == {
        'max_turns': args.max_turns,
        'max_tokens_per_turn': args.max_tokens_per_turn,
        'max_episode_tokens': args.max_episode_tokens,
    }
    assert how['evaluate'].budgets is None and how['evaluate'].sampling.max_tokens == 256


def test_training_spend_counts_every_generated_episode(tmp_path):
    from thinkingbox_training.pipeline import training_spend

    g = lambda n: [['t', i, 1] for i in range(n)]
    steps = [{'step': 0, 'groups': [g(4), g(4), g(4)]}, {'step': 1, 'groups': [g(4), g(4)]}]
    hist = [{'step': 1, 'tbt/episode_tokens': 100.0}, {'step': 2, 'tbt/episode_tokens': 250.0}, {'train_runtime': 1.0}]
    (tmp_path / 'training_log.json').write_text(json.dumps({'steps': steps, 'log_history': hist}))
    assert training_spend(tmp_path) == {'episodes': 20, 'tokens': 12 * 100 + 8 * 250, 'usd': None}
    assert training_spend(tmp_path / 'none') is None


def test_headline_rows_name_the_interval():
    from thinkingbox_training.pipeline import headline_rows

    b = {
        'pass@1': 0.5,
        'pass@1_lo': 0.4,
        'pass@1_hi': 0.6,
        'pass@1_interval': '95% bootstrap over tasks',
        'pass@4': 0.7,
        'observed_kk': 3,
        'tasks': 10,
    }
    (row,) = headline_rows({'k': 4, 'bench_tasks': 10, 'base': b, 'trained': b})
    assert row['pass@1 base [95% bootstrap over tasks]'] == '50.0% [40.0%, 60.0%]'
