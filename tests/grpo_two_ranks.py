"""Run by tests/test_grpo.py::test_two_processes_make_the_same_decisions under `accelerate launch`
(2 CPU processes, gloo)."""

import hashlib, json, os, sys, warnings

os.environ.setdefault('TRL_EXPERIMENTAL_SILENCE', '1')
warnings.filterwarnings('ignore')
from transformers import PrinterCallback, TrainerCallback
from thinkingbox_training.grpo import TBTConfig, TBTTrainer
from thinkingbox_training.policies import ScriptedPolicy, tiny_qwen3
from grpo_fixtures import pay_task, crash_task, tokenizer, flaw_by_family

out = sys.argv[1]
tok = tokenizer()
pool = [pay_task(i, 'easy') for i in range(3)] + [pay_task(i) for i in range(3)] + [crash_task(0)]
cfg = TBTConfig(
    output_dir=os.path.join(out, 'run'),
    groups_per_step=3,
    group_size=2,
    per_device_train_batch_size=1,
    max_steps=3,
    max_refill_rounds=2,
    learning_rate=1e-3,
    seed=1,
    use_cpu=True,
    bf16=False,
    gradient_checkpointing=False,
    ddp_find_unused_parameters=False,
    report_to='none',
    save_strategy='no',
    disable_tqdm=True,
)
policy = ScriptedPolicy(flaw=flaw_by_family, tokenizer=tok)


class Flawless(TrainerCallback):
    "After step 2 the expert never errs: step 3 has no useful group and must be skipped on both processes."

    def on_step_end(self, args, state, control, **kw):
        if state.global_step == 2:
            policy.flaw = 0.0


trainer = TBTTrainer(tiny_qwen3(tok), cfg, pool, processing_class=tok, policy=policy, callbacks=[Flawless()])
trainer.remove_callback(PrinterCallback)
sizes = []
orig = trainer._sample_step


def sample_step(prompts):
    rows = orig(prompts)
    sizes.append((len(prompts), len(rows)))
    return rows


trainer._sample_step = sample_step
trainer.train()
h = hashlib.sha256(b''.join(p.detach().numpy().tobytes() for p in trainer.model.parameters())).hexdigest()
rank = trainer.accelerator.process_index
with open(os.path.join(out, f'rank{rank}.json'), 'w') as f:
    json.dump(
        {
            'rank': rank,
            'world': trainer.accelerator.num_processes,
            'step_log': trainer.step_log,
            'sizes': sizes,
            'params': h,
            'gradient_accumulation_steps': cfg.gradient_accumulation_steps,
        },
        f,
    )
