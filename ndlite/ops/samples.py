"""The kinds of input an op's test spec can ask for: `Spec(samples.UNARY, ...)`.

Each kind is an object, declared here once; the conformance kit (ndlite.testing.samplers)
gives each a hypothesis strategy with `@sampler(samples.UNARY)`. Specs refer to these objects,
never to strings, so a typo fails at import and a reader can jump from an op to what draws
its inputs. A package that adds ops declares its own kinds with `Sampler("name", "...")`.
"""

from __future__ import annotations


class Sampler:
    """A kind of test input: its name (for messages) and what it draws."""

    __slots__ = ("name", "doc")

    def __init__(self, name: str, doc: str = ""):
        self.name = name
        self.doc = doc

    def __repr__(self) -> str:
        return f"samples.{self.name.upper()}"


UNARY = Sampler("unary", "one float array of any shape (0-d included) in the spec's domain")
BINARY = Sampler("binary", "two mutually broadcastable arrays; params pick pow's exponents or "
                           "keep divisors away from zero")
WHERE = Sampler("where", "a bool condition and two branches, all broadcastable")
REDUCE = Sampler("reduce", "an array and the dims to reduce (none, one, several; keepdim)")
MATMUL = Sampler("matmul", "two arrays whose shapes multiply (vectors, matrices, batches)")
LINEAR = Sampler("linear", "input, weight and optional bias of a Linear layer")
RESHAPE = Sampler("reshape", "an array and a shape with the same number of elements")
PERMUTE = Sampler("permute", "an array and a permutation of its dims")
TRANSPOSE = Sampler("transpose", "an array and two of its dims")
EXPAND = Sampler("expand", "an array and a shape it broadcasts to")
SQUEEZE = Sampler("squeeze", "an array with size-1 dims and which to drop")
UNSQUEEZE = Sampler("unsqueeze", "an array and where to insert a dim")
FLATTEN = Sampler("flatten", "an array and a range of dims to flatten")
CAT = Sampler("cat", "several arrays that join along one dim")
SPLIT = Sampler("split", "an array and split sizes along one dim")
PAD = Sampler("pad", "an array and constant padding widths per side")
GETITEM = Sampler("getitem", "an array and a key: ints, slices, None, ellipsis, integer and "
                             "bool arrays")
INDEX_PUT = Sampler("index_put", "an array, a key and a value broadcastable to x[key]")
GATHER = Sampler("gather", "an array, a dim and an index array in range")
SCATTER_ADD = Sampler("scatter_add", "a target, a dim, an index and a source")
TAKE = Sampler("take", "an array, a dim and integer indices along it")
CONV2D = Sampler("conv2d", "input, weight, bias and geometry of a 2-d convolution")
CONV2D_GRAD = Sampler("conv2d_grad", "the operands of a convolution's input or weight gradient")
POOL2D = Sampler("pool2d", "an input and a pooling geometry (kernel, stride, padding, "
                           "dilation, ceil_mode) with no empty window")
ADAPTIVE_POOL2D = Sampler("adaptive_pool2d", "an input and an output size")
SOFTMAX = Sampler("softmax", "an array and a dim")
GELU = Sampler("gelu", "an array and an approximation ('none' or 'tanh')")
DROPOUT = Sampler("dropout", "an array, a probability and a seed (the mask is seeded)")
BATCH_NORM = Sampler("batch_norm", "input, running statistics, weight and bias")
NLL_LOSS = Sampler("nll_loss", "log-probabilities and class labels (with ignore_index)")
CROSS_ENTROPY = Sampler("cross_entropy", "logits, labels or probabilities, label smoothing")
REGRESSION_LOSS = Sampler("regression_loss", "input and target of the same shape")
BINARY_LOSS = Sampler("binary_loss", "probabilities or logits and targets in [0, 1]")
EINSUM = Sampler("einsum", "an equation (matmul, batch, attention, trace, diagonal, outer, "
                           "bilinear, ...) and operands of fitting shapes")
SORT = Sampler("sort", "an array, a dim and a direction (values distinct where gradients "
                       "are checked)")
SCAN = Sampler("scan", "an array and a dim")
