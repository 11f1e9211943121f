"""An offline lighteval custom model: canned answers by country, fixed log-likelihoods (no network, no weights)."""
import os

from lighteval.models.abstract_model import LightevalModel
from lighteval.models.model_output import ModelResponse
from lighteval.tasks.requests import SamplingMethod
from lighteval.utils.cache_management import SampleCache, cached

# Which questions the model gets wrong: a comma-separated list of countries in CANNED_WRONG.
WRONG = {c for c in os.environ.get("CANNED_WRONG", "").split(",") if c}
ANSWERS = {"France": "Paris", "Japan": "Tokyo", "Kenya": "Nairobi", "Canada": "Ottawa", "Australia": "Canberra",
           "Brazil": "Brasilia", "Egypt": "Cairo", "Norway": "Oslo", "Peru": "Lima", "Vietnam": "Hanoi",
           "Turkey": "Ankara", "New Zealand": "Wellington"}


def _country(doc):
    return doc.query.removeprefix("What is the capital of ").split("?")[0]


class CannedModel(LightevalModel):
    def __init__(self, config):
        self.config = config
        self._cache = SampleCache(config)  # as lighteval's DummyModel

    @property
    def tokenizer(self):
        return None

    @property
    def add_special_tokens(self):
        return False

    @property
    def max_length(self):
        return 2048

    @cached(SamplingMethod.GENERATIVE)
    def greedy_until(self, docs):
        out = []
        for doc in docs:
            c = _country(doc)
            out.append(ModelResponse(text=["I am not sure" if c in WRONG else ANSWERS[c]]))
        return out

    @cached(SamplingMethod.LOGPROBS)
    def loglikelihood(self, docs):
        out = []
        for doc in docs:
            c = _country(doc)
            right = ANSWERS[c]
            logprobs = [(-2.5 if c in WRONG else -0.2) if ch.strip() == right else (-0.4 if c in WRONG else -3.0)
                        for ch in doc.choices]
            out.append(ModelResponse(logprobs=logprobs, argmax_logits_eq_gold=[False] * len(doc.choices)))
        return out

    def loglikelihood_rolling(self, docs):
        raise NotImplementedError
