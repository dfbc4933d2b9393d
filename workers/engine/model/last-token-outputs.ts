// The new token's keys and values as outputs of their own, so a decoding step need not fetch the
// whole cache.
//
// A standard export's `present.N.key/value` output is the whole cache, past and new token alike
// ([rows, heads, past + 1, head_dim]). onnxruntime writes it into the buffers the engine hands
// run(), but onnxruntime-node then copies every fetched output, pre-allocated or not, into a new
// JavaScript ArrayBuffer (1.30: inference_session_wrap.cc converts all outputs after Run). For
// the 134M bench model in fp32 with 8 rows of 150 tokens that is 89 MB allocated and copied per
// step, and the garbage collector runs a mark-compact every few steps to release it.
//
// The layouts need only the fed token's column of each present. So the graph gets one Slice per
// present (the last S positions along the sequence axis, S = the positions fed: 1 when decoding)
// as an extra output, and the layouts fetch those, [rows, heads, 1, head_dim]: the full presents
// stay inside onnxruntime's arena. A prompt's chunks fetch theirs the same way ([1, heads, S,
// head_dim], see GraphIo.prefill). In a GroupQueryAttention graph each row's new column is at its
// own length (seqlens_k), so there a GatherElements of the S columns ending at seqlens_k takes the
// Slice's place. The new nodes are appended to the model bytes as a second `graph` field of the
// ModelProto: protobuf merges repeated occurrences of a message field, so the original nodes and
// outputs are untouched and nothing but the small appended message is encoded here. They only read the presents, so the graph's own numbers do
// not change (per-tensor quantized graphs included).
//
// The same goes for the logits of a prompt: a standard export computes them for every position
// ([1, S, vocab]), where only the last one is ever used (the engine has no prompt logprobs). The
// language-model head's input is sliced to the last position instead (lastPositionHead), so the
// head runs on one position and the output is [rows, 1, vocab]: on the 134M bench model the head
// is 18% of the weights, and a 512-token prompt's logits were 65 MB copied into a new buffer (at
// a vocabulary of 152k, 78 MB per 128-token chunk). Graphs that take num_logits_to_keep are fed 1
// instead. A per-tensor quantized head (DynamicQuantizeLinear → MatMulInteger → Cast → Mul) is
// sliced after its quantizer, at the MatMulInteger's input: the scale and zero point still come
// from every position, as in the file, and each position's product is its own row of integer
// arithmetic, so the last position's logits are bit for bit the file's (slicing the quantizer's
// input would change its scale).
//
// Such a graph is loaded from memory, not from its file. So that memory holds the graph and not
// the weights, the bytes handed to onnxruntime are the model with each inline weight's data
// replaced by a reference into the model file itself (ONNX external data: location, offset,
// length): onnxruntime reads the weights from the file as it does for a model loaded by path
// (loading the whole 537 MB file into a buffer instead doubled the resident memory the bench
// model added: 866 → 1,872 MiB).
import { closeSync, fstatSync, openSync } from "node:fs";
import path from "node:path";
import onnxProto from "onnx-proto";
import { isPastInput, lastTokenOutput, presentOf, usesGroupQueryAttention } from "./graph-signature";
import { FileReader, readAt, topologicalOrder, type GraphOps, type ScannedNode } from "./onnx-scan";
import { RowWiseGraph, tensorBytes, type RowWisePlan } from "./row-quantization";
import { SplitAttentionGraph, type SplitAttentionPlan } from "./split-attention";

const { onnx } = onnxProto;

/** Slice takes starts/ends/axes as inputs from opset 10 on. */
const MIN_OPSET = 10;
/** GatherElements (GroupQueryAttention graphs' per-row column) exists from opset 11 on. */
const MIN_GATHER_OPSET = 11;
const GQA_OP = "com.microsoft:GroupQueryAttention";
/** GroupQueryAttention's inputs: query, key, value, past_key, past_value, seqlens_k, … */
const GQA_SEQLENS_K = 5;

/**
 * The present outputs to take the new column of: every graph's, where the column can be found
 * (a GroupQueryAttention graph's needs its seqlens_k, see newColumnAt). Empty when the graph does
 * not qualify.
 */
export function presentsToSlice(graph: GraphOps): string[] {
  if (graph.opset < MIN_OPSET) return [];
  if (usesGroupQueryAttention(graph) && (graph.opset < MIN_GATHER_OPSET || !newColumnAt(graph))) return [];
  const outputs = new Set(graph.outputs);
  return graph.inputs
    .filter(isPastInput)
    .map(presentOf)
    .filter((p) => outputs.has(p) && !outputs.has(lastTokenOutput(p)));
}

/**
 * Where a GroupQueryAttention graph writes each row's new column: its seqlens_k tensor (int32
 * [rows], the row's past length), shared by every GroupQueryAttention node. Null for other
 * graphs (their new column is the last one) and for graphs whose nodes take different ones.
 */
export function newColumnAt(graph: GraphOps): string | null {
  const sources = new Set(graph.nodes.filter((n) => n.op === GQA_OP).map((n) => n.inputs[GQA_SEQLENS_K]));
  const [only] = sources;
  return sources.size === 1 && only ? only : null;
}

/** The language-model head's node (by its first output), and the tensor it reads at input 0. */
export interface HeadInput {
  node: string;
  source: string;
}

/** The sliced head input's name (see LAST_POSITION below). */
const LAST_POSITION = "lmp_last_position";
/** Slice's inputs: from the last position (-1) to the end along axis 1 (initializers of withLastTokenOutputs). */
const LAST_STARTS = "lmp_last_token_starts";
const TO_END = "lmp_last_token_ends";
const SEQUENCE_AXIS = "lmp_last_position_axes";

/** The head's input sliced to the last position, placed just before the head. */
const lastPositionSlice = (head: HeadInput) =>
  onnx.NodeProto.create({
    name: LAST_POSITION,
    opType: "Slice",
    input: [head.source, LAST_STARTS, TO_END, SEQUENCE_AXIS],
    output: [LAST_POSITION],
  });

/** Matrix products whose input 0 is the activation and whose other inputs are weights. */
const HEAD_OPS = new Set([":MatMul", "com.microsoft:MatMulNBits", ":MatMulInteger"]);
const DQL = ":DynamicQuantizeLinear";
/** Ops between the head and `logits` that act on each position alone (casts, bias, scale, softcap). */
const POSITIONWISE = new Set([":Cast", ":Add", ":Sub", ":Mul", ":Div", ":Tanh", ":Identity"]);

/**
 * The input of the head that computes `logits`, when its output reaches `logits` through
 * position-wise ops only, with one dynamic operand each (the others weights or constants), and
 * nothing else reads that chain. A per-tensor quantized head's input is its MatMulInteger's
 * quantized one; its quantizer's scale and zero point (one for the whole tensor) do not count as
 * operands. Null when the graph is not so (a Reshape in the way, num_logits_to_keep already
 * there): it is then served unchanged.
 */
export function lastPositionHead(graph: GraphOps): HeadInput | null {
  if (graph.opset < MIN_OPSET || graph.inputs.includes("num_logits_to_keep")) return null;
  if (!graph.outputs.includes("logits")) return null;
  const producer = new Map<string, (typeof graph.nodes)[number]>();
  // Readers of each tensor: nodes, and the graph's outputs (logits is read by its output alone).
  const readers = new Map<string, number>(graph.outputs.map((o) => [o, 1]));
  for (const n of graph.nodes) {
    for (const o of n.outputs) producer.set(o, n);
    for (const i of n.inputs) readers.set(i, (readers.get(i) ?? 0) + 1);
  }
  // ONNX requires nodes in topological order, but exports do not always list them so: one pass
  // in that order sees each tensor's producer before its readers.
  let ordered: ScannedNode[];
  try {
    ordered = topologicalOrder(graph.nodes, (n) => n);
  } catch {
    return null; // a cycle: onnxruntime refuses the graph anyway
  }
  // Tensors that depend on a graph input; of them, whole-tensor quantization parameters:
  // DynamicQuantizeLinear's scales and zero points, and scales multiplied by constants (the
  // weight's scale).
  const dynamic = new Set(graph.inputs);
  const params = new Set<string>();
  for (const n of ordered) {
    const live = n.inputs.filter((i) => i && dynamic.has(i));
    if (live.length === 0) continue;
    for (const o of n.outputs) dynamic.add(o);
    if (n.op === DQL) for (const o of n.outputs.slice(1)) params.add(o);
    if (n.op === ":Mul" && live.every((i) => params.has(i))) params.add(n.outputs[0]);
  }
  let tensor = "logits";
  for (let hops = 0; hops < 8; hops++) {
    const n = producer.get(tensor);
    if (!n || n.outputs[0] !== tensor || readers.get(tensor) !== 1) return null;
    const live = n.inputs.filter((i) => i && dynamic.has(i) && !params.has(i));
    if (live.length !== 1) return null;
    if (HEAD_OPS.has(n.op)) return n.inputs[0] === live[0] ? { node: n.outputs[0], source: live[0] } : null;
    if (!POSITIONWISE.has(n.op)) return null;
    tensor = live[0];
  }
  return null;
}

/**
 * The presents that a Concat(past, new columns) along the sequence axis makes, as standard
 * exports write them, each with that Concat's second input: the new columns themselves, computed
 * by the graph anyway. The served graph gives that tensor the last-token output's name (see
 * servedModel) instead of slicing the columns back out of the present: no node added (a Slice
 * per present, 24 small nodes on a 12-layer model, each a step of onnxruntime's executor per pass).
 */
export function concatenatedColumns(graph: GraphOps, presents: readonly string[]): Map<string, string> {
  const wanted = new Set(presents);
  const boundary = new Set([...graph.inputs, ...graph.outputs]);
  const produced = new Set(graph.nodes.flatMap((n) => n.outputs));
  const found = new Map<string, string>();
  const taken = new Set<string>();
  for (const n of graph.nodes) {
    const [present] = n.outputs;
    if (n.op !== ":Concat" || !wanted.has(present) || n.inputs.length !== 2 || (n.axis !== 2 && n.axis !== -2))
      continue;
    const [past, columns] = n.inputs;
    if (!isPastInput(past) || presentOf(past) !== present) continue;
    if (!columns || boundary.has(columns) || !produced.has(columns) || taken.has(columns)) continue;
    found.set(present, columns);
    taken.add(columns);
  }
  return found;
}

/**
 * The model bytes onnxruntime loads for `file`: its weights referenced into the file, a
 * `lastTokenOutput(p)` output for each present `p` (the last position, or with `columnAt` each
 * row's column at that tensor's index), and `head`'s input sliced to the last position (the
 * node rewritten here, the Slice appended by withLastTokenOutputs). A present in `concatenated`
 * (concatenatedColumns) has its Concat's new-columns tensor renamed to its last-token output
 * instead of a Slice; not with `rowWise` (that tensor is then inside the If's branches). With
 * `split`, each layer's attention products can skip the cache's Concat (./split-attention.ts).
 */
export function servedModel(
  file: string,
  presents: readonly string[],
  head: HeadInput | null,
  columnAt: string | null = null,
  rowWise: RowWisePlan | null = null,
  concatenated: ReadonlyMap<string, string> = new Map(),
  split: SplitAttentionPlan | null = null,
): Buffer {
  const direct = rowWise || columnAt ? [] : presents.filter((p) => concatenated.has(p));
  const renames = new Map(direct.map((p) => [concatenated.get(p)!, lastTokenOutput(p)]));
  const sliced = presents.filter((p) => !direct.includes(p));
  return withLastTokenOutputs(
    modelWithWeightsByReference(file, head, rowWise, renames, split),
    presents,
    sliced,
    head,
    columnAt,
  );
}

/** `model` (a serialized ModelProto) with the outputs and the nodes that servedModel describes. */
function withLastTokenOutputs(
  model: Buffer,
  presents: readonly string[],
  sliced: readonly string[],
  head: HeadInput | null,
  columnAt: string | null,
): Buffer {
  const int64 = (name: string, values: number[]) =>
    onnx.TensorProto.create({
      name,
      dims: [values.length],
      dataType: onnx.TensorProto.DataType.INT64,
      int64Data: values,
    });
  const int64Scalar = (name: string, value: number) =>
    onnx.TensorProto.create({ name, dims: [], dataType: onnx.TensorProto.DataType.INT64, int64Data: [value] });
  const node = (
    name: string,
    opType: string,
    input: string[],
    output: string[],
    attribute: ReturnType<typeof onnx.AttributeProto.create>[] = [],
  ) => onnx.NodeProto.create({ name, opType, input, output, attribute });
  const int = (name: string, i: number) =>
    onnx.AttributeProto.create({ name, type: onnx.AttributeProto.AttributeType.INT, i });
  const axes = "lmp_last_token_axes";
  // Only what the Slices read (the head's is placed by modelWithWeightsByReference): onnxruntime
  // warns of every initializer no node reads.
  const slicesPresents = sliced.length > 0 && !columnAt;
  const initializer = [
    ...(head || slicesPresents ? [int64(TO_END, [2 ** 31 - 1])] : []),
    ...(slicesPresents ? [int64(axes, [2])] : []),
    ...(head ? [int64(LAST_STARTS, [-1]), int64(SEQUENCE_AXIS, [1])] : []),
  ];
  const nodes: ReturnType<typeof onnx.NodeProto.create>[] = [];
  // S, the positions fed: input_ids' second dimension.
  if (sliced.length > 0) nodes.push(node("lmp_fed_shape", "Shape", ["input_ids"], ["lmp_fed_shape"]));
  if (columnAt && sliced.length > 0) {
    // The S positions fed end at each row's column columnAt[r] (the op's seqlens_k: one column
    // when decoding, a prompt chunk's S columns when prefilling one row). index[r, h, s, d] =
    // columnAt[r] + 1 - S + s: the [rows, 1, 1, 1] column plus Range(1 - S, 1) as [1, 1, S, 1],
    // Expanded to the present's heads and head_dim (its shape times [0, 1, 0, 1], plus
    // [1, 0, 1, 0]), then one GatherElements along the sequence axis per present.
    initializer.push(
      int64("lmp_column_rows", [-1, 1, 1, 1]),
      int64("lmp_column_keep", [0, 1, 0, 1]),
      int64("lmp_column_ones", [1, 0, 1, 0]),
      int64("lmp_column_steps", [1, 1, -1, 1]),
      int64Scalar("lmp_column_one", 1),
    );
    nodes.push(
      node("lmp_column_cast", "Cast", [columnAt], ["lmp_column_at"], [int("to", onnx.TensorProto.DataType.INT64)]),
      node("lmp_column_reshape", "Reshape", ["lmp_column_at", "lmp_column_rows"], ["lmp_column_per_row"]),
      node("lmp_fed_scalar", "Gather", ["lmp_fed_shape", "lmp_column_one"], ["lmp_fed_scalar"], [int("axis", 0)]),
      node("lmp_column_first", "Sub", ["lmp_column_one", "lmp_fed_scalar"], ["lmp_column_first"]),
      node("lmp_column_range", "Range", ["lmp_column_first", "lmp_column_one", "lmp_column_one"], ["lmp_column_range"]),
      node("lmp_column_offsets", "Reshape", ["lmp_column_range", "lmp_column_steps"], ["lmp_column_offsets"]),
      node("lmp_column_fed", "Add", ["lmp_column_per_row", "lmp_column_offsets"], ["lmp_column_fed"]),
      node("lmp_column_shape", "Shape", [sliced[0]], ["lmp_present_shape"]),
      node("lmp_column_mul", "Mul", ["lmp_present_shape", "lmp_column_keep"], ["lmp_column_kept"]),
      node("lmp_column_add", "Add", ["lmp_column_kept", "lmp_column_ones"], ["lmp_column_dims"]),
      node("lmp_column_expand", "Expand", ["lmp_column_fed", "lmp_column_dims"], ["lmp_column_index"]),
      ...sliced.map((p, i) =>
        node(`lmp_last_token_${i}`, "GatherElements", [p, "lmp_column_index"], [lastTokenOutput(p)], [int("axis", 2)]),
      ),
    );
  } else if (slicesPresents) {
    // The fed positions' columns: the last S of each present, S = input_ids' sequence length (1
    // when decoding; a prompt chunk's length when prefilling, see GraphIo.prefill).
    initializer.push(int64("lmp_fed_from", [1]), int64("lmp_fed_to", [2]));
    nodes.push(
      node("lmp_fed_count", "Slice", ["lmp_fed_shape", "lmp_fed_from", "lmp_fed_to"], ["lmp_fed_count"]),
      node("lmp_fed_starts", "Neg", ["lmp_fed_count"], ["lmp_fed_starts"]),
      ...sliced.map((p, i) =>
        node(`lmp_last_token_${i}`, "Slice", [p, "lmp_fed_starts", TO_END, axes], [lastTokenOutput(p)]),
      ),
    );
  }
  const graph = onnx.GraphProto.create({
    initializer,
    node: nodes,
    // The element type is left to onnxruntime's inference (a graph output needs a name only).
    output: presents.map((p) => onnx.ValueInfoProto.create({ name: lastTokenOutput(p) })),
  });
  return Buffer.concat([model, field(MODEL_GRAPH, Buffer.from(onnx.GraphProto.encode(graph).finish()))]);
}

const MODEL_GRAPH = 7;
const GRAPH_NODE = 1;
const GRAPH_INITIALIZER = 5;
const GRAPH_INPUT = 11;
const GRAPH_VALUE_INFO = 13;
const TENSOR_RAW_DATA = 9;
const TENSOR_EXTERNAL_DATA = 13;
const TENSOR_DATA_LOCATION = 14;
const EXTERNAL = 1;
/** Raw data shorter than this stays inline (shape constants and the like). */
const MIN_REFERENCED_BYTES = 4096;

/**
 * `file`'s ModelProto with the raw data of every initializer of its main graph (of at least
 * MIN_REFERENCED_BYTES) turned into an external-data reference to `file` at that data's offset.
 * Load the result with `session.model_external_initializers_file_folder_path` = `file`'s folder.
 * With `head`, that node reads LAST_POSITION at input 0, the Slice placed before it.
 * With `rowWise`, the graph's nodes are replaced by the If of ./row-quantization.ts (its
 * value_info, shape hints for tensors now inside the branches, is left out); the head and its
 * Slice are then in both branches.
 * With `split`, the attention products it plans become Ifs (./split-attention.ts).
 * Everything else (other nodes, subgraphs, initializers already external, other fields) is
 * copied byte for byte.
 */
export function modelWithWeightsByReference(
  file: string,
  head?: HeadInput | null,
  rowWise?: RowWisePlan | null,
  renames: ReadonlyMap<string, string> = new Map(),
  split: SplitAttentionPlan | null = null,
): Buffer {
  if (rowWise && renames.size > 0) throw new Error("tensors are not renamed inside row-wise quantization's branches");
  const rows = rowWise ? new RowWiseGraph(rowWise) : null;
  const splitter = split ? new SplitAttentionGraph(split, renames) : null;
  const fd = openSync(file, "r");
  try {
    const r = new FileReader(fd);
    const range = (start: number, end: number) => readAt(fd, start, end - start);
    const location = path.basename(file);
    const initializer = (_start: number, end: number) => {
      let raw: { offset: number; length: number } | undefined;
      const kept = rewriteFields(r, end, range, {
        [TENSOR_RAW_DATA]: (start, valueEnd) => {
          if (valueEnd - r.pos < MIN_REFERENCED_BYTES) return range(start, valueEnd);
          raw = { offset: r.pos, length: valueEnd - r.pos };
          return Buffer.alloc(0);
        },
      });
      if (rows) {
        const tensor = onnx.TensorProto.decode(Buffer.concat(kept));
        // Read, if the rewrite needs it, while the file is still open (rows.finish, below).
        const at = raw;
        rows.initializer(tensor, tensorBytes(file, tensor, at ? () => range(at.offset, at.offset + at.length) : null));
      }
      if (raw) {
        kept.push(Buffer.from([(TENSOR_DATA_LOCATION << 3) | 0, EXTERNAL]));
        for (const [key, value] of [
          ["location", location],
          ["offset", String(raw.offset)],
          ["length", String(raw.length)],
        ])
          kept.push(
            field(TENSOR_EXTERNAL_DATA, Buffer.concat([field(1, Buffer.from(key)), field(2, Buffer.from(value))])),
          );
      }
      return field(GRAPH_INITIALIZER, Buffer.concat(kept));
    };
    // The head's node reads the sliced input (the Slice goes just before it).
    const withSlicedHead = (n: InstanceType<typeof onnx.NodeProto>) => {
      if (!head || n.output?.[0] !== head.node || n.input[0] !== head.source) return [n];
      n.input[0] = LAST_POSITION;
      return [lastPositionSlice(head), n];
    };
    const encoded = (nodes: InstanceType<typeof onnx.NodeProto>[]) =>
      Buffer.concat(nodes.map((n) => field(GRAPH_NODE, Buffer.from(onnx.NodeProto.encode(n).finish()))));
    // Tensors renamed where nodes write and read them (their value_info, a shape hint, is dropped).
    const renamed = (names: string[]) => names.map((x) => renames.get(x) ?? x);
    const inGraph: Record<number, (start: number, end: number) => Buffer> = { [GRAPH_INITIALIZER]: initializer };
    // Every other node is copied byte for byte.
    if (head || renames.size > 0 || splitter) {
      inGraph[GRAPH_NODE] = (start, end) => {
        const n = onnx.NodeProto.decode(range(r.pos, end));
        const touched = [...n.input, ...n.output].some((x) => renames.has(x));
        if (touched) [n.input, n.output] = [renamed(n.input), renamed(n.output)];
        const nodes = withSlicedHead(n).flatMap((m) => (splitter ? splitter.replace(m) : [m]));
        return nodes.length === 1 && nodes[0] === n && !touched ? range(start, end) : encoded(nodes);
      };
      if (renames.size > 0 || splitter)
        inGraph[GRAPH_VALUE_INFO] = (start, end) => {
          const { name } = onnx.ValueInfoProto.decode(range(r.pos, end));
          return renames.has(name) || splitter?.gone(name) ? Buffer.alloc(0) : range(start, end);
        };
    }
    if (rows) {
      inGraph[GRAPH_NODE] = (_start, end) => {
        for (const n of withSlicedHead(onnx.NodeProto.decode(range(r.pos, end))))
          for (const m of splitter ? splitter.replace(n) : [n]) rows.node(m);
        return Buffer.alloc(0);
      };
      inGraph[GRAPH_VALUE_INFO] = () => Buffer.alloc(0);
    }
    const graph = (_start: number, end: number) => {
      const fields = rewriteFields(r, end, range, inGraph);
      if (rows) {
        const { initializers, nodes } = rows.finish();
        for (const t of initializers)
          fields.push(field(GRAPH_INITIALIZER, Buffer.from(onnx.TensorProto.encode(t).finish())));
        fields.push(encoded(nodes));
      }
      if (splitter) {
        for (const t of splitter.initializers())
          fields.push(field(GRAPH_INITIALIZER, Buffer.from(onnx.TensorProto.encode(t).finish())));
        fields.push(field(GRAPH_INPUT, Buffer.from(onnx.ValueInfoProto.encode(splitter.input()).finish())));
      }
      return field(MODEL_GRAPH, Buffer.concat(fields));
    };
    return Buffer.concat(rewriteFields(r, fstatSync(fd).size, range, { [MODEL_GRAPH]: graph }));
  } finally {
    closeSync(fd);
  }
}

/**
 * The fields of the message from `r.pos` to `end`, each copied byte for byte, except the
 * length-delimited fields numbered in `rewrite`: those are replaced by what their function returns
 * (given the field's start and its value's end, with `r` at the value's start); `r` ends at `end`.
 */
function rewriteFields(
  r: FileReader,
  end: number,
  range: (start: number, end: number) => Buffer,
  rewrite: Record<number, (start: number, valueEnd: number) => Buffer>,
): Buffer[] {
  const out: Buffer[] = [];
  while (r.pos < end) {
    const start = r.pos;
    const tag = r.varint();
    const replace = tag % 8 === 2 ? rewrite[Math.floor(tag / 8)] : undefined;
    if (replace) {
      const valueEnd = r.varint() + r.pos;
      out.push(replace(start, valueEnd));
      r.pos = valueEnd;
    } else {
      r.skip(tag % 8);
      out.push(range(start, r.pos));
    }
  }
  return out;
}

/** A length-delimited protobuf field. */
function field(number: number, body: Buffer): Buffer {
  return Buffer.concat([Buffer.from([...varint((number << 3) | 2), ...varint(body.length)]), body]);
}

function varint(n: number): number[] {
  const out: number[] = [];
  while (n >= 0x80) {
    out.push((n % 0x80) | 0x80);
    n = Math.floor(n / 0x80);
  }
  out.push(n);
  return out;
}
