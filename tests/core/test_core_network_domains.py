"""A tensor-parallel group wider than one interconnect domain (8 GPUs on an HGX baseboard, 72
in an NVL72 rack) is priced on the network between domains: a TP16 over two 8-GPU nodes runs
its all-reduce at the NIC's rate, not NVLink's."""

from __future__ import annotations

import dataclasses

import pytest
from core_support import A100_1_5TB, IDEAL, catalog_gpu, deployment, estimate
from numpy.testing import assert_allclose

from service.core.architecture import ModelArchitecture

# 16 heads: divisible by TP16. Hidden 2048 in bf16.
SIXTEEN_HEADS = ModelArchitecture(
    hidden_size=2048,
    num_layers=1,
    num_attention_heads=16,
    num_key_value_heads=16,
    head_dim=128,
    intermediate_size=8192,
    vocab_size=1024,
)
NODE = dataclasses.replace(  # 300 GB/s links in 8-GPU domains, 25 GB/s per GPU between them
    A100_1_5TB, interconnect_domain_gpus=8, scale_out_bandwidth_bytes_per_s=25e9
)


def all_reduce_network_s(gpu_tensor: int, domain: int = 8) -> float:
    gpu = dataclasses.replace(NODE, interconnect_domain_gpus=domain)
    result = estimate(SIXTEEN_HEADS, 1, 4, 1, deployment(gpu, tensor=gpu_tensor), IDEAL)
    table = result.prefill.table
    i = [node.name for node in table.nodes].index("mlp_all_reduce")
    return float(table.network_s[i])


def test_tp8_inside_one_domain_runs_at_link_speed() -> None:
    # 4 tokens x 2048 x 2 B = 16,384 B per GPU; ring: 2 x 7/8 x 16,384 = 28,672 B on the links
    assert_allclose(all_reduce_network_s(8), 28_672 / 300e9, rtol=1e-9)


def test_tp16_over_two_domains_runs_at_network_speed() -> None:
    # 2 x 15/16 x 16,384 = 30,720 B per GPU, through the 25 GB/s hop between the two nodes:
    # 1.2288 us, where NVLink speed would have given 0.1024 us
    assert_allclose(all_reduce_network_s(16), 30_720 / 25e9, rtol=1e-9)
    assert all_reduce_network_s(16) == pytest.approx(12 * 30_720 / 300e9)


def test_tp16_inside_one_wide_domain_stays_on_links() -> None:
    # the same group inside one 72-GPU domain (NVL72) never touches the network
    assert_allclose(all_reduce_network_s(16, domain=72), 30_720 / 300e9, rtol=1e-9)


def test_catalogue_domains_price_hgx_and_nvl72_apart() -> None:
    b200, gb200 = catalog_gpu("B200"), catalog_gpu("GB200")
    # both 900 GB/s NVLink 5 per direction; B200's domain is its 8-GPU baseboard, GB200's the rack
    assert b200.collective_bandwidth_bytes_per_s(8) == gb200.collective_bandwidth_bytes_per_s(16)
    assert b200.collective_bandwidth_bytes_per_s(16) == pytest.approx(50e9)  # 400 Gb/s NIC
    assert gb200.collective_bandwidth_bytes_per_s(72) == pytest.approx(900e9)


def pipeline_send_network_s(tensor: int, pipeline: int) -> float:
    dep = deployment(NODE, tensor=tensor, pipeline=pipeline)
    table = estimate(SIXTEEN_HEADS_TWO_LAYERS, 1, 4, 1, dep, IDEAL).prefill.table
    i = [node.name for node in table.nodes].index("pipeline_send")
    return float(table.network_s[i])


SIXTEEN_HEADS_TWO_LAYERS = dataclasses.replace(SIXTEEN_HEADS, num_layers=2)


def test_pipeline_hand_off_between_two_nodes_runs_at_network_speed() -> None:
    # TP8 x PP2 on two 8-GPU nodes: each rank sends its 4 x 2048 / 8 x 2 B = 2,048 B share of
    # the activations to the next node, once per pass: 2,048 / 25e9
    assert_allclose(pipeline_send_network_s(8, 2), 2_048 / 25e9, rtol=1e-9)
    # TP4 x PP2 inside one node: the hand-off stays on the 300 GB/s links (4,096 B per rank)
    assert_allclose(pipeline_send_network_s(4, 2), 4_096 / 300e9, rtol=1e-9)


def test_hops_inside_and_between_domains_add_their_times() -> None:
    # TP4 x PP4 over two 8-GPU nodes: hops 0->1 and 2->3 stay inside a node, 1->2 crosses:
    # the three hops' times add, 2 / 300e9 + 1 / 25e9 seconds per byte
    rate = NODE.pipeline_hop_bandwidth_bytes_per_s(4, 4)
    assert_allclose(3 / rate, 2 / 300e9 + 1 / 25e9, rtol=1e-12)
