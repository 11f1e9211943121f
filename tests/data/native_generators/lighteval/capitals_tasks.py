"""Two offline lighteval tasks over a local JSONL file: generative (exact match) and multiple choice (loglikelihood)."""
from pathlib import Path

from lighteval.metrics.metrics import Metrics
from lighteval.tasks.lighteval_task import LightevalTaskConfig
from lighteval.tasks.requests import Doc

DATA = str(Path(__file__).parent / "data")


def gen_prompt(line, task_name: str = None):
    return Doc(task_name=task_name, query=f"What is the capital of {line['country']}? Answer:",
               choices=[line["answer"]], gold_index=0, specific={"id": line["id"]})


def mc_prompt(line, task_name: str = None):
    return Doc(task_name=task_name, query=f"What is the capital of {line['country']}? Answer:",
               choices=[f" {c}" for c in line["choices"]], gold_index=line["gold"], specific={"id": line["id"]})


capitals_gen = LightevalTaskConfig(
    name="capitals_gen", prompt_function=gen_prompt, hf_repo=DATA, hf_subset="default",
    hf_avail_splits=["test"], evaluation_splits=["test"], few_shots_split=None, few_shots_select=None,
    generation_size=16, metrics=[Metrics.exact_match], stop_sequence=["\n"], version=0)

capitals_mc = LightevalTaskConfig(
    name="capitals_mc", prompt_function=mc_prompt, hf_repo=DATA, hf_subset="default",
    hf_avail_splits=["test"], evaluation_splits=["test"], few_shots_split=None, few_shots_select=None,
    generation_size=1, metrics=[Metrics.loglikelihood_acc], stop_sequence=["\n"], version=0)

TASKS_TABLE = [capitals_gen, capitals_mc]
