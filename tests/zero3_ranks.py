"""Two steps of GRPO in server mode against a stand-in vLLM server, for tests/test_zero3.py: run as a script under
`accelerate launch` (DeepSpeed ZeRO-3 over two CPU processes; argv: output folder, server URL, weight-transfer port),
or in process as one plain process (`run`)."""

import json, os, sys, time, warnings

os.environ.setdefault('TRL_EXPERIMENTAL_SILENCE', '1')
warnings.filterwarnings('ignore')
from transformers import PrinterCallback
from thinkingbox_training.grader import Grader, Verdict
from thinkingbox_training.grpo import TBTConfig, TBTTrainer
from thinkingbox_training.policies import tiny_qwen3
from thinkingbox_training.vllm_server import cpu_weight_transfer
from grpo_fixtures import pay_task, tokenizer


class ParityGrader(Grader):
    "Reward 1 when the last message has an even length: a random model's groups are mixed, and steps train."

    async def grade(self, task, db, final_message='', transcript=None):
        return Verdict(reward=int(len(final_message) % 2 == 0))


def run(out: str, url: str, group_port: int) -> dict:
    "Train two steps; write and return what this process saw (rank{i}.json in `out`)."
    tok = tokenizer()
    cfg = TBTConfig(
        output_dir=os.path.join(out, 'run'),
        groups_per_step=2,
        group_size=4,
        max_steps=2,
        max_refill_rounds=1,
        learning_rate=1e-2,
        seed=0,
        max_turns=2,
        max_tokens_per_turn=10,
        use_vllm=True,
        vllm_server_base_url=url,
        vllm_group_port=group_port,
        use_cpu=True,  # as the tiny recipe says: under a DeepSpeed launch the Accelerator is still DeepSpeed's
        bf16=False,
        gradient_checkpointing=False,
        report_to='none',
        save_strategy='no',
        disable_tqdm=True,
    )
    t0 = time.monotonic()
    with cpu_weight_transfer(timeout_s=60):
        trainer = TBTTrainer(
            tiny_qwen3(tok), cfg, [pay_task(i) for i in range(8)], processing_class=tok, grader=ParityGrader()
        )
        trainer.remove_callback(PrinterCallback)
        trainer.train()
    trainer.save_model(os.path.join(out, 'model'))  # ZeRO-3: gathered from the shards (every process takes part)
    acc, params = trainer.accelerator, list(trainer.model.parameters())
    logs = [h for h in trainer.state.log_history if 'loss' in h]
    seen = {
        'rank': acc.process_index,
        'world': acc.num_processes,
        'distributed_type': acc.distributed_type.value,
        'zero_stage': acc.state.deepspeed_plugin.zero_stage if acc.state.deepspeed_plugin else None,
        # ZeRO-3 keeps a partition of each parameter in ds_tensor (ds_numel: the whole); a plain model holds it all
        'held': sum(p.ds_tensor.numel() if hasattr(p, 'ds_tensor') else p.numel() for p in params),
        'numel': sum(getattr(p, 'ds_numel', p.numel()) for p in params),
        'step_log': trainer.step_log,
        'sync_log': trainer.sync_log,
        'losses': [h['loss'] for h in logs],
        'grad_norms': [h['grad_norm'] for h in logs],
        'seconds': time.monotonic() - t0,
    }
    with open(os.path.join(out, f'rank{acc.process_index}.json'), 'w') as f:
        json.dump(seen, f)
    return seen


if __name__ == '__main__':
    run(sys.argv[1], sys.argv[2], int(sys.argv[3]))
