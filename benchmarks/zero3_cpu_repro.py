"""Two DeepSpeed ZeRO-3 processes on CPU under `accelerate launch`: why they failed, and the setting that makes them
train. Run `python benchmarks/zero3_cpu_repro.py` (about a minute a case; the first DeepSpeed use on a machine also
compiles its shared-memory op, 2-3 minutes); it launches this file once a case, on
scripts/accelerate/zero3_cpu_2proc.yaml.

accelerate's PartialState, asked for DeepSpeed (`ACCELERATE_USE_DEEPSPEED`, set by the launcher) on a machine with no
accelerator it knows and neither `cpu=True` nor a backend named, starts DeepSpeed's process group (2 ranks, gloo) but,
having picked no backend of its own, records `num_processes = 1` and `process_index = 0` on both ranks. It then tells
DeepSpeed `train_batch_size = micro batch x accumulation x 1`, and DeepSpeed's own check
(`DeepSpeedConfig._batch_assertion`, its world size being 2) fails: "train_batch_size is not equal to
micro_batch_per_gpu * gradient_acc_step * world_size 2 != 2 * 1 * 2". That is what a training run gets with
TrainingArguments' default `use_cpu=False` (its PartialState then names the backend `ddp_backend`, None by default).
A PartialState made first with `cpu=True` (what `use_cpu=True` does: gloo, both ranks counted) or with
`backend='gloo'` (`ddp_backend='gloo'`) counts both processes; the Accelerator made next (cpu not asked) is then
DeepSpeed's, and ZeRO-3 trains."""

import os, subprocess, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def worker(case):
    import tempfile, torch
    from accelerate import Accelerator

    if case != 'accelerate':  # the process state as GRPOTrainer's TrainingArguments make it, before its Accelerator
        from transformers import TrainingArguments

        kw = dict(use_cpu=case == 'use_cpu', ddp_backend='gloo' if case == 'ddp_backend=gloo' else None)
        _ = TrainingArguments(output_dir=tempfile.mkdtemp(), report_to='none', **kw).device  # sets the state up
    acc = Accelerator()
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    data = torch.utils.data.DataLoader(torch.randn(8, 4), batch_size=2)
    seen = f'accelerate sees process {acc.process_index} of {acc.num_processes} ({acc.distributed_type.value})'
    try:
        model, opt, data = acc.prepare(model, opt, data)
        for x in data:
            loss = model(x).pow(2).mean()
            acc.backward(loss)
            opt.step()
        zero = f'ZeRO-{acc.state.deepspeed_plugin.zero_stage}' if acc.state.deepspeed_plugin else 'no DeepSpeed:'
        outcome = f'{zero} trained {len(data)} steps, last loss {loss.item():.4f}'
    except AssertionError as e:
        outcome = f'AssertionError: {e}'
    print(f'rank {torch.distributed.get_rank()} of {torch.distributed.get_world_size()}: {seen}; {outcome}', flush=True)


def launch(case):
    cfg = ROOT / 'scripts' / 'accelerate' / 'zero3_cpu_2proc.yaml'
    cmd = [sys.executable, '-m', 'accelerate.commands.launch', '--config_file', str(cfg), '--main_process_port', '0']
    env = {**os.environ, 'OMP_NUM_THREADS': '1'}
    p = subprocess.run([*cmd, __file__, case], env=env, capture_output=True, text=True, timeout=900)
    lines = sorted(line for line in p.stdout.splitlines() if line.startswith('rank '))
    print(f'{case}: exit {p.returncode}')
    print('\n'.join('  ' + line for line in lines) or p.stderr[-2000:])


if __name__ == '__main__':
    if 'LOCAL_RANK' in os.environ:
        worker(sys.argv[1])
    else:  # an Accelerator alone, then TrainingArguments' default, use_cpu=True, and ddp_backend='gloo'
        for case in sys.argv[1:] or ('accelerate', 'default', 'use_cpu', 'ddp_backend=gloo'):
            launch(case)
