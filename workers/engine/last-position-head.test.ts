// Which graphs get their language-model head sliced to the last position (model/last-token-outputs.ts):
// the head is found through position-wise ops only, and anything else leaves the graph unchanged.
import { describe, expect, it } from "vitest";
import { lastPositionHead } from "./model/last-token-outputs";
import type { GraphOps, ScannedNode } from "./model/onnx-scan";

const node = (op: string, inputs: string[], outputs: string[]): ScannedNode => ({ op, inputs, outputs });

/** A decoder's tail: final norm → [nodes] → logits, with input_ids feeding the norm. */
function graph(tail: ScannedNode[], extra: Partial<GraphOps> = {}): GraphOps {
  const nodes = [
    node(":Gather", ["embed", "input_ids"], ["h0"]),
    node(":SimplifiedLayerNormalization", ["h0", "w"], ["hidden"]),
    ...tail,
  ];
  return {
    ops: new Set(nodes.map((n) => n.op)),
    inputs: ["input_ids", "attention_mask", "position_ids"],
    outputs: ["logits"],
    opset: 17,
    nodes,
    ...extra,
  };
}

describe("lastPositionHead", () => {
  it("finds a MatMul head, also behind casts, a bias and a softcap", () => {
    expect(lastPositionHead(graph([node(":MatMul", ["hidden", "lm_w"], ["logits"])]))).toEqual({
      node: "logits",
      source: "hidden",
    });
    const tail = [
      node(":Transpose", ["embed"], ["embed_t"]), // tied weights: static, not an activation
      node(":MatMul", ["hidden", "embed_t"], ["l0"]),
      node(":Add", ["l0", "bias"], ["l1"]),
      node(":Div", ["l1", "cap"], ["l2"]),
      node(":Tanh", ["l2"], ["l3"]),
      node(":Mul", ["l3", "cap"], ["l4"]),
      node(":Cast", ["l4"], ["logits"]),
    ];
    expect(lastPositionHead(graph(tail))).toEqual({ node: "l0", source: "hidden" });
    expect(lastPositionHead(graph([node("com.microsoft:MatMulNBits", ["hidden", "q", "scales"], ["logits"])]))).toEqual(
      { node: "logits", source: "hidden" },
    );
  });

  it("leaves the graph alone when the way to logits is not position-wise or not the head's alone", () => {
    const none = [
      // a Reshape between the head and logits (a flattened [B*S, H] head)
      [node(":MatMul", ["hidden", "lm_w"], ["l0"]), node(":Reshape", ["l0", "shape"], ["logits"])],
      // a product of two activations
      [node(":Relu", ["hidden"], ["hidden2"]), node(":MatMul", ["hidden", "hidden2"], ["logits"])],
      // another node reads the head's output
      [
        node(":MatMul", ["hidden", "lm_w"], ["l0"]),
        node(":Cast", ["l0"], ["logits"]),
        node(":ReduceMax", ["l0"], ["other"]),
      ],
      // weights fed as the first input
      [node(":MatMul", ["lm_w", "hidden"], ["logits"])],
      // per-tensor quantized head
      [
        node(":DynamicQuantizeLinear", ["hidden"], ["hq", "hs", "hz"]),
        node(":MatMulInteger", ["hq", "wq", "hz", "wz"], ["l0"]),
        node(":Cast", ["l0"], ["l1"]),
        node(":Mul", ["l1", "hs"], ["logits"]),
      ],
    ];
    for (const tail of none) expect(lastPositionHead(graph(tail)), tail.map((n) => n.op).join(" ")).toBeNull();
    const head = [node(":MatMul", ["hidden", "lm_w"], ["logits"])];
    expect(lastPositionHead(graph(head, { inputs: ["input_ids", "attention_mask", "num_logits_to_keep"] }))).toBeNull();
    expect(lastPositionHead(graph(head, { opset: 9 }))).toBeNull();
  });
});
