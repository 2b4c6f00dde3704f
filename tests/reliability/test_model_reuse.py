"""The main job's model folder is its own: the launch commands we print train elsewhere, and `tbt main` reuses only a
model it trained itself from this run's inputs (recipe and its content, base model, pool, steps). A model it did not
train stops the job before any work, naming the folder and what to do; `--adopt-model` takes it, loudly."""

import re, shlex
from pathlib import Path
import pytest, yaml
from thinkingbox_training.pipeline import MainJob, TRAINED_BY, mark_trained, reuse_model, run_main, training_inputs
from thinkingbox_training.policies import tiny_qwen3
from grpo_fixtures import tokenizer

ROOT = Path(__file__).resolve().parents[2]
MAIN_MODEL = (ROOT / MainJob().dir / 'model').resolve()  # data/runs/tiny-cpu/model: the folder `make train` uses


def launch_commands() -> list:
    "(file, argv) of every `accelerate launch ... scripts/train.py ...` command written in a comment or docstring."
    out = []
    for f in [*sorted((ROOT / 'scripts' / 'accelerate').glob('*.yaml')), ROOT / 'scripts' / 'train.py']:
        lines = [re.sub(r'^\s*#?\s*', '', l) for l in f.read_text().splitlines()]
        text = re.sub(r'\\\s*\n\s*', ' ', '\n'.join(lines))  # join continued lines
        for line in text.splitlines():
            if line.startswith('accelerate launch') and 'scripts/train.py' in line:
                out.append((f.name, shlex.split(line.split('#')[0])))
    return out


def output_dir(argv) -> Path | None:
    "Where a launch command's training writes: its --output_dir, else its recipe's (None: a placeholder recipe)."
    if '--output_dir' in argv:
        return (ROOT / argv[argv.index('--output_dir') + 1]).resolve()
    recipe = ROOT / argv[argv.index('--config') + 1]
    return (ROOT / yaml.safe_load(recipe.read_text())['output_dir']).resolve() if recipe.exists() else None


def test_the_launch_commands_train_elsewhere_than_the_main_job():
    cmds = launch_commands()
    assert {f for f, _ in cmds} >= {'cpu.yaml', 'cpu_2proc.yaml', 'train.py'}, cmds
    shared = [(f, ' '.join(a)) for f, a in cmds if output_dir(a) == MAIN_MODEL]
    assert not shared, f"these commands train into the main job's {MAIN_MODEL}: {shared}"


def refusal(f) -> str:
    with pytest.raises(SystemExit) as e:
        f()
    return str(e.value)


@pytest.fixture
def foreign_model(tmp_path):
    "A run folder whose model/ holds a model saved by something other than the job (as a direct training run does)."
    model = tmp_path / 'r' / 'model'
    tiny_qwen3(tokenizer()).save_pretrained(model)
    return model


def test_the_main_job_refuses_a_model_it_did_not_train_before_any_work(foreign_model):
    job = MainJob(
        run='r',
        runs_dir=str(foreign_model.parents[1]),
        task_dir=str(ROOT / 'data' / 'tasks'),
        recipe=str(ROOT / 'scripts' / 'recipes' / 'tiny_cpu.yaml'),
        base_model=str(ROOT / 'data' / 'models' / 'tiny-qwen3'),
        probe_per_family=1,
        probe_k=1,
        bench_per_family=1,
        bench_k=1,
        steps=1,
    )
    msg = refusal(lambda: run_main(job))
    assert str(foreign_model) in msg and 'did not train' in msg and '--adopt-model' in msg, msg
    assert sorted(p.name for p in foreign_model.parent.iterdir()) == ['model']  # nothing probed, nothing written


def test_adopting_a_foreign_model_is_said_loudly(foreign_model, capsys):
    assert reuse_model(foreign_model, adopt=True) is True
    assert 'WARNING' in capsys.readouterr().out


def test_a_model_the_job_trained_is_reused_only_from_the_same_inputs(tmp_path, foreign_model):
    recipe, pool = tmp_path / 'recipe.yaml', tmp_path / 'pool.txt'
    recipe.write_text((ROOT / 'scripts' / 'recipes' / 'tiny_cpu.yaml').read_text())
    pool.write_text('travel-train-001\nretail-train-002\n')
    job = MainJob(recipe=str(recipe))
    inputs = training_inputs(job, pool)
    mark_trained(foreign_model, inputs)
    assert reuse_model(foreign_model, inputs) is True and reuse_model(foreign_model) is True
    assert reuse_model(tmp_path / 'nothing-here', inputs) is False  # no model: the job trains one
    recipe.write_text(recipe.read_text().replace('max_steps: 24', 'max_steps: 25'))
    pool.write_text('travel-train-001\n')
    changed = training_inputs(MainJob(recipe=str(recipe), base_model='elsewhere', steps=3), pool)
    msg = refusal(lambda: reuse_model(foreign_model, changed))
    for field in ('recipe_sha256', 'pool_sha256', 'base_model', 'steps'):
        assert field in msg, msg
    for damage in ('{"inputs": ', '[]', '{"inputs": 3}'):
        (foreign_model / TRAINED_BY).write_text(damage)
        assert 'cannot be read' in refusal(lambda: reuse_model(foreign_model, inputs))
