"Where 16c's item-family episodes go when a product id their golden writes need is missing from their calls (seed 2, k 8)."
# Run from a copy of the repository with builds/16c/product-id-in-query.patch applied and 16c's weights in /tmp/builds/16c:
#   OMP_NUM_THREADS=2 PYTHONPATH=<copy> python why_missed.py > why_missed.log
from collections import Counter
from thinkingbox_training.base_policy import rollouts, _calls
eps = rollouts('/tmp/builds/16c', seed=2, k=8, n=2, split='train')
ends = Counter()
for e in eps:
    want = {v for c in e.task.golden for v in [c.arguments.get('product_id')] if c.name != 'list_variants' and v}
    if not want: continue
    calls, bad = _calls(e)
    typed = {c.arguments.get('product_id') for c in calls}
    if want <= typed: continue
    names = [c.name for c in calls]
    last = e.trajectory.messages[-1]
    kind = ('malformed call' if bad else 'no write' if not any(n in ('create_return', 'send_replacement', 'exchange_item') for n in names)
            else 'write with another id')
    ends[e.task.family, kind, e.trajectory.termination] += 1
for k, n in sorted(ends.items()): print(n, k)
