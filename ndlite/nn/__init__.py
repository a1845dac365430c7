"""Neural-network building blocks with PyTorch's names: `Module`, `Parameter`, layers,
losses, `init`, and the functional ops in `ndlite.nn.functional`."""

from . import functional, init, models, parallel, utils
from .activation import GELU, LeakyReLU, LogSoftmax, ReLU, Sigmoid, Softmax, Tanh
from .activations_more import (
    CELU,
    GLU,
    SELU,
    Hardshrink,
    Hardsigmoid,
    Hardswish,
    Mish,
    PReLU,
    ReLU6,
    Softmax2d,
    Softmin,
    Softshrink,
    Softsign,
    Tanhshrink,
    Threshold,
)
from .container import ModuleList, Sequential
from .containers_more import (
    ELU,
    Hardtanh,
    Identity,
    LogSigmoid,
    ModuleDict,
    ParameterDict,
    ParameterList,
    SiLU,
    Softplus,
)
from .gpt import GPT
from .layers import AdaptiveAvgPool2d, AvgPool2d, Conv2d, Dropout, Flatten, Linear, MaxPool2d
from .layers_extra import (
    AdaptiveMaxPool2d,
    AvgPool1d,
    Bilinear,
    ChannelShuffle,
    CircularPad1d,
    CircularPad2d,
    ConstantPad1d,
    ConstantPad2d,
    CosineSimilarity,
    Dropout1d,
    Dropout2d,
    Fold,
    InstanceNorm1d,
    InstanceNorm2d,
    MaxPool1d,
    PairwiseDistance,
    PixelShuffle,
    PixelUnshuffle,
    ReflectionPad1d,
    ReflectionPad2d,
    ReplicationPad1d,
    ReplicationPad2d,
    Unflatten,
    Unfold,
    Upsample,
    UpsamplingBilinear2d,
    UpsamplingNearest2d,
    ZeroPad1d,
    ZeroPad2d,
)
from .layers_more import Conv1d, ConvTranspose1d, ConvTranspose2d, GroupNorm, RMSNorm
from .loss import (
    BCELoss,
    BCEWithLogitsLoss,
    CosineEmbeddingLoss,
    CrossEntropyLoss,
    HingeEmbeddingLoss,
    HuberLoss,
    KLDivLoss,
    L1Loss,
    MarginRankingLoss,
    MSELoss,
    NLLLoss,
    SmoothL1Loss,
    SoftMarginLoss,
    TripletMarginLoss,
)
from .module import Module, Parameter
from .normalization import BatchNorm1d, BatchNorm2d
from .rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNBase, RNNCell, RNNCellBase
from .transformer import (
    MultiheadAttention,
    Transformer,
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
)
from .transformer_layers import Embedding, LayerNorm

__all__ = ["AdaptiveAvgPool2d", "AvgPool2d", "BCELoss", "BCEWithLogitsLoss", "BatchNorm1d",
           "BatchNorm2d", "Conv2d", "CrossEntropyLoss", "Dropout", "Flatten", "GELU", "L1Loss",
           "LeakyReLU", "Linear", "LogSoftmax", "MSELoss", "MaxPool2d", "Module", "ModuleList",
           "NLLLoss", "Parameter", "ReLU", "Sequential", "Sigmoid", "Softmax", "Tanh",
           "functional", "init", "models", "utils", "ELU", "Hardtanh", "Identity", "LogSigmoid",
           "ModuleDict", "ParameterDict", "ParameterList", "SiLU", "Softplus", "Embedding",
           "LayerNorm", "Conv1d", "ConvTranspose1d", "ConvTranspose2d", "GroupNorm", "RMSNorm",
           "HuberLoss", "KLDivLoss", "SmoothL1Loss", "GPT", "GRU", "GRUCell", "LSTM", "LSTMCell",
           "RNN", "RNNBase", "RNNCell", "RNNCellBase", "MultiheadAttention", "Transformer",
           "TransformerDecoder", "TransformerDecoderLayer", "TransformerEncoder",
           "TransformerEncoderLayer",
           "CELU", "GLU", "SELU", "Hardshrink", "Hardsigmoid", "Hardswish", "Mish", "PReLU",
           "ReLU6", "Softmax2d", "Softmin", "Softshrink", "Softsign", "Tanhshrink", "Threshold",
           "AvgPool1d", "Bilinear", "CircularPad1d", "CircularPad2d", "ConstantPad1d",
           "ConstantPad2d", "CosineSimilarity", "Dropout1d", "Dropout2d", "InstanceNorm1d",
           "InstanceNorm2d", "MaxPool1d", "PairwiseDistance", "PixelShuffle", "PixelUnshuffle",
           "ReflectionPad1d", "ReflectionPad2d", "ReplicationPad1d", "ReplicationPad2d",
           "Unflatten", "Upsample", "UpsamplingBilinear2d", "UpsamplingNearest2d", "ZeroPad1d",
           "ZeroPad2d", "CosineEmbeddingLoss", "HingeEmbeddingLoss", "MarginRankingLoss",
           "SoftMarginLoss", "TripletMarginLoss", "AdaptiveMaxPool2d", "ChannelShuffle",
           "Fold", "Unfold"]
