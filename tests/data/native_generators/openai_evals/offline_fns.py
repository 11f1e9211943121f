"""Two offline completion fns for oaieval: canned answers by question (no network)."""
from evals.api import CompletionFn, CompletionResult


class _Result(CompletionResult):
    def __init__(self, text):
        self.text = text

    def get_completions(self):
        return [self.text]


class CannedAnswers(CompletionFn):
    def __init__(self, answers, default="I do not know", **kwargs):
        self.answers = answers
        self.default = default

    def __call__(self, prompt, **kwargs):
        question = prompt[-1]["content"] if isinstance(prompt, list) else str(prompt)
        for key, text in self.answers.items():
            if key in question:
                return _Result(text)
        return _Result(self.default)
