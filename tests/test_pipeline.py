"""The main job's reading of the trainer's step log."""
import json
from thinkingbox_training.pipeline import training_steps

def test_training_steps_count_what_each_step_trained_on(tmp_path):
    g = lambda *rs: [['t', i, r] for i, r in enumerate(rs)]
    steps = [{'step': 0, 'groups': [g(1, 0), g(1, 1), g(0, 1)], 'kinds': ['useful', 'zero_variance', 'useful'],
              'rounds': [0, 1, 1], 'selected': [0, 2], 'fillers': [], 'skipped': False},
             {'step': 1, 'groups': [g(0, 0), g(1, 1)], 'kinds': ['zero_variance', 'system_error'],
              'rounds': [0, 0], 'selected': [], 'fillers': [0], 'skipped': True}]
    (tmp_path/'training_log.json').write_text(json.dumps({'steps': steps, 'log_history': []}))
    a, b = training_steps(tmp_path)
    assert a == {'step': 1, 'reward': 0.5, 'groups': 3, 'useful': 2, 'zero_variance': 1, 'system_error': 0, 'refill_rounds': 1, 'skipped': False}
    assert b['skipped'] and b['useful'] == 0 and b['system_error'] == 1 and b['reward'] != b['reward']  # nothing trained on: nan
    assert training_steps(tmp_path/'missing') == []
