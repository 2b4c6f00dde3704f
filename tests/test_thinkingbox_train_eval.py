"""Training sees what evaluation sees: for one ThinkingBox development task and seed, the first request the agent is
given (both system messages, the query, the whole tool list in order with schemas, the chat parameters and seed), the
first request to the simulated user and the end rules are byte-equal between a training episode (`TBTTrainer`'s own
episode runner) and an evaluation episode through `tbt thinkingbox-bench`. The same recording policy plays the agent
on both sides (a token-level scripted policy in the tiny tokenizer), and one recording endpoint plays the user."""

import json, os, sys
from pathlib import Path
import pytest

sys.path.insert(0, str(Path(__file__).parent))

UID = 'banking.py:test_transfer_and_balance'  # a development task: trainable, with a user context and a judge question


@pytest.fixture(scope='module')
def data():
    from thinkingbox_training.thinkingbox import DATA_UNSET, ENV, data_dir

    if not os.environ.get(ENV):
        pytest.skip(DATA_UNSET)
    return data_dir()


def _recorder(tok, seen: list):
    from thinkingbox_training.policies import ScriptedPolicy

    class Recording(ScriptedPolicy):
        "The scripted expert, keeping every request the engine gives it (the agent's side of the episode)."

        async def generate(self, requests):
            seen.extend(requests)
            return await super().generate(requests)

    return Recording(tokenizer=tok, name='recording')


def _first(requests: list, episode_turn: int = 0):
    r = next(q for q in requests if q.turn == episode_turn)
    return json.dumps(
        {'messages': r.messages, 'tools': r.tools, 'chat': r.chat, 'seed': r.seed, 'max_tokens': r.max_tokens},
        ensure_ascii=False,
    )


@pytest.mark.slow  # a trainer and its model are made: ~9 s
def test_a_training_episode_opens_and_ends_as_an_evaluation_episode(data, tmp_path, monkeypatch, capsys):
    from grpo_fixtures import cpu_config, tokenizer
    from thinkingbox_training import thinkingbox as tb
    from thinkingbox_training.episode import protocol_for
    from thinkingbox_training.grpo import TBTTrainer
    from thinkingbox_training.policies import tiny_qwen3
    from thinkingbox_training.users import StandInServer

    tok = tokenizer()
    task = next(t for t in tb.load_thinkingbox('banking.py') if t.uid == UID)
    train_req, eval_req = [], []
    with StandInServer(chat=lambda messages: 'Please go ahead.') as user:
        # evaluation: `tbt thinkingbox-bench` as a user runs it, its policy the recording one
        monkeypatch.setattr(tb, 'make_tb_policy', lambda spec, sampling=None: _recorder(tok, eval_req))
        monkeypatch.setenv('TBT_USER_BASE_URL', user.base_url)
        kw = dict(release='banking.py', task=UID, k=1, user='openai:user', judge='none', quiet=True, caps=True)
        assert tb.thinkingbox_bench(**kw, out=str(tmp_path / 'eval')) == 0, capsys.readouterr().err
        eval_user = [b for p, b in user.requests]
        user.requests.clear()
        # training: the trainer's own episode runner, its recipe's budgets the task's (4,096 tokens a turn, 131,072 an
        # episode, 40 turns: the caps `--caps` keeps), its sampling the bench's (temperature 1)
        cfg = cpu_config(
            tmp_path / 'train',
            user='openai:user',
            user_base_url=user.base_url,
            max_tokens_per_turn=4096,
            max_episode_tokens=131072,
            max_turns=40,
            groups_per_step=1,
        )
        pol = _recorder(tok, train_req)
        t = TBTTrainer(tiny_qwen3(tok), cfg, [task], processing_class=tok, policy=pol, grader=tb.StateOnly())
        eps = t._runner(pol).run_sync([(t.pool[UID], 0)])  # the task with the recipe's budgets
        train_user = [b for p, b in user.requests]
    assert eps and train_req and eval_req and train_user and eval_user
    assert _first(train_req) == _first(eval_req)  # system messages, query, tools in order with schemas, parameters
    assert json.dumps(train_user[0], sort_keys=True) == json.dumps(eval_user[0], sort_keys=True)
    p = protocol_for(task)
    ended = json.loads((tmp_path / 'eval' / 'attempts.jsonl').read_text().splitlines()[0])['termination']
    assert (type(p).__name__, p.max_user_turns, p.end_turn_tools) == (
        'ThinkingBoxProtocol',
        10,
        ('InjectionAttackInToolResponse',),
    )
    assert eps[0].trajectory.termination == ended  # the same rule ended both
