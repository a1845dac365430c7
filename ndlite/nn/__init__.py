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
from .layers import AdaptiveAvgPool2d, AvgPool2d, Conv2d, Dropout, Flatten, Linear, MaxPool2d
from .loss import BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, L1Loss, MSELoss, NLLLoss
from .gpt import GPT
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
           "LayerNorm", "GPT"]
__all__ += ["GRU", "GRUCell", "LSTM", "LSTMCell", "RNN", "RNNBase", "RNNCell", "RNNCellBase"]
__all__ += ["MultiheadAttention", "Transformer", "TransformerDecoder", "TransformerDecoderLayer",
            "TransformerEncoder", "TransformerEncoderLayer"]
