#!/usr/bin/env python
"""Every early-stopping rule replayed on a run's saved n-best lists: the evidence for the default rule.

    python -m scripts.replay_stopping --gold RUN/nbest/valid.gold.txt RUN/nbest [--first 60] [--markdown]

The lists (files, or folders of .tsv/.jsonl/.txt/.out lists as `nbest-eval select --from-nbest`
takes them) are the validations of one run in training order (by the numbers in their names). For
each rule of nbest_eval.training.early_stopping and each --patience (default 3 5 10), on --metric (default
map): where it stops, the validation it keeps, that validation's --metric and --report measure with
their 95% intervals and paired-bootstrap p-values against each measure's best over all the lists
given, and the share of validations the stop saves. --first N replays on the first N lists only (a
shorter run of the same training).
"""

from __future__ import annotations

import argparse
import sys

from nbest_eval.cli.select_inputs import list_inputs, system_name
from nbest_eval.data import InputError
from nbest_eval.formats import read_gold
from nbest_eval.selection import choose, replay_rules, systems_of_files


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m scripts.replay_stopping", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("lists", nargs="+", help="the run's saved n-best lists, or folders of them")
    p.add_argument("--gold", required=True, help="the validation gold the lists were scored against")
    p.add_argument("--first", type=int, help="replay on the first N validations only")
    p.add_argument("--metric", default="map", help="the measure the rules stop on (default: %(default)s)")
    p.add_argument("--report", default="bleu_100x100", help="a second measure to report (default: %(default)s)")
    p.add_argument("--patience", type=int, nargs="+", default=[3, 5, 10])
    p.add_argument("--markdown", action="store_true", help="a Markdown table")
    args = p.parse_args(argv)
    try:
        paths = list_inputs(args.lists, files=True, own={"--gold": args.gold})[0][:args.first]
        keys = list(dict.fromkeys([args.metric, args.report]))
        systems = systems_of_files(read_gold(args.gold), paths, keys)
    except InputError as err:
        print(f"replay_stopping.py: error: {err}", file=sys.stderr)
        return 2
    choices = {key: choose(systems, key) for key in keys}
    names = [system_name(path) for path in paths]
    print(f"{len(paths)} validations; best {args.metric}: {names[choices[args.metric].best]}", file=sys.stderr)
    rows = replay_rules(systems, choices, args.metric, patience=args.patience, report=keys)
    head = ["rule", "P", "stops after", "keeps", "saved"] + [f"{k} [95% CI]" for k in keys] + \
        [f"p vs best {k}" for k in keys]
    lines = [head]
    for r in rows:
        cells = [r["rule"], str(r["patience"]), "never" if r["stopped_after"] is None else names[r["stopped_after"]],
                 names[r["kept"]], f"{r['saved']:.0%}"]
        cells += [_with_ci(r[k]) for k in keys] + [f"{r[k]['p_vs_best']:.3f}" for k in keys]
        lines.append(cells)
    if args.markdown:
        print("\n".join("| " + " | ".join(cells) + " |" for cells in lines[:1] + [["---"] * len(head)] + lines[1:]))
    else:
        widths = [max(len(row[i]) for row in lines) for i in range(len(head))]
        print("\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in lines))
    return 0


def _with_ci(entry) -> str:
    ci = entry["ci"]
    return f"{entry['value']:.4f} [{ci['low']:.4f}, {ci['high']:.4f}]" if ci else f"{entry['value']:.4f}"


if __name__ == "__main__":
    sys.exit(main())
