"""Which token of the think block's item id does build 14a get wrong? (2026-11-30) On the held-out choice cuts of
13a's `parts.py` (seed 77, renamed and shuffled as the build does), teacher-forced, for the cuts whose think-block
product is right: the share of cuts whose argmax gives each token of the id after it (`OI-`, then the digit groups),
and, for the first digit group, whether a wrong argmax is the first group of another listed item. Run from the copy
with opaque-item-ids.patch applied:
  OMP_NUM_THREADS=1 PYTHONPATH=<copy> python id_tokens.py /tmp/builds/14a > id_tokens.log"""
import sys
from collections import Counter
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent.parent/'13a'))
from parts import choice_cuts, argmax, parts
from thinkingbox_training.base_policy import listed_items

tok, lm, _, cuts = choice_cuts(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 300)
right, n, first_other = Counter(), 0, Counter()
for msgs, text in cuts:
    enc, pred = argmax(tok, lm, text)
    at = parts(text)
    (p, pe), (i, ie) = at['think_product'], at['think_id']
    if not all(pred[q - 1].item() == enc.ids[q] for q, (a, _) in enumerate(enc.offsets) if p <= a < pe): continue
    n += 1
    toks = [q for q, (a, _) in enumerate(enc.offsets) if i <= a < ie]
    for k, q in enumerate(toks): right[k] += pred[q - 1].item() == enc.ids[q]
    q = toks[1]  # the first digit group
    if pred[q - 1].item() != enc.ids[q]:
        firsts = {tok.backend_tokenizer.encode(v, add_special_tokens=False).ids[1] for v in listed_items(msgs[:-1])}
        first_other[pred[q - 1].item() in firsts] += 1
print(f'cuts with the right product: {n}; id tokens right, in order:', [round(right[k] / n, 3) for k in sorted(right)],
      '| wrong first digit group that is another listed item\'s:', dict(first_other), flush=True)
