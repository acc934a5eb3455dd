"""The text report of `python -m specui.bench`: a table of the four methods, the speculative figures
and one line per prompt; with `--drafter all`, a table of the drafters side by side instead. Pure
functions of the report dict; no models, no timing."""

from __future__ import annotations

from specui.arena import at_most_k, k_said, label
from specui.bench.budget import format_budget
from specui.text import fmt

LABELS = {
    "plain": "plain decoding (specui engine)",
    "speculative": "speculative (specui engine)",
    "hf_assisted": "transformers assisted generate",
    "hf_plain": "transformers plain generate",
}

PER_PROMPT_NOTE = ("(length: the prompt's tokens; tokens/s per prompt: max-new-tokens / the median of its timed runs, "
                   "prefill included)")


def device_line(r: dict) -> str:
    """The machine, threads and versions; with 2+ threads, OpenMP's wait policy (it moves transformers' speed)."""
    threads = f"{r['torch_threads']} threads"
    if r.get("prompt_threads") and r["prompt_threads"] != r["torch_threads"]:
        threads += f" ({r['prompt_threads']} while specui reads a prompt)"
    if r["torch_threads"] > 1 and r.get("omp_wait_policy"):
        threads += f" (OMP_WAIT_POLICY={r['omp_wait_policy']})"
    if r.get("product_threads", 1) > 1:  # transformers' generate runs on torch's threads (--threads)
        threads += f"; specui's large matrix products on {r['product_threads']} (SPECUI_PRODUCT_THREADS"
        if "product_splits" in r:  # how many were split, and how many ran alone while the threads gave way
            threads += f": {r['product_splits']:,} split, {r['products_alone_giving_way']:,} alone giving way"
        threads += ")"
    return f"device {r['device']}, {threads}; torch {r['torch_version']}, transformers {r['transformers_version']}"


def run_line(r: dict) -> str:
    """What traces the figures back: the seed, specui's commit (and whether the checkout had changes) and the date;
    and, after Ctrl-C, how many of the prompts the figures cover."""
    if r.get("commit"):
        source = f"commit {r['commit'][:12]}" + (" with uncommitted changes" if r.get("commit_modified") else "")
    else:
        source = f"specui {r.get('specui_version', '?')} (not a git checkout)"
    line = f"seed {r.get('seed')}, {source}, {r.get('date', 'undated')}"
    if r.get("interrupted"):  # Ctrl-C during the run: the figures are the prompts it finished
        line += f"; INTERRUPTED (Ctrl-C) {r['interrupted']}: the figures are theirs"
    return line


def counted(n: int, word: str) -> str:
    """`n` and `word`, plural but for one: "1 prompt", "3 repeats"."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def run_size(runs: int, repeats: int, what: str = "prompt") -> str:
    """The header's "8 prompts x 3 repeats" (`what`: the runs' unit), "1 prompt x 1 repeat" of one."""
    return f"{counted(runs, what)} x {counted(repeats, 'repeat')}"


def a_number(n: int) -> str:
    """"a 4", "an 8": the article a number takes as it is read (eight, eleven, eighteen, eighty-...)."""
    return f"an {n}" if str(n).startswith("8") or n in (11, 18) else f"a {n}"


def _num(value, spec: str) -> str:
    return fmt(value, spec, none="n/a")


def _yes_no(value) -> str:
    return "n/a (sampling)" if value is None else "yes" if value else "NO"


def sampling_mode(r: dict) -> str:
    """How a report's tokens were chosen: "greedy", or the temperature and any top-p and top-k; then any
    repetition penalty."""
    penalty = r.get("repetition_penalty", 1.0)
    also = [f"repetition penalty {fmt(penalty, 'g')}"] if penalty != 1.0 else []
    if r["temperature"] == 0:
        return ", ".join(["greedy", *also])
    return ", ".join([f"temperature {fmt(r['temperature'], 'g')}", *([f"top-p {fmt(r['top_p'], 'g')}"]
                     if r.get("top_p", 1.0) < 1.0 else []), *([f"top-k {r['top_k']}"] if r.get("top_k") else []),
                      *also])


def format_table(r: dict) -> str:
    if "drafters" in r:
        return format_drafter_table(r)
    k = r["num_draft_tokens"]
    confident = r.get("draft_confidence")  # K is then the most a round drafts: said where it may draft fewer
    confident = confident if at_most_k(k, confident, r.get("drafter") or "") else None
    long = f"{k} at most, drafting while confident >= {fmt(confident, 'g')}" if confident else k
    spec_k = f"K<={k}" if confident else f"K={k}"  # the header says the rest
    mode = sampling_mode(r)
    plain = r["plain_tokens_per_s"]
    lines = [
        (f"specui bench: preset {r['preset']}, drafter {r['drafter']}, K={long}, {mode}, "
         f"{r['max_new_tokens']} new tokens (EOS ignored), {run_size(r['num_prompts'], r['repeats'])}"),
        device_line(r),
        run_line(r),
        "",
        f"{'method':<38}{'tokens/s':>10}{'vs plain':>10}",
    ]
    for method in ("plain", "speculative", "hf_assisted", "hf_plain"):
        tps = r[f"{method}_tokens_per_s"]
        # transformers' assistant drafts K always (or until its own threshold)
        label = LABELS[method] + {"speculative": f" ({spec_k})", "hf_assisted": f" (K={k})"}.get(method, "")
        lines.append(f"{label:<38}{fmt(tps, '>10.1f')}{fmt(tps / plain, '>9.2fx')}")
    lines += [
        "",
        (f"speedup vs plain {fmt(r['speedup_vs_plain'], '.2fx')}; "
         f"vs transformers assisted {fmt(r['speedup_vs_hf_assisted'], '.2fx')}; "
         f"vs transformers plain {fmt(r['speedup_vs_hf_plain'], '.2fx')}"),
        (f"{_rate_said(r)}; mean accepted length "
         f"{_num(r['mean_accepted_length'], '.2f')} tokens per target forward (bonus included)"),
        (f"c = {fmt(r['draft_cost_ratio'], '.3f')} "
         f"(one-token KV-cached forward: draft {fmt(r['draft_forward_ms'], '.2f')} ms / "
         f"target {fmt(r['target_forward_ms'], '.2f')} ms, medians); {a_number(k + 1)}-token verify forward costs "
         f"{fmt(r['verify_cost_ratio'], '.2f')} target forwards"),
        _verify_curve(r.get("verify_cost_curve")),
        *_theory_lines(r),
        (f"greedy outputs identical to plain decoding: {_yes_no(r['identical_to_plain'])}; "
         f"transformers' plain output identical to the engine's: {_yes_no(r['hf_identical_to_engine'])}"),
        *_tree_against_chain(r),
        *format_budget(r.get("time_budget")),
        "",
        (f"{'prompt':>6}{'length':>8}{'plain':>9}{'spec':>9}{'hf asst':>9}{'hf plain':>9}{'speedup':>9}"
         f"{'vs hf':>7}{'accept':>8}{'len':>6}"),
    ]
    for i, row in enumerate(r["rows"], 1):
        lines.append(
            f"{i:>6}{row['prompt_tokens']:>8}{fmt(row['plain_tokens_per_s'], '>9.1f')}"
            f"{fmt(row['speculative_tokens_per_s'], '>9.1f')}"
            f"{fmt(row['hf_assisted_tokens_per_s'], '>9.1f')}{fmt(row['hf_plain_tokens_per_s'], '>9.1f')}"
            f"{fmt(row['speedup_vs_plain'], '>8.2fx')}{fmt(row['speedup_vs_hf_assisted'], '>6.2fx')}"
            f"{_num(row['acceptance_rate'], '.2f'):>8}{_num(row['mean_accepted_length'], '.2f'):>6}"
        )
    lines.append(PER_PROMPT_NOTE)
    return "\n".join(lines)


def _rate_said(r: dict) -> str:
    """The acceptance rate and what it counts: a chain's drafted tokens, or a token tree's nodes along each round's
    path (the engine's `drafted` of a tree round: its accepted nodes and the child rejected where the walk stopped),
    as the app's stats line names it."""
    if r.get("tree_width", 1) > 1:
        return (f"acceptance along the path {_num(r['acceptance_rate'], '.3f')} (token trees: accepted nodes / the "
                "nodes judged along each round's path, not a share of every drafted node)")
    return f"acceptance rate {_num(r['acceptance_rate'], '.3f')} (accepted / drafted)"


def _theory_lines(r: dict) -> list[str]:
    """Theorem 3.8's figures, or why there are none (a run that mixed copied rounds with the model's)."""
    if r["theoretical_speedup"] is None and r.get("copied_rounds"):
        return [(f"Theorem 3.8 does not describe this run: {r['copied_rounds']} of {r['rounds']} rounds copied their "
                 "draft from the context (no model forward), the rest drafted K tokens with the model")]
    return [
        (f"theoretical speedup {_num(r['theoretical_speedup'], '.2f')}x (Leviathan et al. Thm 3.8, per-token alpha "
         f"{_num(r['alpha_per_token'], '.3f')} fitted to the tokens per round, each at the K it asked); efficiency "
         f"{_num(r['efficiency'], '.2f')} (measured / theoretical)"
         + ("; with a token tree, the theorem's chain of K with the tree's tokens per forward and a K+1-token "
            "verify, so the tree's extra verify rows count as overhead"
            if r.get("tree_vs_chain_length") is not None else "")),
        (f"with the measured verify cost in place of 1: theoretical "
         f"{_num(r['theoretical_speedup_measured_verify'], '.2f')}x, "
         f"efficiency {_num(r['efficiency_measured_verify'], '.2f')}; Thm 3.8's best K at this alpha and c: "
         f"{r['best_k_theoretical']}"),
    ]


def format_drafter_table(r: dict) -> str:
    """`--drafter all`: one line per drafter (plain first), then tokens/s per prompt and drafter."""
    k, drafters = r["num_draft_tokens"], r["drafters"]
    own = {d.get("num_draft_tokens") for d in drafters.values()} - {None}
    k_text = f"K={k}" if own <= {k} else "each drafter at its own K (the preset's drafter_tokens)"
    mode = sampling_mode(r)
    width = {name: max(16, len(name) + 2) for name in drafters}  # the per-prompt columns: room for each name
    if r.get("tree_width", 1) > 1:
        mode += f", token trees of width {r['tree_width']} " + (f"({r['tree_nodes']} nodes)" if r.get("tree_nodes")
                                                                 else "(static)")
    lines = [
        (f"specui bench: preset {r['preset']}, drafters side by side ({', '.join(drafters)}), {k_text}, {mode}, "
         f"{r['max_new_tokens']} new tokens (EOS ignored), {run_size(r['num_prompts'], r['repeats'])}"),
        device_line(r),
        run_line(r),
        "",
        (f"{'drafter':<24}{'K':>4}{'tokens/s':>10}{'vs plain':>10}{'accept':>8}{'len':>7}{'c':>8}{'theory':>8}"
         "  identical"),
    ]
    confident = {d["label"]: d["draft_confidence"] for name, d in drafters.items()  # those whose K reads <=K
                 if at_most_k(d.get("num_draft_tokens") or 0, d.get("draft_confidence"), name)}
    for name, d in drafters.items():
        k_col = k_said(d.get("num_draft_tokens"), d.get("draft_confidence"), name, at_most="<=", none="n/a")
        lines.append(f"{d['label']:<24}{k_col:>4}"
                     f"{fmt(d['tokens_per_s'], '>10.1f')}{fmt(d['speedup_vs_plain'], '>9.2fx')}"
                     f"{_num(d['acceptance_rate'], '.3f'):>8}{_num(d['mean_accepted_length'], '.2f'):>7}"
                     f"{_num(d['draft_cost_ratio'], '.3f'):>8}{_num(d['theoretical_speedup'], '.2f'):>8}"
                     f"  {'(reference)' if name == 'plain' else _yes_no(d['identical_to_plain'])}")
    lines += [
        "",
        ("accept: acceptance rate, accepted / drafted (not the theory's fitted per-token alpha"
         + ("; a token tree's: accepted nodes / the nodes judged along each round's path" if r.get("tree_width", 1) > 1
            else "") + "); len: mean accepted length, tokens per target forward (bonus included)"),
        ("c: median seconds per drafted token" + (", a token tree's per level (one draft forward each)"
                                                   if r.get("tree_width", 1) > 1 else "")
         + " / median seconds of one plain-decoding forward (the timed runs); "
         "theory: Leviathan et al. Thm 3.8 at the fitted per-token alpha, K and c"),
        *([("<=K: drafting while confident, K the most a round drafts (draft_confidence: "
            + ", ".join(f"{label} {fmt(v, 'g')}" for label, v in confident.items())
            + "); the theory takes K for every round")] if confident else []),
        f"greedy outputs of every drafter identical to plain decoding: {_yes_no(r['identical_to_plain'])}",
        *[f"tree / chain, {d['label']}: {fmt(d['tree_vs_chain_length'], '.2fx')} the tokens per target forward, "
          f"{fmt(d['tree_vs_chain_speed'], '.2fx')} the speed (the chain of K={k} timed side by side)"
          for d in drafters.values() if "tree_vs_chain_length" in d],
        *[f"skipped: {label(name)}: it {reason} (tree width {r.get('tree_width')}); not run as a chain either"
          for name, reason in r.get("skipped", {}).items()],
        "",
        f"{'prompt':>6}{'length':>8}" + "".join(f"{name:>{width[name]}}" for name in drafters) + "  (tokens/s)",
    ]
    for i, row in enumerate(r["rows"], 1):
        lines.append(f"{i:>6}{row['prompt_tokens']:>8}" + "".join(
            fmt(row["drafters"][name]["tokens_per_s"], f">{width[name]}.1f") for name in drafters))
    lines.append(PER_PROMPT_NOTE)
    return "\n".join(lines)


def _tree_against_chain(r: dict) -> list[str]:
    """With token trees: the tree's figures over the same drafter's chain of K, timed side by side."""
    if "tree_vs_chain_length" not in r:
        return []
    shape = f"({r['tree_nodes']} nodes)" if r.get("tree_nodes") else "(static)"
    return [(f"token trees of width {r['tree_width']} {shape} against the chain of K={r['num_draft_tokens']} "
             f"(timed side by side, {fmt(r['chain_tokens_per_s'], '.1f')} tokens/s, "
             f"{fmt(r['chain_speedup_vs_plain'], '.2fx')} plain; outputs identical to plain: "
             f"{_yes_no(r['chain_identical_to_plain'])}): tokens per target forward "
             f"{_num(r['mean_accepted_length'], '.2f')} against {_num(r['chain_mean_accepted_length'], '.2f')} "
             f"({fmt(r['tree_vs_chain_length'], '.2fx')}); speed {fmt(r['tree_vs_chain_speed'], '.2fx')} the chain's")]


def _verify_curve(curve: dict | None) -> str:
    """One line of the verify-cost curve: a forward of n new tokens ÷ a one-token forward."""
    if not curve:
        return "verify-cost curve: not measured"
    def points(ratios) -> str:  # the curve's points at a few block sizes
        shown = (1, 2, 4, 6, 8, 12, 16)
        return "  ".join(f"{n}:{fmt(r, '.2f')}" for n, r in zip(curve["tokens"], ratios) if n in shown)

    line = f"verify-cost curve (n new tokens ÷ one token, cache {curve['cache_length']}): " + points(curve["ratios"])
    if curve.get("floor_ratios"):  # the arithmetic floor (`specui.verify_cost`)
        line += (f"\n  its floor, the multiply-adds alone at this CPU's fastest measured float32 rate "
                 f"({fmt(2e-9 * curve['fma_rate'], '.0f')} GFLOP/s): " + points(curve["floor_ratios"]))
    return line
