"Rubric judges: an item the rule judge cannot read is never passed; an LLM judge gets a budget it can reason in."

import pytest
from thinkingbox_training.episode import EpisodeRunner
from thinkingbox_training.grader import Grader, JudgeError, OpenAIJudge, RuleJudge, JUDGE_MAX_TOKENS
from thinkingbox_training.policies import ScriptedPolicy
from thinkingbox_training.tasks import RubricItem, Task, ToolCallSpec
from thinkingbox_training.users import StandInServer

PAY = ToolCallSpec(name='pay', arguments={'account_id': 'AC-1', 'amount_cents': 3000})


def task(uid, *items):
    return Task(
        uid=uid,
        domain='demo',
        family='pay',
        split='bench',
        query='Please pay 30.00 from AC-1.',
        golden=[PAY],
        reply='Paid: your balance is 70.00.',
        rubric=list(items),
    )


UNREAD = RubricItem(question='Does the agent confirm the payment?')  # as every ThinkingBox item: no phrases
READ = RubricItem(question='Does the agent state the balance?', require=['70.00'])


def test_the_rule_judge_never_answers_an_item_it_cannot_read():
    with pytest.raises(JudgeError, match='cannot read rubric item'):
        import asyncio

        asyncio.run(RuleJudge().ask(UNREAD, 'Paid: your balance is 70.00.'))


def test_a_task_the_rule_judge_cannot_read_is_refused_before_any_episode():
    runner = EpisodeRunner(ScriptedPolicy(), grader=Grader(judge=RuleJudge()))
    with pytest.raises(
        ValueError,
        match=r'1 task\(s\) have rubric items the rule judge cannot read .* '
        r"e\.g\. demo/pay/unread: 'Does the agent confirm the payment\?'; "
        r'give an LLM judge \(--judge openai:MODEL\)',
    ):
        runner.run_sync([(task('demo/pay/read', READ), 0), (task('demo/pay/unread', UNREAD), 0)])
    [e] = runner.run_sync([(task('demo/pay/read', READ), 0)])  # our domains' items list phrases: judged as before
    assert e.reward == 1


def test_a_campaign_with_such_a_task_is_refused_and_writes_nothing(tmp_path):
    from thinkingbox_training.campaigns import CampaignError, run_campaign

    with pytest.raises(CampaignError, match='rule judge cannot read'):
        run_campaign(tmp_path / 'c', [task('demo/pay/unread', UNREAD)], 'scripted', 1, progress=False)
    assert sorted(p.name for p in (tmp_path / 'c').iterdir()) == ['campaign.lock']


def reasoning_judge(answer, finish='stop', apart=False):
    """A judge model that thinks aloud before it answers: in its content, as a server without a reasoning parser sends
    it, or (`apart`) in `reasoning_content`, as vLLM's reasoning parser does, with the content None until it answers."""

    def chat(messages):
        thought = 'The agent says it paid 30.00.'
        msg = (
            {'role': 'assistant', 'content': answer or None, 'reasoning_content': thought}
            if apart
            else {'role': 'assistant', 'content': f'<think>\n{thought}\n</think>\n\n{answer}'}
        )
        return {
            'id': 'c',
            'object': 'chat.completion',
            'created': 0,
            'model': 'j',
            'choices': [{'index': 0, 'finish_reason': finish, 'message': msg}],
            'usage': {'prompt_tokens': 9, 'completion_tokens': 300, 'total_tokens': 309},
        }

    return chat


@pytest.mark.parametrize('max_tokens, apart', [(None, False), (512, True)])
def test_a_reasoning_judge_gets_a_budget_it_can_meet(max_tokens, apart):
    with StandInServer(chat=reasoning_judge('Yes.', apart=apart)) as srv:
        judge = OpenAIJudge(model='j', base_url=srv.base_url, max_retries=0, max_tokens=max_tokens)
        [e] = EpisodeRunner(ScriptedPolicy(), grader=Grader(judge=judge)).run_sync([(task('demo/pay/j', UNREAD), 0)])
        sent = [b for p, b in srv.requests if p.endswith('/chat/completions')]
    assert (e.trajectory.status, e.reward) == ('ok', 1)
    assert [b['max_tokens'] for b in sent] == [max_tokens or JUDGE_MAX_TOKENS] and JUDGE_MAX_TOKENS >= 1024


@pytest.mark.parametrize('apart', [False, True])
def test_a_judge_that_spends_its_budget_is_a_system_error_that_says_so(apart):
    with StandInServer(chat=reasoning_judge('', finish='length', apart=apart)) as srv:
        judge = OpenAIJudge(model='j', base_url=srv.base_url, max_retries=0, max_tokens=64)
        [e] = EpisodeRunner(ScriptedPolicy(), grader=Grader(judge=judge)).run_sync([(task('demo/pay/j', UNREAD), 0)])
    assert e.trajectory.status == 'system_error' and e.reward is None
    assert 'used its whole budget of 64 tokens without a yes or no' in e.trajectory.system_error
    assert '--judge-max-tokens' in e.trajectory.system_error


def test_the_judge_budget_is_a_cli_and_recipe_value(tmp_path, monkeypatch):
    from thinkingbox_training.campaigns import _judge, recipe_budgets
    from thinkingbox_training.grpo import TBTConfig, make_judge

    assert _judge('openai:j', 300).judge.max_tokens == 300 and _judge('openai:j').judge.max_tokens == JUDGE_MAX_TOKENS
    r = tmp_path / 'r.yaml'
    r.write_text('max_turns: 4\nmax_tokens_per_turn: 64\nmax_episode_tokens: 512\njudge_max_tokens: 900\n')
    assert recipe_budgets(str(r))[1]['judge_max_tokens'] == 900
    assert make_judge('openai:j', 'http://127.0.0.1:9/v1', 700).max_tokens == 700
    assert 'judge_max_tokens' in TBTConfig.__dataclass_fields__


def test_one_judge_parser_for_the_command_line_recipes_and_training():
    from thinkingbox_training import campaigns, grpo
    from thinkingbox_training.campaigns import _judge, make_judge

    assert grpo.make_judge is make_judge  # training names its judge with the campaigns' parser
    assert _judge('none').judge is None and _judge('').judge.name == RuleJudge().name  # --judge none: no judge
    assert str(make_judge('openai:j', 'http://127.0.0.1:9/v1').client.base_url) == 'http://127.0.0.1:9/v1/'
    for bad in ('gpt-4', 'openai:'):
        with pytest.raises(SystemExit, match="unknown judge .*: use 'rule', 'openai:MODEL' or 'none'"):
            _judge(bad)
        with pytest.raises(ValueError, match="unknown judge .*: use 'rule', 'openai:MODEL' or 'none'"):
            make_judge(bad)
    with pytest.raises(SystemExit, match='--judge-max-tokens must be at least 1'):
        campaigns._judge('openai:j', -1)


def test_a_recipe_means_one_run_spec_read_by_trainings_parser(tmp_path):
    """`RunSpec.from_recipe` (probing) reads a recipe with training's own parser: what a recipe states is kept, what it
    leaves out is training's default, a GPU recipe reads on any machine, and a recipe training refuses is refused."""
    import yaml
    from thinkingbox_training.campaigns import RunSpec
    from thinkingbox_training.cli import project_dir

    recipes = sorted((project_dir() / 'scripts' / 'recipes').glob('*.yaml'))
    assert len(recipes) >= 4
    for r in recipes:
        y, spec = yaml.safe_load(r.read_text()), RunSpec.from_recipe(r)
        assert spec.budgets == {f: y[f] for f in spec.budgets} and spec.sampling.max_tokens == y['max_tokens_per_turn']
        assert (spec.sampling.temperature, spec.sampling.top_p, spec.sampling.top_k) == (
            y['temperature'],
            y['top_p'],
            y.get('top_k', 0),
        ), r.name
        assert (spec.sampling.seed, spec.judge) == (y['seed'], y['judge']), r.name
    bare = tmp_path / 'bare.yaml'  # states only its budgets: everything else is training's default
    bare.write_text('max_turns: 4\nmax_tokens_per_turn: 64\nmax_episode_tokens: 512\n')
    spec = RunSpec.from_recipe(bare)
    assert (spec.judge, spec.user, spec.sampling.seed, spec.sampling.temperature) == ('rule', 'scripted', 42, 1.0)
    assert type(spec.sampling.temperature) is float and spec.budgets == {
        'max_turns': 4,
        'max_tokens_per_turn': 64,
        'max_episode_tokens': 512,
    }
    (tmp_path / 'half.yaml').write_text('max_turns: 4\n')
    with pytest.raises(SystemExit, match='half.yaml does not state max_tokens_per_turn, max_episode_tokens'):
        RunSpec.from_recipe(tmp_path / 'half.yaml')
    (tmp_path / 'odd.yaml').write_text(bare.read_text() + 'group_size: 3\ngroups_per_step: 3\nnum_processes: 2\n')
    with pytest.raises(SystemExit, match='odd.yaml: 9 episodes per step'):  # training refuses it: so does probing
        RunSpec.from_recipe(tmp_path / 'odd.yaml')


def test_a_campaign_takes_a_run_spec_or_its_parts_never_both(tmp_path):
    from thinkingbox_training.campaigns import RunSpec, run_campaign, read_meta
    from thinkingbox_training.policies import SamplingConfig

    t = task('demo/pay/spec', READ)
    spec = RunSpec(
        SamplingConfig(max_tokens=64), {'max_turns': 4, 'max_tokens_per_turn': 64, 'max_episode_tokens': 900}
    )
    r = run_campaign(tmp_path / 'c', [t], 'scripted', 2, spec=spec, progress=False, shards=2)
    meta = read_meta(tmp_path / 'c')
    assert r['executed'] == 2 and meta['judge'] == RuleJudge().name and meta['sampling']['max_tokens'] == 64
    assert meta['budgets']['source'] == 'run' and meta['budgets']['max_turns'] == 4
    with pytest.raises(ValueError, match='a spec or its parts, not both: user'):
        run_campaign(tmp_path / 'd', [t], 'scripted', 1, spec=spec, user='scripted', progress=False)
