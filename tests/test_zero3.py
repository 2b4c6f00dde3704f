"""DeepSpeed ZeRO-3 over two CPU processes (`accelerate launch`, scripts/accelerate/zero3_cpu_2proc.yaml) trains two
GRPO steps in server mode against the stand-in vLLM server: the sharded parameters are gathered and sent to the server
at every step's sync through TRL's `sync_weights` (gloo transport), with no deadlock, and the run equals one plain
process's."""

import glob, json, os, signal, socket, subprocess, sys
from pathlib import Path
import pytest
from safetensors.torch import load_file
from thinkingbox_training.policies import HFPolicy, tiny_qwen3
from thinkingbox_training.vllm_server import VLLMStandIn
from conftest import skip_unless_ci
from grpo_fixtures import tokenizer
from zero3_ranks import run

HERE = Path(__file__).parent
TIMEOUT_S = 900  # DeepSpeed's first use compiles its shared-memory op (2-3 minutes); a deadlock fails here, not hangs


def free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


class Served:
    "The stand-in, with a copy of its weights kept at every weight load."

    def __init__(self):
        tok = tokenizer()
        self.srv = VLLMStandIn(HFPolicy(tiny_qwen3(tok), tok), model_name='tiny')
        self.loaded, real = [], self.srv.finish_weight_update

        def finish(body):
            out = real(body)
            self.loaded.append({k: v.clone() for k, v in self.srv.policy.model.state_dict().items()})
            return out

        self.srv.finish_weight_update = finish


def launch_two(out: Path, url: str) -> subprocess.CompletedProcess:
    "Two ZeRO-3 ranks under `accelerate launch`; on a timeout the whole process group is killed and the test fails."
    cmd = [
        sys.executable,
        '-m',
        'accelerate.commands.launch',
        '--config_file',
        'scripts/accelerate/zero3_cpu_2proc.yaml',
    ]
    cmd += ['--main_process_port', str(free_port()), str(HERE / 'zero3_ranks.py'), str(out), url, str(free_port())]
    env = {**os.environ, 'OMP_NUM_THREADS': '1', 'PYTHONPATH': os.pathsep.join([str(HERE.parent), str(HERE)])}
    p = subprocess.Popen(cmd, cwd=HERE.parent, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         start_new_session=True)  # fmt: skip
    try:
        stdout, _ = p.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        locks = glob.glob(os.path.expanduser('~/.cache/torch_extensions/*/deepspeed_shm_comm/lock'))
        hint = f'; a stale build lock may hang DeepSpeed: delete {locks}' if locks else ''
        pytest.fail(f'two ZeRO-3 processes did not finish two steps in {TIMEOUT_S} s (a deadlock?){hint}')
    return subprocess.CompletedProcess(cmd, p.returncode, stdout)


@pytest.mark.slow
def test_two_zero3_processes_sync_gathered_weights_each_step_and_train_as_one_process(tmp_path):
    try:
        import deepspeed  # noqa: F401
    except ImportError:
        skip_unless_ci('DeepSpeed is not installed (the train extra installs it)')
    two, one = Served(), Served()
    (tmp_path / 'two').mkdir(), (tmp_path / 'one').mkdir()
    with two.srv:
        p = launch_two(tmp_path / 'two', two.srv.url)
        assert p.returncode == 0, p.stdout[-3000:]
    with one.srv:  # the reference: one plain process, in this one
        run(str(tmp_path / 'one'), one.srv.url, free_port())
    a, b, ref = [
        json.loads((tmp_path / d / f'rank{i}.json').read_text()) for d, i in (('two', 0), ('two', 1), ('one', 0))
    ]
    assert [(r['rank'], r['world'], r['distributed_type'], r['zero_stage']) for r in (a, b)] == [
        (0, 2, 'DEEPSPEED', 3),
        (1, 2, 'DEEPSPEED', 3),
    ]
    assert a['numel'] == b['numel'] == ref['numel'] and a['held'] + b['held'] >= a['numel']
    assert max(a['held'], b['held']) < 0.6 * a['numel']  # each rank holds about half of every parameter: sharded
    # one sync a step, each passing the weight check: the server scores the probe as the trainer does
    for r in (a, b, ref):
        assert [s['step'] for s in r['sync_log']] == [0, 1] and max(s['weight_gap'] for s in r['sync_log']) < 1e-5
    assert [w['version'] for w in two.srv.weight_loads] == [1, 2] and len(two.loaded) == 2
    # the same episodes (tasks, seeds, rewards) and decisions as one process, and the same on both ranks
    assert a['step_log'] == b['step_log']
    assert [s['groups'] for s in a['step_log']] == [s['groups'] for s in ref['step_log']]
    assert [s['kinds'] for s in a['step_log']] == [s['kinds'] for s in ref['step_log']]
    assert not any(s['skipped'] for s in a['step_log'])
    # synced weights: the first sync sends the initial weights exactly; the second, after a step of Adam at lr 1e-2
    # (every weight moves by about 1e-2), is one process's within 1e-4 (2.8e-5 measured: ZeRO-3 sums the two ranks'
    # gradients in another order)
    moved = max((two.loaded[1][k] - two.loaded[0][k]).abs().max().item() for k in two.loaded[0])
    gap = [max((x[k] - y[k]).abs().max().item() for k in x) for x, y in zip(two.loaded, one.loaded, strict=True)]
    assert gap[0] == 0.0 and gap[1] < 1e-4 and moved > 5e-3, (gap, moved)
    assert a['losses'] == pytest.approx(ref['losses'], abs=1e-6)  # DAPO's loss of a fresh batch: about 2e-8
    assert a['grad_norms'] == pytest.approx(ref['grad_norms'], rel=1e-5)  # 2.3e-6 measured
    # the trained model is saved as a plain directory (gathered from the shards), one process's within 1e-4 (2.8e-5)
    final = [load_file(tmp_path / d / 'model' / 'model.safetensors') for d in ('two', 'one')]
    assert final[0].keys() == final[1].keys()
    assert max((final[0][k] - final[1][k]).abs().max().item() for k in final[0]) < 1e-4


def test_use_cpu_false_under_a_deepspeed_launch_without_gpus_is_refused(tmp_path, monkeypatch):
    "The launch benchmarks/zero3_cpu_repro.py shows failing in DeepSpeed's batch-size check is refused up front."
    import torch
    from thinkingbox_training.grpo import TBTConfig

    monkeypatch.setenv('ACCELERATE_USE_DEEPSPEED', 'true')  # as `accelerate launch` sets it for a DeepSpeed config
    monkeypatch.setenv('WORLD_SIZE', '2')
    monkeypatch.setattr(torch.accelerator, 'is_available', lambda: False)
    with pytest.raises(
        ValueError, match=r'use_cpu: false under a DeepSpeed launch of 2 processes .* set use_cpu: true'
    ):
        TBTConfig(output_dir=str(tmp_path), groups_per_step=2, group_size=4, bf16=False, report_to='none')
