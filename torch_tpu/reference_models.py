"""Small reference models shared by the demo, the benchmarks and the tests.

A GPT-style decoder built from PyTorch's own layers (so it exercises embedding, attention through
scaled_dot_product_attention, layer norm, GELU and cross-entropy) and a plain MLP. They are
ordinary torch.nn.Modules: nothing in them knows about the tpu device.
"""
import torch


class Decoder(torch.nn.Module):
    def __init__(self, vocab=512, dim=256, heads=4, layers=4, seq=128):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, dim)
        self.position = torch.nn.Parameter(torch.randn(seq, dim) * 0.02)
        layer = torch.nn.TransformerEncoderLayer(dim, heads, dim_feedforward=4 * dim, dropout=0.0,
                                                 activation="gelu", batch_first=True, norm_first=True)
        self.blocks = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = torch.nn.LayerNorm(dim)
        self.head = torch.nn.Linear(dim, vocab)

    def forward(self, tokens):
        seq = tokens.shape[1]
        mask = torch.nn.Transformer.generate_square_subsequent_mask(seq, device=tokens.device)
        h = self.embed(tokens) + self.position[:seq]
        return self.head(self.norm(self.blocks(h, mask=mask, is_causal=True)))


def mlp(features=512, hidden=1024, classes=10):
    return torch.nn.Sequential(torch.nn.Linear(features, hidden), torch.nn.GELU(), torch.nn.Linear(hidden, hidden),
                               torch.nn.GELU(), torch.nn.Linear(hidden, classes))
