"""ThinkingBox task modules are trusted code, imported once when their tasks load: an import that raises, exits or
hangs is a load error naming the file (never a crash or a hang at grading), a function defined twice is refused,
and two modules with one file name are told apart or refused, never confused."""

import os, time
from pathlib import Path
import pytest
from thinkingbox_training.tasks import TaskFileError

DATA = os.environ.get('THINKINGBOX_DATA')
pytestmark = pytest.mark.skipif(not DATA, reason='THINKINGBOX_DATA is not set: these tests load task modules')

MODULE = '''from thinkingbox.common import Judge, TestContext

"""!
scenario: retail_banking
"""
{prelude}

def test_balance(x: TestContext, judge: Judge):
    """!
    query: What is the balance of my savings account?
    user_context: You want to know your savings balance.
    """
    {body}
'''


def module(tmp_path, name='mine.py', prelude='', body='assert x.effects["online_banking"]["accounts"]'):
    p = tmp_path / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(MODULE.format(prelude=prelude, body=body))
    return p


def load(p, **kw):
    from thinkingbox_training.thinkingbox import load_thinkingbox

    return load_thinkingbox(str(p), **kw)


def problem(p, **kw):
    with pytest.raises(TaskFileError) as e:
        load(p, **kw)
    return str(e.value)


class Says:
    "Answers every rubric item yes: these tests are about the module's code, not the judge."

    name = 'says-yes'

    async def ask(self, item, final_message, transcript=None):
        from thinkingbox_training.grader import JudgeAnswer

        return JudgeAnswer(yes=True)


def episodes(tasks, n=3):
    from thinkingbox_training.episode import EpisodeRunner
    from thinkingbox_training.grader import Grader
    from thinkingbox_training.policies import ScriptedPolicy

    return EpisodeRunner(ScriptedPolicy(), grader=Grader(judge=Says())).run_sync([(tasks[0], r) for r in range(n)])


@pytest.mark.parametrize(
    'prelude, what, line',
    [
        ('import sys\nsys.exit(3)', 'SystemExit(3)', 7),
        ('raise ImportError("no module named billing")', 'ImportError: no module named billing', 6),
        ('import nonexistent_module_for_this_test', "ModuleNotFoundError: No module named 'nonexistent", 6),
    ],
)
def test_an_import_that_fails_or_exits_is_a_load_error_naming_the_file(prelude, what, line, tmp_path):
    p = module(tmp_path, prelude=prelude)
    msg = problem(p)
    assert f'{p}:{line}: importing it failed: {what}' in msg, msg


def test_a_module_is_imported_once_at_load_time_not_at_grading(tmp_path):
    runs = tmp_path / 'runs.txt'
    p = module(tmp_path, 'once.py', prelude=f'open({str(runs)!r}, "a").write("import\\n")')
    tasks = load(p)
    assert runs.read_text() == 'import\n'  # at load time
    eps = episodes(tasks)
    assert [e.trajectory.status for e in eps] == ['ok'] * 3 and [e.reward for e in eps] == [1, 1, 1]
    assert runs.read_text() == 'import\n'  # and never again: grading calls the function it imported
    load(p)
    assert runs.read_text() == 'import\n'  # nor when the same text loads again


def test_a_module_that_hangs_at_import_is_bounded_by_a_time_limit(tmp_path, monkeypatch):
    monkeypatch.setenv('TBT_TASK_IMPORT_TIMEOUT_S', '1')
    p = module(tmp_path, 'hangs.py', prelude='import time\nwhile True:\n    time.sleep(0.05)')  # loops forever
    t0 = time.monotonic()
    msg = problem(p)
    assert time.monotonic() - t0 < 30
    assert f'{p}:0: importing it did not finish within 1 s (TBT_TASK_IMPORT_TIMEOUT_S)' in msg
    assert 'trusted code' in msg


def test_a_function_defined_twice_is_refused_naming_the_file(tmp_path):
    p = module(tmp_path, 'twice.py')
    p.write_text(p.read_text() + '\n\ndef test_balance(x, judge):\n    pass\n')
    msg = problem(p)
    assert f'{p}:16 [twice.py:test_balance]: function test_balance is defined twice (lines 8 and 16)' in msg, msg


def test_two_modules_with_one_file_name_are_not_confused(tmp_path):
    """The second of two same-named modules would take over the first's grading: refused, naming both (a uid names the
    file, not its folder, so within one process a file name is one module)."""
    a = module(tmp_path / 'a', 'twin.py')
    b = module(tmp_path / 'b', 'twin.py', body='assert False, "the other twin"')
    load(a)
    msg = problem(b)
    assert f'twin.py:test_balance is already loaded from {a}' in msg and 'rename one' in msg, msg
    assert [e.reward for e in episodes(load(a), 1)] == [1]  # the first keeps its own test function


@pytest.fixture
def checkout_with_twins(tmp_path):
    "A thinkingbox-data checkout (links to the real one) where a second banking.py sits in another folder."
    real, fake = Path(DATA), tmp_path / 'data'
    (fake / 'dataset' / 'test_case' / 'more').mkdir(parents=True)
    for sub in ('servers', 'releases'):
        (fake / sub).symlink_to(real / sub)
    (fake / 'dataset' / 'scenario').symlink_to(real / 'dataset' / 'scenario')
    for f in (real / 'dataset' / 'test_case').iterdir():
        (fake / 'dataset' / 'test_case' / f.name).symlink_to(f)
    module(fake / 'dataset' / 'test_case' / 'more', 'banking.py')
    return fake


def test_a_name_two_modules_share_is_refused_naming_both(checkout_with_twins, tmp_path):
    msg = problem('banking.py', data=checkout_with_twins)
    assert 'banking.py names 2 modules (dataset/test_case/banking.py, dataset/test_case/more/banking.py)' in msg, msg
    tl = tmp_path / 'list.yaml'
    tl.write_text('- banking.py:test_balance\n')
    msg = problem(tl, data=checkout_with_twins)  # a test list naming a function only the second one has
    assert f'{tl}:0: banking.py names 2 modules' in msg and 'no test function' not in msg, msg
    by_path = load(checkout_with_twins / 'dataset' / 'test_case' / 'more' / 'banking.py', data=checkout_with_twins)
    assert [t.uid for t in by_path] == ['banking.py:test_balance']  # by its path, the one meant is clear
