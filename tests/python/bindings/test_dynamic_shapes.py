"""Models exported once with dynamic dims and run at several sizes against
PyTorch: CNNs with BatchNorm (dynamic batch and H/W), transformer encoder
layers on the fused and the composite path (dynamic batch, sequence, or both),
and a GPT-style decoder whose 3-d Linears are views around 2-d products
(dynamic batch). Views that rlx
cannot resolve must fail at import with a message, never run wrong."""
import os
import sys

import numpy as np
import pytest
import torch

import rlx

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
import rlx_torch_models as M  # noqa: E402


def run_sizes(net, example, dynamic, inputs):
    """Exports once, then runs every input beside PyTorch; returns the model."""
    m = rlx.from_torch(net, (example,), dynamic=dynamic)
    for x in inputs:
        (y,) = m.run({m.inputs[0].name: x.numpy()}).values()
        with torch.no_grad():
            ref = net(x).numpy()
        assert y.shape == ref.shape
        np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-5)
    return m


class SmallCnn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.pool = torch.nn.AdaptiveAvgPool2d(1)
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(torch.relu(self.bn(self.conv(x)))), 1))


def test_cnn_with_batch_norm_dynamic_batch_and_image_size():
    torch.manual_seed(0)
    net = SmallCnn().eval()
    m = run_sizes(net, torch.randn(2, 3, 16, 16), {0: {0: "batch", 2: "h", 3: "w"}},
                  [torch.randn(1, 3, 16, 16), torch.randn(3, 3, 24, 20)])
    assert m.inputs[0].shape == ("batch", 3, "h", "w")
    assert m.outputs[0].shape == ("batch", 4)  # the flatten keeps the symbol


def test_resnet18_dynamic_batch():
    import torchvision
    torch.manual_seed(0)
    net = torchvision.models.resnet18(num_classes=10).eval()
    run_sizes(net, torch.randn(2, 3, 32, 32), {0: {0: "batch"}},
              [torch.randn(1, 3, 32, 32), torch.randn(3, 3, 32, 32)])


@pytest.mark.parametrize("dim,sizes", [(0, (1, 3)), (1, (5, 33))])
def test_fused_encoder_layer_dynamic_batch_or_sequence(dim, sizes):
    torch.manual_seed(0)
    net = torch.nn.TransformerEncoderLayer(32, 4, 64, batch_first=True).eval()
    shape = lambda s: (s, 16, 32) if dim == 0 else (2, s, 32)  # noqa: E731
    run_sizes(net, torch.randn(2, 16, 32), {0: {dim: "n"}}, [torch.randn(shape(s)) for s in sizes])


def test_composite_encoder_layer_dynamic_sequence_and_batch():
    net, (x,) = M.transformer_slow()  # [seq 7, batch 2, 32], norm_first with gelu
    net.eval()
    run_sizes(net, x, {0: {0: "seq"}}, [torch.randn(3, 2, 32), torch.randn(12, 2, 32)])
    # Batch: its [7 * b, 32] views are told apart by an example size that no
    # other dim there is a multiple of (3, not 2).
    run_sizes(net, torch.randn(7, 3, 32), {0: {1: "batch"}},
              [torch.randn(7, 1, 32), torch.randn(7, 4, 32)])


def test_encoder_layers_dynamic_batch_and_sequence_together():
    # The composite path's 3-d Linears merge both symbols ([t, b, 32] -> [t * b,
    # 32]) and split them back, read from the input at run time (reshape_like);
    # its heads merge with the batch ([t, b * 4, 8]).
    torch.manual_seed(0)
    enc = torch.nn.TransformerEncoderLayer(32, 4, 64, norm_first=True).eval()
    m = run_sizes(enc, torch.randn(7, 3, 32), {0: {0: "seq", 1: "batch"}},
                  [torch.randn(5, 2, 32), torch.randn(9, 4, 32), torch.randn(1, 1, 32)])
    assert m.inputs[0].shape == ("seq", "batch", 32)
    # The fused path (batch first).
    net = torch.nn.TransformerEncoderLayer(32, 4, 64, batch_first=True).eval()
    run_sizes(net, torch.randn(3, 7, 32), {0: {0: "batch", 1: "seq"}},
              [torch.randn(2, 5, 32), torch.randn(4, 9, 32)])


def test_gpt_decoder_dynamic_batch():
    net, _ = M.gpt()  # 4 heads, 9 tokens
    net.eval()
    run_sizes(net, torch.randint(0, 50, (5, 9)), {0: {0: "batch"}},
              [torch.randint(0, 50, (b, 9)) for b in (1, 2, 6)])


def test_a_view_rlx_cannot_resolve_fails_at_import():
    net, _ = M.gpt()
    net.eval()
    # Batch 2 beside 4 heads: which dim of [b * 4, 9, 9] -> [b, 4, 9, 9] is the
    # batch cannot be told from sizes alone; rlx refuses rather than guesses.
    with pytest.raises(rlx.Error, match="cannot tell which dim is 'batch'"):
        rlx.from_torch(net, (torch.randint(0, 50, (2, 9)),), dynamic={0: {0: "batch"}})
    # Two dynamic dims whose example sizes divide a static dim of a view (batch
    # 2 and 4 heads): which dim holds the batch cannot be told.
    enc = torch.nn.TransformerEncoderLayer(32, 4, 64, norm_first=True).eval()  # composite path
    with pytest.raises(rlx.Error, match="cannot tell which dim is"):
        rlx.from_torch(enc, (torch.randn(7, 2, 32),), dynamic={0: {0: "seq", 1: "batch"}})
