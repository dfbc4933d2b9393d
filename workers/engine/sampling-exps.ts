// Vocabulary-wide exponentials for sampling, computed by onnxruntime instead of JavaScript.
//
// Drawing a token at a temperature needs exp(logit / T − max) for every entry of the vocabulary:
// in JavaScript that pass is one scalar exp per entry (sampler.ts' expBelow, about 5 ns each),
// 0.4 ms a token at 32,000 entries and 1.3–1.6 ms at the 128k–152k of llama 3 and qwen 2.5: with
// 8 rows a decoding step spent 4–5 ms of its ~30 ms drawing tokens (134M bench model, q4).
// onnxruntime's Exp is vectorized (MLAS), and one run serves every row of a step. A tiny graph of
// its own does it, run on the step's logits:
//   scaled = logits / temperature            [rows, vocab] / [rows, 1]
//   max    = ReduceMax(scaled, last axis)    [rows, 1]
//   exps   = Exp(scaled − max)               [rows, vocab], each in (0, 1], 1 at the max
// The exps are float32: each is as accurate as its logit allows (a float32 logit of magnitude 10
// already carries a relative error of 1e-6 into its probability). The sampler sums them in
// float64 and draws (sampler.ts, drawFromExps). Rows are computed independently, so a row's exps
// do not depend on the rows beside it.
// A second, ranked, graph adds what top_k and top_p need, for rows that bias and the repetition
// penalty leave alone (sampler.ts, ranksFromExps):
//   total  = ReduceSum(Cast(exps, double))   [rows, 1]   the sum the draw needs, in float64
//   top    = TopK(exps, 64)                  [rows, 64]  largest first, equal ones lower id first
import * as ort from "onnxruntime-node";
import onnxProto from "onnx-proto";
import { int, int64s, node } from "./model/onnx-nodes";
import { sessionOptions, type SessionSettings } from "./model/session";

const { onnx } = onnxProto;
const { FLOAT, DOUBLE, INT64 } = onnx.TensorProto.DataType;
/** How many of a row's largest exps the graph sorts (TopK). */
export const TOP = 64;

function graphBytes(ranked: boolean): Uint8Array {
  const tensor = (name: string, dims: (string | number)[], elemType: number = FLOAT) =>
    onnx.ValueInfoProto.create({
      name,
      type: {
        tensorType: {
          elemType,
          shape: { dim: dims.map((d) => (typeof d === "string" ? { dimParam: d } : { dimValue: d })) },
        },
      },
    });
  const graph = onnx.GraphProto.create({
    name: "lmp_sampling_exps",
    input: [tensor("logits", ["rows", "vocab"]), tensor("temperature", ["rows", 1])],
    output: [
      tensor("exps", ["rows", "vocab"]),
      tensor("max", ["rows", 1]),
      ...(ranked
        ? [
            tensor("total", ["rows", 1], DOUBLE),
            tensor("top_exps", ["rows", TOP]),
            tensor("top_ids", ["rows", TOP], INT64),
          ]
        : []),
    ],
    initializer: [int64s("last_axis", [-1]), ...(ranked ? [int64s("top", [TOP])] : [])],
    node: [
      node("Div", ["logits", "temperature"], ["scaled"]),
      node("ReduceMax", ["scaled", "last_axis"], ["max"]),
      node("Sub", ["scaled", "max"], ["shifted"]),
      node("Exp", ["shifted"], ["exps"]),
      ...(ranked
        ? [
            node("Cast", ["exps"], ["exps_double"], [int("to", DOUBLE)]),
            node("ReduceSum", ["exps_double", "last_axis"], ["total"]),
            node(
              "TopK",
              ["exps", "top"],
              ["top_exps", "top_ids"],
              [int("axis", -1), int("largest", 1), int("sorted", 1)],
            ),
          ]
        : []),
    ],
  });
  return onnx.ModelProto.encode(
    onnx.ModelProto.create({ irVersion: 8, opsetImport: [{ domain: "", version: 18 }], graph }),
  ).finish();
}

export interface RowExps {
  /** exp(logit / T − max) per vocabulary entry. */
  exps: Float32Array;
  /** max over the row of logit / T (float32). */
  max: number;
  /** From a ranked run: the exps' sum (in float64), and the TOP largest, largest first (ties: lower id first). */
  total?: number;
  top?: { exps: Float32Array; ids: BigInt64Array };
}

export class SamplingExps {
  /** Where rows that do not lie one after another are copied (kept for the next step). */
  private scratch = new Float32Array(0);
  /** The exps output's buffer, kept for the next step; valid until then. */
  private kept = new Float32Array(0);
  private running = false;

  private constructor(
    private readonly plain: ort.InferenceSession,
    private readonly ranked: ort.InferenceSession,
  ) {}

  static async create(settings: SessionSettings = {}): Promise<SamplingExps> {
    const [plain, ranked] = await Promise.all(
      [false, true].map((r) => ort.InferenceSession.create(graphBytes(r), sessionOptions(settings))),
    );
    return new SamplingExps(plain, ranked);
  }

  /**
   * Every row's exps at its temperature (> 0). `rows` of equal length; consecutive views of one
   * buffer are fed as they are, others are copied into one. The exps are valid until the next
   * run (their buffer is kept and written again). `ranked` (rows of TOP entries or
   * more) adds each row's total and top: about 0.1 ms a row at 152k entries, which onnxruntime
   * spends whether or not they are fetched, hence two sessions.
   */
  async compute(rows: readonly Float32Array[], temperatures: readonly number[], ranked = false): Promise<RowExps[]> {
    const V = rows[0].length;
    const B = rows.length;
    const withTop = ranked && V >= TOP;
    const feeds = {
      logits: new ort.Tensor("float32", this.contiguous(rows), [B, V]),
      temperature: new ort.Tensor("float32", Float32Array.from(temperatures), [B, 1]),
    };
    const session = withTop ? this.ranked : this.plain;
    // The exps go into a buffer kept from run to run (4.9 MB for 8 rows of 152k: a new one per
    // step was garbage for the collector); a run while another is in flight gets its own.
    let out: ort.InferenceSession.OnnxValueMapType;
    if (this.running) out = await session.run(feeds);
    else {
      this.running = true;
      try {
        if (this.kept.length < B * V) this.kept = new Float32Array(B * V);
        const exps = new ort.Tensor("float32", this.kept.subarray(0, B * V), [B, V]);
        out = {
          ...(await session.run(feeds, {
            exps,
            ...Object.fromEntries(session.outputNames.filter((n) => n !== "exps").map((n) => [n, null])),
          })),
          exps,
        };
      } finally {
        this.running = false;
      }
    }
    const exps = out.exps.data as Float32Array;
    const max = out.max.data as Float32Array;
    return rows.map((_, b) => ({
      exps: exps.subarray(b * V, (b + 1) * V),
      max: max[b],
      ...(withTop
        ? {
            total: (out.total.data as Float64Array)[b],
            top: {
              exps: (out.top_exps.data as Float32Array).subarray(b * TOP, (b + 1) * TOP),
              ids: (out.top_ids.data as BigInt64Array).subarray(b * TOP, (b + 1) * TOP),
            },
          }
        : {}),
    }));
  }

  async dispose() {
    await Promise.all([this.plain.release(), this.ranked.release()]);
  }

  /** The rows as one [rows, vocab] array: a view when they already lie one after another. */
  private contiguous(rows: readonly Float32Array[]): Float32Array {
    const V = rows[0].length;
    const first = rows[0];
    const adjacent = rows.every((r, i) => r.buffer === first.buffer && r.byteOffset === first.byteOffset + i * V * 4);
    if (adjacent) return new Float32Array(first.buffer, first.byteOffset, rows.length * V);
    if (this.scratch.length < rows.length * V) this.scratch = new Float32Array(rows.length * V);
    const all = this.scratch.subarray(0, rows.length * V);
    rows.forEach((r, i) => all.set(r, i * V));
    return all;
  }
}
