"""Builds 17a, 17b and 17c (2026-12-01): polish passes on saved weights. Each pass ran in a staging script, since
folded into the library as `polish_saved` (600 steps at 1e-3, no choice cuts, pass seed SEED, demonstrations of N
tasks per family; a near copy of ../12b/stage.py with those as arguments). `polish_saved` reruns 17b's pass to the
same weights, bit for bit (../17b/polish_saved.py and its log), so the script is not kept.
- 17a: 8a (main's retail domain, data/models/tiny-qwen3 at 110c1f9), N=320, seed 1: 18.5 min -> polish.log, build.json
- 17b: 16c (with builds/16c/product-id-in-query.patch applied), N=320, seed 1: 18.5 min -> ../17b/
- 17c: 17b, N=480, seed 2: 21.4 min -> ../17c/ (shipped)
In the library's terms, with `SHIPPED = BuildConfig(polish_steps=600, polish_choice=0, polish_tasks_per_family=(320, 480))`:"""
from dataclasses import replace
from thinkingbox_training.base_policy import SHIPPED, polish_saved
if __name__ == '__main__':
    import sys
    which, src, out = sys.argv[1:4]
    if which == '17a': polish_saved(src, replace(SHIPPED, out=out), passes=[1])   # src: 8a's weights, on main's retail domain before 17c
    if which == '17b': polish_saved(src, replace(SHIPPED, out=out), passes=[1])   # src: 16c's weights
    if which == '17c': polish_saved(src, replace(SHIPPED, out=out), passes=[2])   # src: 17b's weights
