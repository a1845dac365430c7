"""Neural-network building blocks with PyTorch's names: `Module`, `Parameter`, layers,
losses, `init`, and the functional ops in `ndlite.nn.functional`."""

from . import functional, init, models, parallel, utils
from .activation import GELU, LeakyReLU, LogSoftmax, ReLU, Sigmoid, Softmax, Tanh
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
from .layers_more import Conv1d, ConvTranspose1d, ConvTranspose2d, GroupNorm, RMSNorm
from .loss import (
    BCELoss,
    BCEWithLogitsLoss,
    CrossEntropyLoss,
    HuberLoss,
    KLDivLoss,
    L1Loss,
    MSELoss,
    NLLLoss,
    SmoothL1Loss,
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
           "TransformerEncoderLayer"]
