"""Padding in the training step's micro-batches: TRL's cut against `micro_batches` (nbs/10_grpo.ipynb).

    python benchmarks/padding_waste.py [--tasks 24] [--group-size 8] [--flaw 0.5]

TRL 1.16 pads a process's episodes of a step to the longest of them (prompts on the left, completions on the right),
shuffles the rows and cuts them into micro-batches that all keep that width. `micro_batches` sorts the rows by length
and trims each micro-batch to its own longest prompt and completion. Episodes: the scripted expert, flawed on a share
of attempts so that lengths vary as in training, on travel and retail train tasks, token-exact in the shipped tiny
policy's chat format. Steps of `--groups` groups of `--group-size` episodes are spread over the processes of each
shape below, as the trainer spreads them; for every shape (processes, episodes a process, micro-batch size) it prints
the share of the token positions the forward and backward pass run over that are padding, both ways, and
`padding_ratio_<shape>=` (TRL's padded positions over ours: how much less work the same tokens take).
"""

import argparse, os, random

os.environ.setdefault('OMP_NUM_THREADS', '1')
import torch
from transformers import AutoTokenizer
from trl.trainer.utils import shuffle_sequence_dict, split_tensor_dict
from thinkingbox_training.tasks import load_tasks
from thinkingbox_training.interpret import ChatFormat
from thinkingbox_training.episode import EpisodeRunner, run_blocking
from thinkingbox_training.policies import ScriptedPolicy
from thinkingbox_training.grpo import Rollout, micro_batches, padding_share


def padded(rows: list, pad: int) -> dict:
    "A process's share of a step as TRL pads it: prompts on the left, completions on the right."
    P, C = max(len(r.prompt_ids) for r in rows), max(len(r.completion_ids) for r in rows)
    left = lambda ids: [pad] * (P - len(ids)) + ids
    right = lambda ids, fill: ids + [fill] * (C - len(ids))
    return {
        'prompt_ids': torch.tensor([left(r.prompt_ids) for r in rows]),
        'prompt_mask': torch.tensor([[0] * (P - len(r.prompt_ids)) + [1] * len(r.prompt_ids) for r in rows]),
        'completion_ids': torch.tensor([right(r.completion_ids, pad) for r in rows]),
        'completion_mask': torch.tensor([right([1] * len(r.completion_ids), 0) for r in rows]),
        'tool_mask': torch.tensor([right(r.env_mask, 0) for r in rows]),
        'advantages': torch.zeros(len(rows)),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--tasks', type=int, default=24, help='train tasks (half travel, half retail)')
    ap.add_argument('--group-size', type=int, default=8)
    ap.add_argument('--groups', type=int, default=4, help='groups a step (the CPU recipe: 4)')
    ap.add_argument('--flaw', type=float, default=0.5)
    ap.add_argument('--model', default='data/models/tiny-qwen3')
    a = ap.parse_args()
    tok = AutoTokenizer.from_pretrained(a.model)
    fmt = ChatFormat(tok)
    tasks = load_tasks('data/tasks/travel_train.jsonl', 'data/tasks/retail_train.jsonl')
    tasks = [t for t in tasks if t.split == 'train']
    rng = random.Random(0)
    tasks = rng.sample([t for t in tasks if t.domain == 'travel'], a.tasks // 2) + rng.sample(
        [t for t in tasks if t.domain == 'retail'], a.tasks - a.tasks // 2
    )
    eps = run_blocking(
        EpisodeRunner(ScriptedPolicy(flaw=a.flaw, tokenizer=tok), concurrency=16).run(
            [(t, r) for t in tasks for r in range(a.group_size)]
        )
    )
    rows = [Rollout.from_episode(e, fmt) for e in eps]
    groups = [rows[i : i + a.group_size] for i in range(0, len(rows), a.group_size)]
    rng.shuffle(groups)
    n = a.groups * a.group_size
    steps = [[r for g in groups[i : i + a.groups] for r in g] for i in range(0, len(groups) - a.groups + 1, a.groups)]
    tokens = [r.tokens for r in rows]
    print(
        f'{len(rows)} episodes ({len(tasks)} tasks x {a.group_size}), {len(steps)} steps of {n}; episode tokens '
        f'min {min(tokens)}, median {sorted(tokens)[len(tokens) // 2]}, max {max(tokens)}'
    )
    # (processes, micro-batch size): one micro-batch a process (the CPU recipe), 4 or 8 a process, one episode each
    # (as the reference run's 6 episodes a process, one a micro-batch)
    shapes = [(1, n), (1, n // 4), (1, n // 8), (1, 1), (n // 8, 1)]
    torch.manual_seed(0)
    for procs, mb in shapes:
        trl_mbs, ours = [], []
        for step in steps:
            per = len(step) // procs
            for p in range(procs):
                batch = padded(step[p * per : (p + 1) * per], fmt.pad_id)
                trl_mbs += split_tensor_dict(shuffle_sequence_dict(batch), per // mb)
                ours += micro_batches(batch, per // mb)
        held = lambda mbs: sum(m['prompt_ids'].numel() + m['completion_ids'].numel() for m in mbs)
        name = f'{procs}x{n // procs}_mb{mb}'
        print(
            f'{procs} process(es) x {n // procs} episodes, micro-batches of {mb}: padding share '
            f'TRL {padding_share(trl_mbs):.1%}, by length {padding_share(ours):.1%}; positions '
            f'{held(trl_mbs):,} -> {held(ours):,}'
        )
        print(f'padding_ratio_{name}={held(trl_mbs) / held(ours):.3f}')


if __name__ == '__main__':
    main()
