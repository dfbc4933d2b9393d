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
// The padded layout needs only the fed token's column of each present. So the graph gets one
// Slice per present (the last position along the sequence axis) as an extra output, and the
// padded layout fetches those, [rows, heads, 1, head_dim]: the full presents stay inside
// onnxruntime's arena. The slices are appended to the model bytes as a second `graph` field of
// the ModelProto: protobuf merges repeated occurrences of a message field, so the original
// nodes and outputs are untouched and nothing but the small appended message is encoded here.
//
// Such a graph is loaded from memory, not from its file. So that memory holds the graph and not
// the weights, the bytes handed to onnxruntime are the model with each inline weight's data
// replaced by a reference into the model file itself (ONNX external data: location, offset,
// length): onnxruntime reads the weights from the file as it does for a model loaded by path
// (loading the whole 537 MB file into a buffer instead doubled the resident memory the bench
// model added: 866 → 1,872 MiB).
import { closeSync, fstatSync, openSync, readSync } from "node:fs";
import path from "node:path";
import onnxProto from "onnx-proto";
import { FileReader, type GraphOps } from "./onnx-scan";

const { onnx } = onnxProto;

/** The name of the extra output holding `present`'s last position. */
export const lastTokenOutput = (present: string) => `${present}.last_token`;

/** Slice takes starts/ends/axes as inputs from opset 10 on. */
const MIN_OPSET = 10;

/**
 * The present outputs worth slicing: those of a graph the padded layout would serve (it takes
 * position_ids; not GroupQueryAttention, whose cache is shared in place; not per-tensor
 * activation quantization, which runs one row per pass with presents as the next past).
 * Empty when the graph does not qualify.
 */
export function presentsToSlice(graph: GraphOps): string[] {
  if (graph.opset < MIN_OPSET || !graph.inputs.includes("position_ids")) return [];
  if (graph.ops.has("com.microsoft:GroupQueryAttention")) return [];
  if (graph.ops.has(":DynamicQuantizeLinear") || graph.ops.has("com.microsoft:DynamicQuantizeMatMul")) return [];
  const outputs = new Set(graph.outputs);
  return graph.inputs
    .filter((n) => /^past_key_values\.\d+\.(key|value)$/.test(n))
    .map((n) => n.replace("past_key_values", "present"))
    .filter((p) => outputs.has(p) && !outputs.has(lastTokenOutput(p)));
}

/** `model` (a serialized ModelProto) with a `lastTokenOutput(p)` output for each present `p`. */
export function withLastTokenOutputs(model: Buffer, presents: readonly string[]): Buffer {
  const int64 = (name: string, value: number) =>
    onnx.TensorProto.create({ name, dims: [1], dataType: onnx.TensorProto.DataType.INT64, int64Data: [value] });
  const starts = "lmp_last_token_starts";
  const ends = "lmp_last_token_ends";
  const axes = "lmp_last_token_axes";
  const graph = onnx.GraphProto.create({
    initializer: [int64(starts, -1), int64(ends, 2 ** 31 - 1), int64(axes, 2)],
    node: presents.map((p, i) =>
      onnx.NodeProto.create({
        name: `lmp_last_token_${i}`,
        opType: "Slice",
        input: [p, starts, ends, axes],
        output: [lastTokenOutput(p)],
      }),
    ),
    // The element type is left to onnxruntime's inference (a graph output needs a name only).
    output: presents.map((p) => onnx.ValueInfoProto.create({ name: lastTokenOutput(p) })),
  });
  return Buffer.concat([model, field(MODEL_GRAPH, Buffer.from(onnx.GraphProto.encode(graph).finish()))]);
}

const MODEL_GRAPH = 7;
const GRAPH_INITIALIZER = 5;
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
 * Everything else (nodes, subgraphs, initializers already external, other fields) is copied
 * byte for byte.
 */
export function modelWithWeightsByReference(file: string): Buffer {
  const fd = openSync(file, "r");
  try {
    const r = new FileReader(fd);
    const size = fstatSync(fd).size;
    const range = (start: number, end: number) => {
      const b = Buffer.alloc(end - start);
      if (readSync(fd, b, 0, b.length, start) !== b.length) throw new Error("unexpected end of file");
      return b;
    };
    const location = path.basename(file);
    const out: Buffer[] = [];
    while (r.pos < size) {
      const start = r.pos;
      const tag = r.varint();
      if (tag !== ((MODEL_GRAPH << 3) | 2)) {
        r.skip(tag % 8);
        out.push(range(start, r.pos));
        continue;
      }
      const graphEnd = r.varint() + r.pos;
      const graph: Buffer[] = [];
      while (r.pos < graphEnd) {
        const fieldStart = r.pos;
        const t = r.varint();
        if (t !== ((GRAPH_INITIALIZER << 3) | 2)) {
          r.skip(t % 8);
          graph.push(range(fieldStart, r.pos));
          continue;
        }
        const tensorEnd = r.varint() + r.pos;
        const kept: Buffer[] = [];
        let raw: { offset: number; length: number } | undefined;
        while (r.pos < tensorEnd) {
          const at = r.pos;
          const tt = r.varint();
          if (tt === ((TENSOR_RAW_DATA << 3) | 2)) {
            const length = r.varint();
            if (length >= MIN_REFERENCED_BYTES) {
              raw = { offset: r.pos, length };
              r.pos += length;
              continue;
            }
            r.pos += length;
          } else r.skip(tt % 8);
          kept.push(range(at, r.pos));
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
        graph.push(field(GRAPH_INITIALIZER, Buffer.concat(kept)));
      }
      out.push(field(MODEL_GRAPH, Buffer.concat(graph)));
    }
    return Buffer.concat(out);
  } finally {
    closeSync(fd);
  }
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
