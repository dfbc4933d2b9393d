// Lists the operators of an ONNX graph without reading its weights: walks the protobuf wire
// format of ModelProto → graph → node with positioned reads and skips every initializer, so a
// 2 GB single-file export costs a few reads. Nodes (small) are decoded with onnx-proto, and
// their subgraphs (If/Loop bodies) are searched too.
import { closeSync, fstatSync, openSync, readSync } from "node:fs";
import onnxProto from "onnx-proto";

const { onnx } = onnxProto;

export interface GraphOps {
  /** "domain:OpType" ("" domain = ONNX) of every node, subgraphs included. */
  ops: Set<string>;
  /** The main graph's input and output names, in order. */
  inputs: string[];
  outputs: string[];
  /** The element type (onnx.TensorProto.DataType) of each main graph input that declares one. */
  inputTypes: Map<string, number>;
  /** The version of the default ("" / ai.onnx) operator set the model imports (0 when absent). */
  opset: number;
  /** The main graph's nodes, in file order ("domain:OpType", input and output names). */
  nodes: ScannedNode[];
  /** The `bits` of every com.microsoft MatMulNBits node (block-quantized weights), subgraphs included. */
  weightBits: Set<number>;
}

export interface ScannedNode {
  op: string;
  inputs: string[];
  outputs: string[];
  /** The node's `axis` attribute, when it has one (Concat, Gather, Slice…). */
  axis?: number;
  /** The node's `perm` attribute, when it has one (Transpose). */
  perm?: number[];
  /** The node's attributes, when it has some and none is a graph (to copy the node elsewhere). */
  attributes?: InstanceType<typeof onnx.AttributeProto>[];
}

/** `length` bytes of the open file `fd` from `offset`. */
export function readAt(fd: number, offset: number, length: number): Buffer {
  const out = Buffer.alloc(length);
  if (readSync(fd, out, 0, length, offset) !== length) throw new Error("unexpected end of file");
  return out;
}

/**
 * The nodes in an order where each follows the nodes whose outputs it reads, the given order
 * wherever it already is one. Exports do not always list their nodes so (onnxruntime-genai's
 * builder puts a few before their inputs' producers: ../shared/models/tiny-random-llama), which
 * onnxruntime accepts in a main graph, sorting it itself, but refuses in an If's branches
 * (./row-quantization.ts); and a single pass in this order sees every input before its readers
 * (./last-token-outputs.ts). `io` gives a node's input and output names.
 */
export function topologicalOrder<T>(
  nodes: readonly T[],
  io: (node: T) => { inputs: readonly string[]; outputs: readonly string[] },
): T[] {
  const producer = new Map<string, number>();
  nodes.forEach((n, i) => io(n).outputs.forEach((o) => o && producer.set(o, i)));
  const state = new Uint8Array(nodes.length); // 0 not reached, 1 on the path, 2 placed
  const order: T[] = [];
  for (let root = 0; root < nodes.length; root++) {
    if (state[root]) continue;
    // Depth first without recursion (a graph's chains run thousands of nodes deep).
    const path: { node: number; next: number }[] = [{ node: root, next: 0 }];
    state[root] = 1;
    while (path.length) {
      const top = path[path.length - 1];
      const { inputs } = io(nodes[top.node]);
      if (top.next < inputs.length) {
        const from = producer.get(inputs[top.next++]);
        if (from === undefined || state[from] === 2) continue;
        if (state[from] === 1) throw new Error(`the graph has a cycle through ${io(nodes[from]).outputs[0]}`);
        state[from] = 1;
        path.push({ node: from, next: 0 });
      } else {
        state[top.node] = 2;
        order.push(nodes[top.node]);
        path.pop();
      }
    }
  }
  return order;
}

/** Reads a file through a sliding window; `pos` is absolute. */
export class FileReader {
  private buf = Buffer.alloc(1 << 16);
  private start = 0;
  private end = 0;
  pos = 0;
  constructor(private readonly fd: number) {}

  private byte(): number {
    if (this.pos < this.start || this.pos >= this.end) {
      this.start = this.pos;
      this.end = this.start + readSync(this.fd, this.buf, 0, this.buf.length, this.start);
      if (this.end <= this.start) throw new Error("unexpected end of file");
    }
    return this.buf[this.pos++ - this.start];
  }

  varint(): number {
    let result = 0;
    let scale = 1;
    for (;;) {
      const b = this.byte();
      result += (b & 0x7f) * scale; // arithmetic, not bit ops: lengths can pass 2^31
      if (b < 0x80) return result;
      scale *= 128;
    }
  }

  bytes(n: number): Buffer {
    const out = readAt(this.fd, this.pos, n);
    this.pos += n;
    return out;
  }

  /** Skips the value of a field of this wire type. */
  skip(wireType: number) {
    if (wireType === 0) this.varint();
    else if (wireType === 1) this.pos += 8;
    else if (wireType === 2) {
      const n = this.varint(); // read before adding: `pos += varint()` would add to the old pos
      this.pos += n;
    } else if (wireType === 5) this.pos += 4;
    else throw new Error(`unsupported protobuf wire type ${wireType}`);
  }
}

const MODEL_GRAPH = 7;
const MODEL_OPSET_IMPORT = 8;
const GRAPH_NODE = 1;
const GRAPH_INPUT = 11;
const GRAPH_OUTPUT = 12;

export function scanOnnxOps(file: string): GraphOps {
  const fd = openSync(file, "r");
  try {
    const r = new FileReader(fd);
    const size = fstatSync(fd).size;
    const ops = new Set<string>();
    const inputs: string[] = [];
    const outputs: string[] = [];
    const inputTypes = new Map<string, number>();
    const nodes: ScannedNode[] = [];
    const weightBits = new Set<number>();
    let opset = 0;
    while (r.pos < size) {
      const tag = r.varint();
      const field = Math.floor(tag / 8);
      const wire = tag % 8;
      if (field === MODEL_GRAPH && wire === 2) {
        const end = r.varint() + r.pos;
        while (r.pos < end) {
          const t = r.varint();
          const f = Math.floor(t / 8);
          if (t % 8 !== 2 || ![GRAPH_NODE, GRAPH_INPUT, GRAPH_OUTPUT].includes(f)) r.skip(t % 8);
          else if (f === GRAPH_NODE) {
            const node = onnx.NodeProto.decode(r.bytes(r.varint()));
            const axis = node.attribute?.find((a) => a.name === "axis");
            const perm = node.attribute?.find((a) => a.name === "perm");
            nodes.push({
              op: opKey(node),
              inputs: node.input ?? [],
              outputs: node.output ?? [],
              ...(axis ? { axis: Number(axis.i) } : {}),
              ...(perm ? { perm: (perm.ints ?? []).map(Number) } : {}),
              ...(node.attribute?.length && node.attribute.every((a) => !a.g && !a.graphs?.length)
                ? { attributes: node.attribute as InstanceType<typeof onnx.AttributeProto>[] }
                : {}),
            });
            addNode(node, ops, weightBits);
          } else {
            const info = onnx.ValueInfoProto.decode(r.bytes(r.varint()));
            (f === GRAPH_INPUT ? inputs : outputs).push(info.name);
            const type = info.type?.tensorType?.elemType;
            if (f === GRAPH_INPUT && type) inputTypes.set(info.name, type);
          }
        }
      } else if (field === MODEL_OPSET_IMPORT && wire === 2) {
        const set = onnx.OperatorSetIdProto.decode(r.bytes(r.varint()));
        if (!set.domain || set.domain === "ai.onnx") opset = Number(set.version);
      } else r.skip(wire);
    }
    return { ops, inputs, outputs, inputTypes, opset, nodes, weightBits };
  } finally {
    closeSync(fd);
  }
}

type Node = InstanceType<typeof onnx.NodeProto>;
type Graph = InstanceType<typeof onnx.GraphProto>;

const opKey = (node: Node) => `${node.domain === "ai.onnx" ? "" : (node.domain ?? "")}:${node.opType}`;

function addNode(node: Node, ops: Set<string>, weightBits: Set<number>) {
  const key = opKey(node);
  ops.add(key);
  for (const a of node.attribute ?? []) {
    if (key === "com.microsoft:MatMulNBits" && a.name === "bits") weightBits.add(Number(a.i));
    if (a.g) addGraph(a.g as Graph, ops, weightBits);
    for (const g of a.graphs ?? []) addGraph(g as Graph, ops, weightBits);
  }
}

function addGraph(g: Graph, ops: Set<string>, weightBits: Set<number>) {
  for (const n of g.node ?? []) addNode(n as Node, ops, weightBits);
}
