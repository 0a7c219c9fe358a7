"""Language models written from their published configurations, in plain PyTorch.

Attention goes through F.scaled_dot_product_attention, so the dataset records attention as one
operator (what fused/flash kernels compute) rather than the bmm-softmax-bmm it replaces.
Dropout is inactive (models are captured in eval mode).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


# ---------------------------------------------------------------------------------------------
# LSTM language model: Zaremba, Sutskever & Vinyals 2014, the "medium" model (2 layers of 650
# units, 10k-word Penn Treebank vocabulary, unrolled for 35 steps); embedding size = hidden size.
@dataclass(frozen=True)
class LstmLmConfig:
    vocab: int = 10000
    hidden: int = 650
    layers: int = 2


class LstmLm(nn.Module):
    def __init__(self, cfg: LstmLmConfig = LstmLmConfig()) -> None:
        super().__init__()
        self.embed = nn.Embedding(cfg.vocab, cfg.hidden)
        self.lstm = nn.LSTM(cfg.hidden, cfg.hidden, cfg.layers)
        self.decoder = nn.Linear(cfg.hidden, cfg.vocab)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """ids: (batch, steps); the LSTM runs time-major as in the paper's code."""
        out, _ = self.lstm(self.embed(ids.t()))
        return self.decoder(out)


def lstm_lm() -> nn.Module:
    return LstmLm()


# ---------------------------------------------------------------------------------------------
# BERT-base: Devlin et al. 2019 (L=12, H=768, A=12, FFN 4H), post-LayerNorm, GELU (erf), the
# released vocabulary of 30522 WordPieces, 512 positions, 2 segment types, LayerNorm eps 1e-12.
@dataclass(frozen=True)
class BertConfig:
    vocab: int = 30522
    hidden: int = 768
    layers: int = 12
    heads: int = 12
    ffn: int = 3072
    positions: int = 512
    segments: int = 2
    eps: float = 1e-12


class BertLayer(nn.Module):
    def __init__(self, cfg: BertConfig) -> None:
        super().__init__()
        self.heads = cfg.heads
        self.q, self.k, self.v = (nn.Linear(cfg.hidden, cfg.hidden) for _ in range(3))
        self.attn_out = nn.Linear(cfg.hidden, cfg.hidden)
        self.norm1 = nn.LayerNorm(cfg.hidden, eps=cfg.eps)
        self.ffn_in = nn.Linear(cfg.hidden, cfg.ffn)
        self.ffn_out = nn.Linear(cfg.ffn, cfg.hidden)
        self.norm2 = nn.LayerNorm(cfg.hidden, eps=cfg.eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, h = x.shape
        split = lambda t: t.view(b, s, self.heads, h // self.heads).transpose(1, 2)  # noqa: E731
        ctx = F.scaled_dot_product_attention(split(self.q(x)), split(self.k(x)), split(self.v(x)))
        x = self.norm1(x + self.attn_out(ctx.transpose(1, 2).reshape(b, s, h)))
        return self.norm2(x + self.ffn_out(F.gelu(self.ffn_in(x))))


class Bert(nn.Module):
    """BertModel: embeddings, encoder and the [CLS] pooler (no pre-training heads)."""

    def __init__(self, cfg: BertConfig = BertConfig()) -> None:
        super().__init__()
        self.words = nn.Embedding(cfg.vocab, cfg.hidden)
        self.positions = nn.Embedding(cfg.positions, cfg.hidden)
        self.segments = nn.Embedding(cfg.segments, cfg.hidden)
        self.norm = nn.LayerNorm(cfg.hidden, eps=cfg.eps)
        self.layers = nn.ModuleList(BertLayer(cfg) for _ in range(cfg.layers))
        self.pooler = nn.Linear(cfg.hidden, cfg.hidden)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(ids.shape[1], device=ids.device)
        x = self.norm(self.words(ids) + self.positions(pos) + self.segments(torch.zeros_like(ids)))
        for layer in self.layers:
            x = layer(x)
        return torch.tanh(self.pooler(x[:, 0]))


def bert_base() -> nn.Module:
    return Bert()


# ---------------------------------------------------------------------------------------------
# GPT-2 small: Radford et al. 2019 and OpenAI's released hyper-parameters (n_layer 12, n_embd
# 768, n_head 12, n_ctx 1024, vocab 50257), pre-LayerNorm (eps 1e-5), GELU (tanh form), causal
# attention, LM head tied to the token embedding.
@dataclass(frozen=True)
class Gpt2Config:
    vocab: int = 50257
    hidden: int = 768
    layers: int = 12
    heads: int = 12
    positions: int = 1024
    eps: float = 1e-5


class Gpt2Block(nn.Module):
    def __init__(self, cfg: Gpt2Config) -> None:
        super().__init__()
        self.heads = cfg.heads
        self.norm1 = nn.LayerNorm(cfg.hidden, eps=cfg.eps)
        self.qkv = nn.Linear(cfg.hidden, 3 * cfg.hidden)
        self.proj = nn.Linear(cfg.hidden, cfg.hidden)
        self.norm2 = nn.LayerNorm(cfg.hidden, eps=cfg.eps)
        self.fc = nn.Linear(cfg.hidden, 4 * cfg.hidden)
        self.fc_proj = nn.Linear(4 * cfg.hidden, cfg.hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, h = x.shape
        q, k, v = (
            t.view(b, s, self.heads, h // self.heads).transpose(1, 2) for t in self.qkv(self.norm1(x)).split(h, dim=2)
        )
        ctx = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(ctx.transpose(1, 2).reshape(b, s, h))
        return x + self.fc_proj(F.gelu(self.fc(self.norm2(x)), approximate="tanh"))


class Gpt2(nn.Module):
    def __init__(self, cfg: Gpt2Config = Gpt2Config()) -> None:
        super().__init__()
        self.tokens = nn.Embedding(cfg.vocab, cfg.hidden)
        self.positions = nn.Embedding(cfg.positions, cfg.hidden)
        self.blocks = nn.ModuleList(Gpt2Block(cfg) for _ in range(cfg.layers))
        self.norm = nn.LayerNorm(cfg.hidden, eps=cfg.eps)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(ids.shape[1], device=ids.device)
        x = self.tokens(ids) + self.positions(pos)
        for block in self.blocks:
            x = block(x)
        return F.linear(self.norm(x), self.tokens.weight)  # the tied LM head


def gpt2() -> nn.Module:
    return Gpt2()


# ---------------------------------------------------------------------------------------------
# Llama 3 8B (Meta's released config.json): hidden 4096, intermediate 14336 (SwiGLU), 32 layers,
# 32 query heads and 8 key/value heads (grouped-query attention), RMSNorm eps 1e-5, RoPE with
# theta 500000, vocab 128256, untied LM head, no biases.
@dataclass(frozen=True)
class LlamaConfig:
    vocab: int = 128256
    hidden: int = 4096
    ffn: int = 14336
    layers: int = 32
    heads: int = 32
    kv_heads: int = 8
    eps: float = 1e-5
    rope_theta: float = 500000.0


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    a, b = x.chunk(2, dim=-1)
    return torch.cat((-b, a), dim=-1)


class LlamaDecoderLayer(nn.Module):
    def __init__(self, cfg: LlamaConfig = LlamaConfig()) -> None:
        super().__init__()
        self.cfg = cfg
        d = cfg.hidden // cfg.heads
        self.norm1 = nn.RMSNorm(cfg.hidden, eps=cfg.eps)
        self.q = nn.Linear(cfg.hidden, cfg.heads * d, bias=False)
        self.k = nn.Linear(cfg.hidden, cfg.kv_heads * d, bias=False)
        self.v = nn.Linear(cfg.hidden, cfg.kv_heads * d, bias=False)
        self.o = nn.Linear(cfg.heads * d, cfg.hidden, bias=False)
        self.norm2 = nn.RMSNorm(cfg.hidden, eps=cfg.eps)
        self.gate = nn.Linear(cfg.hidden, cfg.ffn, bias=False)
        self.up = nn.Linear(cfg.hidden, cfg.ffn, bias=False)
        self.down = nn.Linear(cfg.ffn, cfg.hidden, bias=False)

    def _rope(self, s: int, d: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        inv = 1.0 / (self.cfg.rope_theta ** (torch.arange(0, d, 2, device=device, dtype=torch.float32) / d))
        angles = torch.outer(torch.arange(s, device=device, dtype=torch.float32), inv)
        angles = torch.cat((angles, angles), dim=-1)
        return angles.cos(), angles.sin()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        cfg, d = self.cfg, self.cfg.hidden // self.cfg.heads
        h = self.norm1(x)
        q = self.q(h).view(b, s, cfg.heads, d).transpose(1, 2)
        k = self.k(h).view(b, s, cfg.kv_heads, d).transpose(1, 2)
        v = self.v(h).view(b, s, cfg.kv_heads, d).transpose(1, 2)
        cos, sin = (t.to(q.dtype) for t in self._rope(s, d, x.device))  # in fp16/bf16 too (as Hugging Face's)
        q, k = q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin
        ctx = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        x = x + self.o(ctx.transpose(1, 2).reshape(b, s, cfg.heads * d))
        h = self.norm2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Llama(nn.Module):
    """The whole decoder (used to check the layer against the published 8.03B parameters)."""

    def __init__(self, cfg: LlamaConfig = LlamaConfig()) -> None:
        super().__init__()
        self.tokens = nn.Embedding(cfg.vocab, cfg.hidden)
        self.layers = nn.ModuleList(LlamaDecoderLayer(cfg) for _ in range(cfg.layers))
        self.norm = nn.RMSNorm(cfg.hidden, eps=cfg.eps)
        self.head = nn.Linear(cfg.hidden, cfg.vocab, bias=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.tokens(ids)
        for layer in self.layers:
            x = layer(x)
        return self.head(self.norm(x))


def llama3_8b_layer() -> nn.Module:
    return LlamaDecoderLayer()
