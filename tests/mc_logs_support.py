"""lm-evaluation-harness multiple-choice logs with option log-likelihoods, in the exact v0.4.3+
``--log_samples`` layout the adapter reads: three MMLU subtasks, each item with true option
probabilities drawn from a Dirichlet law and its correct option drawn from them; a model logs
``power`` times the true probabilities' logarithms (1: calibrated; 3: overconfident)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

TASKS = {"mmlu_philosophy": "mmlu_humanities", "mmlu_formal_logic": "mmlu_humanities", "mmlu_anatomy": "mmlu_stem"}
DATE = "2024-07-01T10-00-00.123456"


def truth(rng: np.random.Generator, n_docs: int):
    return {task: [(p, int(rng.choice(4, p=p))) for p in rng.dirichlet(np.full(4, 0.6), size=n_docs)]
            for task in TASKS}


def write_mc_run(root: Path, model: str, items: dict, power: float) -> Path:
    out = root / model.replace("/", "__")
    out.mkdir(parents=True)
    results = {"results": {}, "group_subtasks": {"mmlu_humanities": ["mmlu_philosophy", "mmlu_formal_logic"],
                                                 "mmlu_stem": ["mmlu_anatomy"], "mmlu": ["mmlu_humanities", "mmlu_stem"]},
               "configs": {}, "versions": {}, "n-shot": {}, "model_name": model,
               "config": {"model": "hf", "model_args": f"pretrained={model}"}}
    for task, docs in items.items():
        lines, accs = [], []
        for doc_id, (p, gold) in enumerate(docs):
            lls = power * np.log(np.maximum(p, 1e-300)) - 1.0  # log-likelihoods: any constant shift is fine
            acc = float(np.argmax(lls) == gold)
            accs.append(acc)
            lines.append({
                "doc_id": doc_id, "doc": {"question": f"q{doc_id}", "choices": list("ABCD"), "answer": gold},
                "target": gold,
                "arguments": {f"gen_args_{j}": {"arg_0": f"q{doc_id}\nAnswer:", "arg_1": f" {c}"}
                              for j, c in enumerate("ABCD")},
                "resps": [[[str(x), "False"]] for x in lls], "filtered_resps": [[str(x), "False"] for x in lls],
                "filter": "none", "metrics": ["acc"], "acc": acc})
        (out / f"samples_{task}_{DATE}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
        results["results"][task] = {"alias": task, "acc,none": float(np.mean(accs))}
        results["configs"][task] = {"task": task, "output_type": "multiple_choice"}
    (out / f"results_{DATE}.json").write_text(json.dumps(results))
    return out
