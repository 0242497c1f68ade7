"""Min-cut never saves more than the default partition, gradients match eager, and models train."""
import copy
import os
import sys

import pytest
import torch

import ember

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
import partition_bytes  # noqa: E402


@pytest.mark.parametrize("build", [partition_bytes.mlp, partition_bytes.bert], ids=["mlp", "bert"])
def test_min_cut_saves_no_more_than_default_and_grads_match(build):
    default_bytes, _, default_grads = partition_bytes.measure(build, ember.autograd.partition_default)
    cut_bytes, _, cut_grads = partition_bytes.measure(build, ember.autograd.partition_min_cut)
    assert cut_bytes <= default_bytes
    assert cut_bytes < default_bytes  # it does recompute something on these models
    model, inputs, loss_of = build()
    loss_of(model(*inputs)).backward()
    for name, parameter in model.named_parameters():
        if parameter.grad is None:
            continue
        torch.testing.assert_close(cut_grads[name], parameter.grad, rtol=1e-4, atol=1e-4, msg=name)
        torch.testing.assert_close(default_grads[name], parameter.grad, rtol=1e-4, atol=1e-4, msg=name)


def _model(name):
    from transformers import BertConfig, BertForMaskedLM, GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    if name == "bert":
        return BertForMaskedLM(BertConfig(vocab_size=128, hidden_size=32, num_hidden_layers=2,
                                          num_attention_heads=2, intermediate_size=64,
                                          max_position_embeddings=64))
    return GPT2LMHeadModel(GPT2Config(vocab_size=128, n_embd=32, n_layer=2, n_head=2, n_positions=64))


@pytest.mark.parametrize("name", ["bert", "gpt2"])
def test_five_optimizer_steps_match_eager_losses(name):
    model = _model(name).train()  # dropout on: masks must match eager's under the same seed
    reference = copy.deepcopy(model)
    compiled = ember.compile(model, backend="aot_eager")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    reference_optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)
    generator = torch.Generator().manual_seed(1)
    for step in range(5):
        ids = torch.randint(0, 128, (2, 16), generator=generator)
        torch.manual_seed(step)
        loss = compiled(input_ids=ids, labels=ids).loss
        torch.manual_seed(step)
        expected = reference(input_ids=ids, labels=ids).loss
        assert abs(loss.item() - expected.item()) <= 1e-5 * abs(expected.item()), (step, loss, expected)
        loss.backward()
        expected.backward()
        optimizer.step()
        reference_optimizer.step()
        optimizer.zero_grad()
        reference_optimizer.zero_grad()
