"""The models of the capture issue under backend "ember" (C++ kernels): inference and a training step."""
import copy

import pytest
import torch
from torch import nn

import ember


def _transformer(name):
    from transformers import BertConfig, BertForMaskedLM, GPT2Config, GPT2LMHeadModel, T5Config, \
        T5ForConditionalGeneration

    torch.manual_seed(0)
    ids = torch.randint(0, 128, (2, 16))
    if name == "bert":
        model = BertForMaskedLM(BertConfig(vocab_size=128, hidden_size=32, num_hidden_layers=2,
                                           num_attention_heads=2, intermediate_size=64,
                                           max_position_embeddings=64, hidden_dropout_prob=0.0,
                                           attention_probs_dropout_prob=0.0))
        return model, dict(input_ids=ids), dict(input_ids=ids, labels=ids)
    if name == "gpt2":
        model = GPT2LMHeadModel(GPT2Config(vocab_size=128, n_embd=32, n_layer=2, n_head=2, n_positions=64,
                                           resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0))
        return model, dict(input_ids=ids), dict(input_ids=ids, labels=ids)
    model = T5ForConditionalGeneration(T5Config(vocab_size=128, d_model=32, d_kv=16, d_ff=64, num_layers=2,
                                                num_heads=2, dropout_rate=0.0, decoder_start_token_id=0))
    decoder = torch.randint(0, 128, (2, 8))
    return model, dict(input_ids=ids, decoder_input_ids=decoder), dict(input_ids=ids, labels=decoder)


def _small(name):
    torch.manual_seed(0)
    if name == "mlp":
        model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.LayerNorm(32), nn.Linear(32, 4))
        x = torch.randn(8, 16)
    else:
        model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                              nn.Flatten(), nn.Linear(8 * 4 * 4, 10))
        x = torch.randn(4, 3, 8, 8)
    return model, x


@pytest.mark.parametrize("name", ["mlp", "cnn"])
def test_small_models_infer_and_train(name):
    model, x = _small(name)
    model.eval()
    compiled = ember.compile(model, backend="ember")
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-5, atol=1e-5)
    model.train()
    reference = copy.deepcopy(model)
    compiled(x).sum().backward()
    reference(x).sum().backward()
    for (key, p), (_, q) in zip(model.named_parameters(), reference.named_parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5, msg=key)


@pytest.mark.parametrize("name", ["bert", "gpt2", "t5"])
def test_transformers_infer_and_train(name):
    model, inference_inputs, training_inputs = _transformer(name)
    model.eval()
    compiled = ember.compile(model, backend="ember")
    with torch.no_grad():
        torch.testing.assert_close(compiled(**inference_inputs).logits, model(**inference_inputs).logits,
                                   rtol=1e-5, atol=1e-5)
    model.train()
    reference = copy.deepcopy(model)
    loss = compiled(**training_inputs).loss
    expected = reference(**training_inputs).loss
    torch.testing.assert_close(loss, expected, rtol=1e-5, atol=1e-5)
    loss.backward()
    expected.backward()
    for (key, p), (_, q) in zip(model.named_parameters(), reference.named_parameters()):
        if q.grad is not None:
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5, msg=key)
