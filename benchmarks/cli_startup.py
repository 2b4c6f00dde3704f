"""How long `tbt` takes before a command does any work: the list, a command's help, a refused option.

    python benchmarks/cli_startup.py [--reps 5]

Each invocation is a fresh process (`python -m thinkingbox_training.cli`-style, the console script's own entry
point), --reps times; the median wall time and the median CPU time (user + system, of the child) are printed, with
the load average before and after (on a loaded machine wall time mostly measures waiting, CPU time does not).
The goal is `tbt --help` under one second. The modules each run imported are listed too: none of torch,
transformers, mcp or the commands' own modules may load for these cases (the list, a command's help and its
refused options are read from the source; `evaluate`'s module, `campaigns`, would bring all three), and the script
exits 1 when one does (tests/reliability/test_cli_options.py asserts the same without timing). The last line:
`cli_help_s=<median wall of tbt --help>`.
"""

import argparse, ast, os, resource, statistics, subprocess, sys, time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLI = 'import sys; from thinkingbox_training.cli import main; sys.exit(main())'
CASES = {
    'tbt --help': ['--help'],
    'tbt generate-tasks --help': ['generate-tasks', '--help'],
    'tbt evaluate --help': ['evaluate', '--help'],
    'tbt evaluate --k -3': ['evaluate', '--tasks', str(ROOT / 'data/tasks/retail_bench.jsonl'), '--k', '-3'],
}
HEAVY = ('torch', 'transformers', 'mcp')  # and every module that registers a command, but `cli` itself


def run(argv) -> tuple:
    "(wall s, CPU s) of one `tbt ARGV` in a fresh process."
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, '-c', CLI, *argv], cwd=ROOT, capture_output=True, env={**os.environ})
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def heavy_imports(argv) -> list:
    "The modules of `HEAVY` and the commands' own modules that one `tbt ARGV` imported."
    code = (
        'import sys\nfrom thinkingbox_training.cli import main, command_modules\n'
        f'watch = [*{HEAVY!r}, *(m for m in command_modules() if m != "thinkingbox_training.cli")]\n'
        f'try: main({argv!r})\nexcept SystemExit: pass\n'
        'print(repr([m for m in watch if m in sys.modules]))'
    )
    out = subprocess.run([sys.executable, '-c', code], cwd=ROOT, capture_output=True, text=True).stdout
    return ast.literal_eval(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--reps', type=int, default=5)
    a = ap.parse_args()
    print('load average before:', open('/proc/loadavg').read().split()[:3])
    medians, loaded = {}, {}
    for name, argv in CASES.items():
        runs = [run(argv) for _ in range(a.reps)]
        medians[name], loaded[name] = statistics.median(w for w, _ in runs), heavy_imports(argv)
        print(
            f'{name:26} wall {medians[name]:.3f} s  cpu {statistics.median(c for _, c in runs):.3f} s  '
            f'modules imported: {loaded[name]}'
        )
    print('load average after: ', open('/proc/loadavg').read().split()[:3])
    print(f'cli_help_s={medians["tbt --help"]:.3f}')
    if bad := {n: m for n, m in loaded.items() if m}:
        sys.exit(f'FAIL: imported what none of these may: {bad}')


if __name__ == '__main__':
    main()
