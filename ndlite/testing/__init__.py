"""ndlite's testing kit: samplers drawn from each op's spec, the tolerance policy, gradchecks,
and the comparison of any backend against the reference (the conformance kit).

It is a public part of the library (like `chainer.testing`): backend authors use it to prove
their backend right, with `ndlite conformance --backend NAME` or
`pytest --pyargs ndlite.testing.suite --ndlite-backend NAME`. hypothesis comes with every
install of ndlite; the pytest suite also needs pytest.
"""

from . import (  # noqa: F401 - they register samplers
    samplers_convseq,
    samplers_index,
    samplers_more,
    samplers_nn,
    samplers_rnn,
)
from .compare import REFERENCE, ConformanceError, Outcome, check, compare
from .gradcheck import GradcheckError, gradcheck, gradgradcheck
from .kinks import MARGIN
from .profiles import register_profiles
from .samplers import SAMPLERS, Case, sampler, strategy
from .tolerance import Verdict, judge

__all__ = ["REFERENCE", "Case", "ConformanceError", "GradcheckError", "MARGIN", "Outcome",
           "SAMPLERS", "Verdict", "check", "compare", "gradcheck", "gradgradcheck", "judge",
           "register_profiles", "sampler", "strategy"]
