"""The package's import graph runs one way: every module imports only modules of lower layers.

Every `import` of the package's own modules is read from the source (ast), at module level and inside functions
alike: a lazy import that runs back up the layers is the same cycle, only deferred. The modules are read from the
package directory; a module with no layer here fails, naming itself, so that a new module is placed on purpose.
Plug-ins (the bundled domains, the ThinkingBox task format, the TRL/OpenEnv ecosystem) sit above the core they plug
into and register into its registries (`tasks.register_domain`, `tasks.register_format`) or are found through
entry points; the core never names them."""

import ast
from pathlib import Path

ROOT = Path(__file__).parent.parent
PACKAGE = 'thinkingbox_training'

# lowest first; a module may import modules of lower layers only (none of its own layer)
LAYERS = [
    [
        'cli',
        'interpret',
        'budgets',
        'docs',
    ],  # the command registry every module registers into, the chat format, episode
    # budgets: they import nothing of the package
    ['tasks'],  # the task schema, task formats and the domain registry
    ['backend'],  # the domain interface and SQLite domains
    ['tools', 'domains'],  # MCP tool sessions; the bundled domains (plug-ins of backend)
    ['grader'],
    ['users', 'policies'],
    ['episode', 'metrics', 'serve', 'vllm_server'],
    ['campaigns', 'difficulty'],
    ['view', 'docs'],  # the episode viewer (reads campaigns' records and training runs' logs); the site's build
    ['grpo_core'],  # the training step without TRL; reads a campaign's records
    ['trl_adapter'],  # every touch of TRL: the configuration, the trainer, TRL's private names
    ['grpo'],  # the main job, and the trainer's names re-exported
    ['pipeline', 'ecosystem', 'thinkingbox'],  # the main job; the TRL/OpenEnv plug-in; the ThinkingBox format
    ['study', 'base_policy'],  # one lab's experiments, on top of everything (they may move out of the package)
    ['policy_report'],
]
LAYER = {m: i for i, ms in enumerate(LAYERS) for m in ms}
# The one import allowed to run up the layers, with why. A probe or an evaluation run under a training recipe
# (`--recipe`) reads that recipe with training's own reader and parser (an unknown key, a wrong type, broken YAML, a
# contradiction: refused as training refuses them; what it leaves out: training's defaults), and those are built from
# the trainer's configuration class. The commands that take `--recipe` live in `campaigns`; the import is made inside
# `RunSpec.from_recipe`, only when a recipe is given, so importing `campaigns` still loads nothing above it.
UPWARD = {('campaigns', 'grpo'): "RunSpec.from_recipe reads a training recipe with the trainer's own parser"}


def modules(package_dir: Path) -> dict:
    "module name relative to the package ('tasks', 'domains.demo') -> its file."
    out = {}
    for p in sorted(package_dir.rglob('*.py')):
        rel = p.relative_to(package_dir).with_suffix('')
        if rel.name == '_modidx' or '__pycache__' in rel.parts:
            continue
        out['.'.join(rel.parts[:-1] if rel.name == '__init__' else rel.parts)] = p
    return out


def layer_of(module: str):
    "The layer of a module ('domains.demo' is of 'domains'); None for the package's root."
    return LAYER.get(module, LAYER.get(module.split('.')[0])) if module else None


def imports(name: str, path: Path, known: set) -> list[tuple[int, str]]:
    "(line, imported module of the package) for every import in the file, at any depth."
    here = name.split('.') if path.name == '__init__.py' else name.split('.')[:-1]
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == PACKAGE or a.name.startswith(PACKAGE + '.'):
                    out.append((node.lineno, a.name.removeprefix(PACKAGE).lstrip('.')))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - node.level + 1] + (node.module.split('.') if node.module else [])
                mod = '.'.join(base)
            elif node.module == PACKAGE or (node.module or '').startswith(PACKAGE + '.'):
                mod = node.module.removeprefix(PACKAGE).lstrip('.')
            else:
                continue
            subs = [f'{mod}.{a.name}'.lstrip('.') for a in node.names if f'{mod}.{a.name}'.lstrip('.') in known]
            out += [(node.lineno, s) for s in subs] or [(node.lineno, mod)]  # `from . import metrics`: the module
    return out


def violations(package_dir: Path) -> list[str]:
    "Every import that does not run down the layers, and every module without a layer."
    mods = modules(package_dir)
    out = [f'{m}: no layer: add it to LAYERS in tests/test_layers.py' for m in mods if m and layer_of(m) is None]
    for m, p in mods.items():
        lm = layer_of(m)
        if lm is None:
            continue
        for line, target in imports(m, p, set(mods)):
            lt = layer_of(target)
            if target == m or lt is None or target.split('.')[0] == m.split('.')[0]:
                continue  # itself, the package root, or a module of its own group (domains.x importing domains.y)
            if lt >= lm and (m, target) not in UPWARD:
                out.append(f'{p.name}:{line}: {m} (layer {lm}) imports {target} (layer {lt}), not below it')
    return out


def test_every_import_runs_down_the_layers():
    bad = violations(ROOT / PACKAGE)
    assert not bad, 'imports that run back up the layers:\n' + '\n'.join(bad)


def test_the_layers_name_only_modules_that_exist_or_may_move_out():
    mods = {m.split('.')[0] for m in modules(ROOT / PACKAGE) if m}
    optional = {'study', 'base_policy', 'policy_report', 'budgets'}  # may move out of the package, or be added
    assert set(LAYER) - mods <= optional, set(LAYER) - mods - optional


def test_a_function_level_import_up_the_layers_is_caught(tmp_path):
    "The check on a small package: the lazy import that closed a cycle (tasks -> thinkingbox) is found, with its line."
    pkg = tmp_path / PACKAGE
    (pkg / 'domains').mkdir(parents=True)
    (pkg / '__init__.py').write_text('')
    (pkg / 'domains' / '__init__.py').write_text('')
    (pkg / 'domains' / 'demo.py').write_text('from ..backend import Domain\nfrom ..tasks import Task\n')
    (pkg / 'backend.py').write_text('from .tasks import Task\n')
    (pkg / 'thinkingbox.py').write_text('from thinkingbox_training.tasks import Task\nfrom . import backend\n')
    (pkg / 'tasks.py').write_text(
        'import json\n\n\ndef load(p):\n    from thinkingbox_training.thinkingbox import load_thinkingbox\n'
    )
    assert violations(pkg) == [
        f'tasks.py:5: tasks (layer 1) imports thinkingbox (layer {LAYER["thinkingbox"]}), not below it'
    ]
    (pkg / 'newmodule.py').write_text('')
    assert violations(pkg)[0] == 'newmodule: no layer: add it to LAYERS in tests/test_layers.py'


def test_the_trainer_core_imports_no_trl_and_only_the_adapter_touches_trls_trainer():
    """grpo_core imports nothing of TRL, at any depth; of the package's modules, trl_adapter alone imports TRL's trainer
    (`trl.trainer...`, `GRPOTrainer`, `GRPOConfig`)."""
    mods = modules(ROOT / PACKAGE)

    def trl_imports(path):
        out = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                out |= {a.name for a in node.names if a.name.split('.')[0] == 'trl'}
            elif isinstance(node, ast.ImportFrom) and not node.level and (node.module or '').split('.')[0] == 'trl':
                out |= {node.module} | {f'{node.module}.{a.name}' for a in node.names}
        return out

    def trainer(names):
        return {n for n in names if n.startswith('trl.trainer') or n.split('.')[-1] in ('GRPOTrainer', 'GRPOConfig')}

    assert trl_imports(mods['grpo_core']) == set()
    assert {m for m, p in mods.items() if m and trainer(trl_imports(p))} == {'trl_adapter'}
