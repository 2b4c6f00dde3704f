"""`tbt evaluate` and `tbt probe` leftovers: a recipe is checked as training checks it (an unknown key with a "did you
mean", a wrong type, broken YAML: one line naming the file, nothing run), and a campaign folder that was renamed is
refused with the way to adopt it under its new name, which `--adopt` does without losing or rerunning an attempt."""

import json
from pathlib import Path
import pytest
from thinkingbox_training.campaigns import load_campaign, read_meta
from thinkingbox_training.cli import main
from thinkingbox_training.tasks import Task, ToolCallSpec, write_tasks

ROOT = Path(__file__).parents[2]
RECIPE = (ROOT / 'scripts' / 'recipes' / 'tiny_cpu.yaml').read_text()


@pytest.fixture
def task_file(tmp_path):
    f = tmp_path / 'tasks.jsonl'
    write_tasks(
        [
            Task(
                uid=f'demo/pay/{i}',
                domain='demo',
                family='pay',
                split=('bench', 'train')[i % 2],
                query=f'Pay {i + 1} cents from AC-1.',
                reply='Paid.',
                golden=[ToolCallSpec(name='pay', arguments={'account_id': 'AC-1', 'amount_cents': i + 1})],
            )
            for i in range(4)
        ],
        f,
    )
    return f


@pytest.mark.parametrize(
    'text,says',
    [
        (
            RECIPE.replace('temperature: 1.0', 'temprature: 1.0'),
            "unknown key 'temprature' (did you mean 'temperature'?)",
        ),
        (RECIPE.replace('temperature: 1.0', 'temperature: hot'), "temperature: 'hot' is not a float"),
        (RECIPE.replace('max_turns: 10', 'max_turns: [10'), 'not YAML'),
        ('- a list\n', 'a recipe is a YAML mapping'),
    ],
    ids=['unknown key', 'wrong type', 'broken YAML', 'not a mapping'],
)
def test_evaluate_refuses_a_bad_recipe_in_one_line_naming_it(text, says, task_file, tmp_path, capsys):
    recipe, out = tmp_path / 'r.yaml', tmp_path / 'out'
    recipe.write_text(text)
    for cmd in ('evaluate', 'probe') if 'temprature' in text else ('evaluate',):  # probe reads it the same way
        argv = [cmd, '--tasks', str(task_file), '--recipe', str(recipe), '--out', str(out), '--quiet']
        assert main(argv) == 1
        err = capsys.readouterr().err.strip()
        assert err.startswith(f'tbt {cmd}: {recipe}: ') and says in err and '\n' not in err, err
    assert not out.exists()  # nothing run


def test_a_renamed_campaign_folder_is_adopted_under_its_new_name(task_file, tmp_path, capsys):
    argv = ['evaluate', '--tasks', str(task_file), '--k', '2', '--quiet', '--tool-transport', 'inprocess']
    assert main([*argv, '--out', str(tmp_path / 'first')]) == 0
    (tmp_path / 'first').rename(tmp_path / 'second')
    store = (tmp_path / 'second' / 'attempts.sqlite').read_bytes()
    assert main([*argv, '--out', str(tmp_path / 'second')]) == 2
    err = capsys.readouterr().err
    assert "holds campaign 'first', not 'second'" in err and '--adopt resumes it' in err, err
    assert (tmp_path / 'second' / 'attempts.sqlite').read_bytes() == store  # refused: nothing written
    assert main([*argv, '--out', str(tmp_path / 'second'), '--adopt']) == 0
    assert 'executed 0 attempt(s) this run' in capsys.readouterr().out  # nothing lost, nothing run again
    assert read_meta(tmp_path / 'second')['campaign'] == 'second'
    assert load_campaign(tmp_path / 'second').rewards.shape == (2, 2)
    lines = (tmp_path / 'second' / 'attempts.jsonl').read_text().splitlines()
    assert len(lines) == 4 and {json.loads(x)['campaign'] for x in lines} == {'second'}
    assert main([*argv, '--out', str(tmp_path / 'second')]) == 0  # adopted: the plain command resumes it
