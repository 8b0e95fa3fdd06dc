"""Where torchfuse's warnings point: at the user's code, not at torchfuse's or PyTorch's."""
from __future__ import annotations

import os
import sys

import torch

#: path prefixes of the frames a warning skips: PyTorch's (TorchDynamo, AOTAutograd, the module
#: call machinery) and torchfuse's own
_SKIPPED = (os.path.dirname(torch.__file__) + os.sep, os.path.dirname(os.path.dirname(__file__)) + os.sep)


def user_stacklevel() -> int:
    """The ``stacklevel`` for a ``warnings.warn`` made by the caller of this function that
    names the first frame outside PyTorch and torchfuse (the user's model or loop); the
    outermost frame when every frame is inside them. A frame still at its first line is one
    TorchDynamo is compiling, not running (its ``def`` line): the warning names its caller,
    the line that called the model."""
    frame, level = sys._getframe(1), 1
    while frame.f_back is not None and (frame.f_code.co_filename.startswith(_SKIPPED)
                                        or frame.f_lineno == frame.f_code.co_firstlineno):
        frame, level = frame.f_back, level + 1
    return level
