// Row-wise activation quantization, so that the rows of a per-tensor quantized graph (the q8,
// int8 and uint8 files) can share a pass.
//
// Those files quantize each MatMul's input at run time with one scale and zero point for the
// whole tensor (onnxruntime's quantize_dynamic: DynamicQuantizeLinear → MatMulInteger → Cast →
// Mul by the two scales). With several rows in a pass, each row's numbers would depend on its
// neighbours', so the engine ran one pass per row: 8 streams were no faster than one.
//
// Here the graph gets a second version of its nodes in which each DynamicQuantizeLinear takes
// one scale and zero point per row, computed exactly as onnxruntime's kernel computes them for a
// tensor (min and max with 0 included, (max − min) / 255, zero point round-half-even(−min /
// scale)), the row quantized with QuantizeLinear along axis 0 (the kernel's own rounding), and
// each MatMulInteger reading it runs without an activation zero point, its exact int32 result then
// corrected by zero point × the weight's column sums (Σₖ(W − w_zp)): int32 arithmetic, so
// the product, its Cast and the scale Mul are bit for bit what the row gets alone.
//
// A pass of one row (every prompt, and a step with one stream) keeps the original nodes, which
// onnxruntime fuses into DynamicQuantizeMatMul: both versions sit in the branches of one If on
// the batch size, reading the same weights (outer-scope initializers). onnxruntime prepacks
// those weights for each branch's kernels, so the weights take about twice their memory (the
// cost of serving rows together at the speed of one; see docs/api.md). A one-row pass through
// the row-wise nodes took 20% longer on the bench model (their ~15 small nodes per
// quantization point), which is why the original nodes are kept for it.
//
// The graph is rewritten in memory at load (with the engine's other additions, see
// ./last-token-outputs.ts); the file is not changed. Whether rows then really are independent is
// checked at load on the model itself (rowsIndependent), and a graph that fails is served as
// before.
import { closeSync, fstatSync, openSync } from "node:fs";
import path from "node:path";
import onnxProto from "onnx-proto";
import type { ModelRunner, PrefillState } from "./layouts/layout";
import { graphAttr, int, int64s, ints, node, type NodeProto } from "./onnx-nodes";
import { readAt, topologicalOrder, type GraphOps, type ScannedNode } from "./onnx-scan";

const { onnx } = onnxProto;
type TensorProto = InstanceType<typeof onnx.TensorProto>;
const DataType = onnx.TensorProto.DataType;

const DQL = ":DynamicQuantizeLinear";
const MATMUL_INTEGER = ":MatMulInteger";
/** QuantizeLinear takes a per-axis scale from opset 13 on. */
const MIN_OPSET = 13;
/** ReduceMin/ReduceMax take their axes as an input (not an attribute) from opset 18 on. */
const AXES_AS_INPUT_OPSET = 18;
/** The smallest positive float32 (see the scale below). */
const SMALLEST_FLOAT32 = 2 ** -149;

export interface RowWisePlan {
  opset: number;
  /** The graph's outputs, in order (the If's outputs). */
  outputs: string[];
  /** Initializers the rewrite reads: the MatMulIntegers' weights and weight zero points. */
  weights: Set<string>;
}

/**
 * Whether `graph` can be given row-wise quantization: every DynamicQuantizeLinear of it feeds
 * MatMulIntegers only (its quantized output as their input A and its zero point as their A zero
 * point), none of its outputs is a graph output, and the graph has no control flow (subgraphs)
 * nor already fused DynamicQuantizeMatMul. Null otherwise, or when it quantizes nothing.
 */
export function rowWisePlan(graph: GraphOps): RowWisePlan | null {
  if (graph.opset < MIN_OPSET) return null;
  if (graph.ops.has("com.microsoft:DynamicQuantizeMatMul")) return null;
  if (graph.nodes.some((n) => [":If", ":Loop", ":Scan"].includes(n.op))) return null;
  const quantizers = graph.nodes.filter((n) => n.op === DQL);
  if (quantizers.length === 0) return null;
  const readers = new Map<string, { node: ScannedNode; input: number }[]>();
  for (const node of graph.nodes)
    node.inputs.forEach((name, input) => {
      if (name) readers.set(name, [...(readers.get(name) ?? []), { node, input }]);
    });
  const outputs = new Set(graph.outputs);
  const weights = new Set<string>();
  for (const q of quantizers) {
    const [xq, xs, xz] = q.outputs;
    if (!xq || !xs || !xz || outputs.has(xq) || outputs.has(xs) || outputs.has(xz)) return null;
    const products = readers.get(xq) ?? [];
    if (products.length === 0) return null;
    for (const { node, input } of products) {
      if (node.op !== MATMUL_INTEGER || input !== 0 || node.inputs[2] !== xz || !node.inputs[1]) return null;
      weights.add(node.inputs[1]);
      if (node.inputs[3]) weights.add(node.inputs[3]);
    }
    if ((readers.get(xz) ?? []).some(({ node, input }) => node.op !== MATMUL_INTEGER || input !== 2)) return null;
  }
  return { opset: graph.opset, outputs: graph.outputs, weights };
}

/** Where an initializer's bytes are: inline, or at an offset of the model file or of an external data file. */
export type TensorBytes = () => Buffer;

/**
 * Collects a graph's nodes and the weights the plan names while the model is streamed
 * (modelWithWeightsByReference), then gives the nodes and initializers that replace the graph's
 * nodes: the If on the batch size with both versions of them.
 */
export class RowWiseGraph {
  private readonly solo: NodeProto[] = [];
  private readonly rows: NodeProto[] = [];
  /** A rewritten quantizer's zero point output → its per-row int32 zero points. */
  private readonly zeroPoints = new Map<string, string>();
  /** Column sums to compute at the end (weights may come after the nodes in the file). */
  private readonly columnSums: { name: string; weight: string; zeroPoint: string }[] = [];
  private readonly tensors = new Map<string, { tensor: TensorProto; bytes: TensorBytes }>();
  private quantizers = 0;

  constructor(private readonly plan: RowWisePlan) {}

  node(node: NodeProto) {
    this.solo.push(node);
    const op = `${node.domain === "ai.onnx" ? "" : (node.domain ?? "")}:${node.opType}`;
    if (op === DQL) this.rows.push(...this.quantizeRows(node));
    else if (op === MATMUL_INTEGER && this.zeroPoints.has(node.input[2]))
      this.rows.push(...this.correctedProduct(node));
    else this.rows.push(node);
  }

  /** An initializer of the graph (its raw data possibly elsewhere: `bytes` reads it). */
  initializer(tensor: TensorProto, bytes: TensorBytes) {
    if (this.plan.weights.has(tensor.name)) this.tensors.set(tensor.name, { tensor, bytes });
  }

  private quantizeRows(q: NodeProto): NodeProto[] {
    const [x] = q.input;
    const [xq, xs, xz] = q.output;
    const p = `lmp_rowq.${this.quantizers++}.`;
    const reduce = (op: string, out: string) =>
      this.plan.opset >= AXES_AS_INPUT_OPSET
        ? node(op, [x, AXES], [out], [int("keepdims", 1)])
        : node(op, [x], [out], [ints("axes", [1, 2]), int("keepdims", 1)]);
    this.zeroPoints.set(xz, `${p}zero_point_i32`);
    // The batch's rows are dimension 0 of [rows, positions, features]: min and max over the rest.
    return [
      reduce("ReduceMin", `${p}min`),
      reduce("ReduceMax", `${p}max`),
      node("Min", [`${p}min`, F0], [`${p}low`]),
      node("Max", [`${p}max`, F0], [`${p}high`]),
      node("Sub", [`${p}high`, `${p}low`], [`${p}range`]),
      node("Div", [`${p}range`, F255], [`${p}step`]),
      // The kernel takes scale 1 for an all-zero tensor, where this gives the smallest float: either
      // way every quantized value and the zero point are 0, and so is the product.
      node("Max", [`${p}step`, TINY], [xs]),
      node("Div", [`${p}low`, xs], [`${p}low_steps`]),
      node("Neg", [`${p}low_steps`], [`${p}zero_point_unrounded`]),
      // In [0, 255] already: low ≤ 0 ≤ high. Round is half to even, as the kernel's.
      node("Round", [`${p}zero_point_unrounded`], [`${p}zero_point_f`]),
      node("Cast", [`${p}zero_point_f`], [`${p}zero_point_u8`], [int("to", DataType.UINT8)]),
      node("Cast", [`${p}zero_point_f`], [`${p}zero_point_i32`], [int("to", DataType.INT32)]),
      node("Reshape", [xs, FLAT], [`${p}row_scales`]),
      node("Reshape", [`${p}zero_point_u8`, FLAT], [`${p}row_zero_points`]),
      node("QuantizeLinear", [x, `${p}row_scales`, `${p}row_zero_points`], [xq], [int("axis", 0)]),
    ];
  }

  private correctedProduct(m: NodeProto): NodeProto[] {
    const [a, w, xz, wz] = m.input;
    const [y] = m.output;
    const p = `lmp_rowq.product.${this.columnSums.length}.`;
    this.columnSums.push({ name: `${p}column_sums`, weight: w, zeroPoint: wz ?? "" });
    return [
      node("MatMulInteger", wz ? [a, w, "", wz] : [a, w], [`${p}uncorrected`]),
      node("Mul", [this.zeroPoints.get(xz)!, `${p}column_sums`], [`${p}correction`]),
      node("Sub", [`${p}uncorrected`, `${p}correction`], [y]),
    ];
  }

  /** The initializers and nodes that take the place of the graph's nodes. */
  finish(): { initializers: TensorProto[]; nodes: NodeProto[] } {
    const initializers = [
      scalar(F0, DataType.FLOAT, 0),
      scalar(F255, DataType.FLOAT, 255),
      scalar(TINY, DataType.FLOAT, SMALLEST_FLOAT32),
      int64s(FLAT, [-1]),
      // Read only where ReduceMin/ReduceMax take their axes as an input.
      ...(this.plan.opset >= AXES_AS_INPUT_OPSET ? [int64s(AXES, [1, 2])] : []),
      scalar(ZERO, DataType.INT64, 0),
      scalar(ONE, DataType.INT64, 1),
      ...this.columnSums.map(({ name, weight, zeroPoint }) => this.columnSumsOf(name, weight, zeroPoint)),
    ];
    // Each branch's outputs are the graph's, renamed where their nodes write them rather than
    // through an Identity (which may copy them, the whole cache, each pass).
    const branch = (prefix: string, nodes: NodeProto[]) => {
      const renamed = new Map(this.plan.outputs.map((o) => [o, `${prefix}/${o}`]));
      const rename = (names: string[]) => names.map((n) => renamed.get(n) ?? n);
      const produced = new Set(nodes.flatMap((n) => n.output));
      return onnx.GraphProto.create({
        name: prefix,
        node: [
          ...topologicalOrder(nodes, (n) => ({ inputs: n.input, outputs: n.output })).map((n) =>
            onnx.NodeProto.create({ ...n, input: rename(n.input), output: rename(n.output) }),
          ),
          ...this.plan.outputs.filter((o) => !produced.has(o)).map((o) => node("Identity", [o], [renamed.get(o)!])),
        ],
        output: this.plan.outputs.map((o) => onnx.ValueInfoProto.create({ name: renamed.get(o) })),
      });
    };
    const nodes = [
      node("Shape", ["input_ids"], ["lmp_rowq.shape"]),
      node("Gather", ["lmp_rowq.shape", ZERO], ["lmp_rowq.rows"], [int("axis", 0)]),
      node("Equal", ["lmp_rowq.rows", ONE], ["lmp_rowq.one_row"]),
      node(
        "If",
        ["lmp_rowq.one_row"],
        this.plan.outputs,
        [
          graphAttr("then_branch", branch("lmp_one_row", this.solo)),
          graphAttr("else_branch", branch("lmp_rows", this.rows)),
        ],
        "lmp_rowq.if",
      ),
    ];
    return { initializers, nodes };
  }

  /** Σₖ (W[k, n] − zero point) as int32 [N], for W [K, N] of int8 or uint8. */
  private columnSumsOf(name: string, weight: string, zeroPoint: string): TensorProto {
    const w = this.tensors.get(weight);
    if (!w) throw new Error(`row-wise quantization: weight ${weight} is not an initializer`);
    const dims = (w.tensor.dims ?? []).map(Number);
    const type = w.tensor.dataType;
    if (dims.length !== 2 || (type !== DataType.INT8 && type !== DataType.UINT8))
      throw new Error(`row-wise quantization: weight ${weight} is not a 2-D int8 or uint8 matrix`);
    const [K, N] = dims;
    const values = integers(w.tensor, w.bytes(), K * N);
    const sums = columnSums(values, K, N);
    if (zeroPoint) {
      const z = this.tensors.get(zeroPoint);
      if (!z || z.tensor.dataType !== type)
        throw new Error(`row-wise quantization: zero point ${zeroPoint} is not readable`);
      const zs = integers(z.tensor, z.bytes(), null);
      if (zs.length !== 1 && zs.length !== N)
        throw new Error(`row-wise quantization: zero point ${zeroPoint} has ${zs.length} values`);
      for (let n = 0; n < N; n++) sums[n] -= K * zs[zs.length === 1 ? 0 : n];
    }
    return onnx.TensorProto.create({
      name,
      dims: [N],
      dataType: DataType.INT32,
      rawData: new Uint8Array(sums.buffer),
    });
  }
}

/**
 * Σₖ values[k·N + n] for each column n of a row-major [K, N] matrix, four rows at a time: half
 * the time of one at a time (0.8 against 1.5 ns per value; fewer loads and stores of the sums).
 */
export function columnSums(values: ArrayLike<number>, K: number, N: number): Int32Array {
  const sums = new Int32Array(N);
  let k = 0;
  for (; k + 4 <= K; k += 4) {
    const [r0, r1, r2, r3] = [k * N, (k + 1) * N, (k + 2) * N, (k + 3) * N];
    for (let n = 0; n < N; n++) sums[n] += values[r0 + n] + values[r1 + n] + values[r2 + n] + values[r3 + n];
  }
  for (; k < K; k++) for (let n = 0, row = k * N; n < N; n++) sums[n] += values[row + n];
  return sums;
}

/** An int8 or uint8 tensor's values (raw data, or int32_data as ONNX allows for small types). */
function integers(t: TensorProto, raw: Buffer, count: number | null): Int8Array | Uint8Array | Int32Array {
  if (raw.length > 0) {
    if (count !== null && raw.length !== count)
      throw new Error(`row-wise quantization: ${t.name} has ${raw.length} bytes, not ${count}`);
    return t.dataType === DataType.INT8
      ? new Int8Array(raw.buffer, raw.byteOffset, raw.length)
      : new Uint8Array(raw.buffer, raw.byteOffset, raw.length);
  }
  const values = Int32Array.from(t.int32Data ?? []);
  if (count !== null && values.length !== count) throw new Error(`row-wise quantization: ${t.name} has no data`);
  return values;
}

/**
 * A reader of an initializer's raw bytes: `inFile` when the caller took them out of the message
 * (a reader of the model file it has open), inline, or in an external data file next to it.
 */
export function tensorBytes(file: string, tensor: TensorProto, inFile: TensorBytes | null): TensorBytes {
  return () => {
    if (inFile) return inFile();
    if (tensor.rawData && tensor.rawData.length > 0) return Buffer.from(tensor.rawData);
    if (tensor.dataLocation === onnx.TensorProto.DataLocation.EXTERNAL) {
      const entry = (key: string) => tensor.externalData?.find((e) => e.key === key)?.value;
      const location = entry("location");
      if (!location) throw new Error(`row-wise quantization: ${tensor.name} has no external data location`);
      const length = Number(entry("length") ?? NaN);
      if (!Number.isFinite(length))
        throw new Error(`row-wise quantization: ${tensor.name} has no external data length`);
      // A model is untrusted input (any hub repo): its external data must be a file of its own
      // folder (never ../../auth-secret), and the bytes asked for must be in that file.
      const dir = path.dirname(file);
      const external = path.resolve(dir, location);
      const inside = path.relative(dir, external);
      if (path.isAbsolute(location) || inside === "" || inside.startsWith("..") || path.isAbsolute(inside))
        throw new Error(
          `row-wise quantization: ${tensor.name}'s external data (${location}) is not in the model's folder`,
        );
      const offset = Number(entry("offset") ?? 0);
      const fd = openSync(external, "r");
      try {
        if (!(offset >= 0 && length >= 0 && offset + length <= fstatSync(fd).size))
          throw new Error(`row-wise quantization: ${tensor.name}'s external data lies past the end of ${location}`);
        return readAt(fd, offset, length);
      } finally {
        closeSync(fd);
      }
    }
    return Buffer.alloc(0);
  };
}

const F0 = "lmp_rowq.zero_f";
const F255 = "lmp_rowq.255_f";
const TINY = "lmp_rowq.smallest_f";
const FLAT = "lmp_rowq.flat";
const AXES = "lmp_rowq.axes";
const ZERO = "lmp_rowq.zero";
const ONE = "lmp_rowq.one";

function scalar(name: string, dataType: number, value: number): TensorProto {
  return dataType === DataType.INT64
    ? onnx.TensorProto.create({ name, dims: [], dataType, int64Data: [value] })
    : onnx.TensorProto.create({ name, dims: [], dataType, floatData: [value] });
}

/**
 * Whether two rows decoded in one pass get, bit for bit, the logits each gets in a pass alone:
 * two 6-token prompts, each decoded one step alone and then both together (equal lengths, so
 * nothing is padded). Run at load on a graph given row-wise quantization, whose claim it checks.
 */
export async function rowsIndependent(runner: ModelRunner, vocabSize: number): Promise<boolean> {
  const prompt = (seed: number) => Array.from({ length: 6 }, (_, i) => (i * 7919 + seed * 104_729 + 13) % vocabSize);
  const prompts = [prompt(1), prompt(2)];
  const next = [(17 * 31) % vocabSize, (29 * 37) % vocabSize];
  const step = async (rows: number[]) => {
    const states: PrefillState[] = [];
    for (const r of rows) states.push((await runner.prefill(null, prompts[r], 0, prompts[r].length)).state);
    const batch = runner.createBatch();
    batch.reshape([], states);
    return (await batch.step(rows.map((r) => next[r]))).map((l) => Float32Array.from(l));
  };
  const alone = [(await step([0]))[0], (await step([1]))[0]];
  const together = await step([0, 1]);
  const same = (a: Float32Array, b: Float32Array) => a.length === b.length && a.every((v, i) => Object.is(v, b[i]));
  return same(together[0], alone[0]) && same(together[1], alone[1]);
}
