"""Training resume: a finished run resumed trains no further step (with or without its training_log.json); a
checkpoint whose save was cut short (no trainer_state.json, a cut or missing tbt_state.json) is skipped for the last
complete one, named; a recipe with a bad value or an unknown key is one line naming the file and key, no traceback;
a real `scripts/train.py` killed with SIGKILL mid-run resumes to the same steps (slow)."""

import json, os, re, shutil, signal, subprocess, sys, time
from pathlib import Path
import pytest, torch
from safetensors.torch import load_file

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / 'tests'))
os.environ.setdefault('TRL_EXPERIMENTAL_SILENCE', '1')
from grpo_fixtures import pay_task, tokenizer  # noqa: E402
from thinkingbox_training.grpo import ConfigError, main, parse_config  # noqa: E402
from thinkingbox_training.policies import tiny_qwen3  # noqa: E402
from thinkingbox_training.tasks import write_tasks  # noqa: E402

LOGGER = 'thinkingbox_training.grpo'


def recipe(d: Path, **kw) -> str:
    "A tiny recipe in `d`: the random tiny model plays its own episodes, a checkpoint every step."
    tok = tokenizer()
    if not (d / 'base').exists():
        tiny_qwen3(tok).save_pretrained(d / 'base')
        tok.save_pretrained(d / 'base')
    write_tasks([pay_task(i) for i in range(8)], d / 'tasks.jsonl')
    lines = {
        'task_files': [str(d / 'tasks.jsonl')],
        'policy_model': str(d / 'base'),
        'output_dir': str(d / 'run'),
        'groups_per_step': 2,
        'group_size': 2,
        'max_turns': 1,
        'max_tokens_per_turn': 6,
        'max_refill_rounds': 0,
        'use_cpu': True,
        'bf16': False,
        'gradient_checkpointing': False,
        'report_to': 'none',
        'disable_tqdm': True,
        'save_strategy': 'steps',
        'save_steps': 1,
        'max_steps': 3,
        **kw,
    }
    (d / 'r.yaml').write_text(''.join(f'{k}: {json.dumps(v)}\n' for k, v in lines.items()))
    return str(d / 'r.yaml')


def log(run: Path) -> dict:
    return json.loads((run / 'training_log.json').read_text())


def decisions(steps: list) -> list:
    keys = ('step', 'groups', 'kinds', 'rounds', 'selected', 'fillers', 'skipped')
    return [{k: s[k] for k in keys} for s in steps]


@pytest.fixture(scope='module')
def finished(tmp_path_factory) -> Path:
    "A run of 3 steps that finished: checkpoint-1..3, the model and training_log.json in run/."
    d = tmp_path_factory.mktemp('finished')
    assert main(['--config', recipe(d)]) == 0
    assert sorted(p.name for p in (d / 'run').glob('checkpoint-*')) == ['checkpoint-1', 'checkpoint-2', 'checkpoint-3']
    return d


def copy(finished: Path, tmp_path: Path) -> tuple:
    "The finished run copied to `tmp_path` (its recipe pointed there): (recipe, run folder)."
    shutil.copytree(finished, tmp_path, dirs_exist_ok=True)
    return recipe(tmp_path), tmp_path / 'run'


@pytest.mark.parametrize('killed_before_the_log', [False, True])
def test_a_finished_run_resumed_trains_no_further_step(finished, tmp_path, caplog, killed_before_the_log):
    r, run = copy(finished, tmp_path)
    want = log(run)
    if killed_before_the_log:  # killed after saving checkpoint-3, before main wrote the model and its log
        for f in ('training_log.json', 'model.safetensors', 'config.json'):
            (run / f).unlink()
    with caplog.at_level('WARNING', logger=LOGGER):
        assert main(['--config', r, '--resume_from_checkpoint', 'true']) == 0
    assert sorted(p.name for p in run.glob('checkpoint-*')) == ['checkpoint-1', 'checkpoint-2', 'checkpoint-3']
    got = log(run)
    assert [s['step'] for s in got['steps']] == [0, 1, 2] and got['episodes_used'] == want['episodes_used'] == 12
    assert [h for h in got['log_history'] if 'loss' in h] == [h for h in want['log_history'] if 'loss' in h]
    assert decisions(got['steps']) == decisions(want['steps'])
    assert any('checkpoint-3 is step 3 of max_steps=3: the run is finished' in m for m in caplog.messages)
    saved, last = load_file(run / 'model.safetensors'), load_file(run / 'checkpoint-3' / 'model.safetensors')
    assert saved.keys() == last.keys() and all(torch.equal(saved[k], last[k]) for k in saved)


@pytest.mark.parametrize('cut', ['no trainer_state.json', 'tbt_state.json cut short', 'no tbt_state.json'])
def test_a_half_written_checkpoint_is_skipped_for_the_last_complete_one(finished, tmp_path, caplog, cut):
    "The save of checkpoint-3 cut short: the run resumes from checkpoint-2, says which it skipped, and redoes step 3."
    r, run = copy(finished, tmp_path)
    want = log(run)
    for f in ('training_log.json', 'model.safetensors'):
        (run / f).unlink()
    ck = run / 'checkpoint-3'
    if cut == 'no trainer_state.json':
        (ck / 'trainer_state.json').unlink()
    elif cut == 'no tbt_state.json':
        (ck / 'tbt_state.json').unlink()
    else:
        text = (ck / 'tbt_state.json').read_text()
        (ck / 'tbt_state.json').write_text(text[: len(text) // 2])
    with caplog.at_level('WARNING', logger=LOGGER):
        assert main(['--config', r, '--resume_from_checkpoint', 'true']) == 0
    said = [m for m in caplog.messages if 'checkpoint-3 is incomplete' in m]
    assert len(said) == 1 and cut in said[0] and said[0].endswith('resuming from ' + str(run / 'checkpoint-2'))
    got = log(run)
    assert decisions(got['steps']) == decisions(want['steps'])  # step 3 redone as the original did it
    assert len([h for h in got['log_history'] if 'loss' in h]) == 3
    assert (ck / 'trainer_state.json').exists() and json.loads((ck / 'tbt_state.json').read_text())['global_step'] == 3


def test_a_named_half_written_checkpoint_falls_back_to_the_one_before(finished, tmp_path, caplog):
    "As the study resumes: naming the last checkpoint, which a kill cut short."
    r, run = copy(finished, tmp_path)
    (run / 'checkpoint-3' / 'trainer_state.json').unlink()
    (run / 'checkpoint-2' / 'tbt_state.json').write_text('{"global_step": 2, "step_l')
    with caplog.at_level('WARNING', logger=LOGGER):
        assert main(['--config', r, '--resume_from_checkpoint', str(run / 'checkpoint-3')]) == 0
    assert [m.split(' is incomplete')[0] for m in caplog.messages if 'is incomplete' in m] == [
        str(run / 'checkpoint-3'),
        str(run / 'checkpoint-2'),
    ]
    assert 'resuming from ' + str(run / 'checkpoint-1') in caplog.text
    assert [s['step'] for s in log(run)['steps']] == [0, 1, 2]


def test_no_complete_checkpoint_is_one_line_naming_each(finished, tmp_path):
    r, run = copy(finished, tmp_path)
    for n in (1, 2, 3):
        (run / f'checkpoint-{n}' / 'trainer_state.json').unlink()
    each = '; '.join(f'checkpoint-{n}: no trainer_state.json' for n in (3, 2, 1))
    with pytest.raises(ConfigError, match=re.escape(f'no complete checkpoint in {run} ({each})')):
        main(['--config', r, '--resume_from_checkpoint', 'true'])
    assert sorted(p.name for p in run.glob('checkpoint-*')) == ['checkpoint-1', 'checkpoint-2', 'checkpoint-3']


# ---------------------------------------------------------------- recipes


@pytest.mark.parametrize(
    'line, said',
    [
        ('groups_per_step: many', "groups_per_step: 'many' is not an int"),
        ('group_size: 2.5', 'group_size: 2.5 is not an int'),
        ('max_turns: true', 'max_turns: True is not an int'),
        ('groups_per_step: null', 'groups_per_step: null is not allowed'),
        ('task_files: tasks.jsonl', "task_files: expects a list, got 'tasks.jsonl'"),
        ('learning_rate: fast', "learning_rate: 'fast' is not a float"),
        ('save_strategy: sometimes', "save_strategy: 'sometimes' is not one of no, steps, epoch, best"),
        ('use_cpu: maybe', "use_cpu: 'maybe' is not a bool"),
        ('grups_per_step: 2', "unknown key 'grups_per_step' (did you mean 'groups_per_step'?)"),
        ('groups_per_step: 0', 'need groups_per_step >= 1 and group_size >= 2, got 0 and 2'),
    ],
)
def test_a_bad_recipe_is_one_line_naming_file_and_key(tmp_path, line, said):
    key = line.split(':')[0]
    base = [x for x in Path(recipe(tmp_path)).read_text().splitlines() if not x.startswith(key + ':')]
    (tmp_path / 'bad.yaml').write_text('\n'.join(base + [line]) + '\n')
    with pytest.raises(ConfigError) as e:
        parse_config(['--config', str(tmp_path / 'bad.yaml')])
    assert str(e.value) == f'{tmp_path / "bad.yaml"}: {said}'


def test_scripts_train_refuses_a_bad_recipe_in_one_line(tmp_path, monkeypatch, capsys):
    "scripts/train.py as `python` runs it: its exit message is the one line, so Python prints it alone, no traceback."
    import runpy

    (tmp_path / 'bad.yaml').write_text(Path(recipe(tmp_path)).read_text() + 'groups_per_step: many\n')
    monkeypatch.setattr(sys, 'argv', ['train.py', '--config', str(tmp_path / 'bad.yaml'), '--dry-run'])
    with pytest.raises(SystemExit) as e:
        runpy.run_path(str(ROOT / 'scripts' / 'train.py'), run_name='__main__')
    assert e.value.code == f"error: {tmp_path / 'bad.yaml'}: groups_per_step: 'many' is not an int"  # exit status 1
    assert capsys.readouterr().out == '' and not (tmp_path / 'run').exists()


# ---------------------------------------------------------------- kill -9 (slow)


@pytest.mark.slow
def test_a_training_run_killed_mid_save_resumes_to_the_same_steps(finished, tmp_path):
    """A real scripts/train.py killed with SIGKILL as checkpoint-2 appears (inside or just after its save), resumed with
    `--resume_from_checkpoint true`: the same three steps as the run that was never killed, and no fourth."""
    r = recipe(tmp_path)
    env = {**os.environ, 'PYTHONPATH': str(ROOT), 'OMP_NUM_THREADS': '1'}
    cmd = [sys.executable, str(ROOT / 'scripts' / 'train.py'), '--config', r]
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while not (tmp_path / 'run' / 'checkpoint-2').exists():
        assert p.poll() is None and time.monotonic() < deadline, 'the run ended before checkpoint-2'
        time.sleep(0.005)
    p.send_signal(signal.SIGKILL)
    p.wait()
    assert not (tmp_path / 'run' / 'training_log.json').exists()
    q = subprocess.run(cmd + ['--resume_from_checkpoint', 'true'], env=env, capture_output=True, text=True, timeout=600)
    assert q.returncode == 0, q.stderr[-2000:]
    got, want = log(tmp_path / 'run'), log(finished / 'run')
    assert decisions(got['steps']) == decisions(want['steps'])
    assert not (tmp_path / 'run' / 'checkpoint-4').exists()
