// Decoding steps that attend over the cache without copying it.
//
// A standard export appends the fed token to the cache inside the graph: present = Concat(past,
// new) along the sequence axis, then scores = q · keysᵀ and attended = probs · values. Those
// Concats copy every row's whole cache at every step: on the 134M bench model in q4 with 8 rows
// they took 2.8 ms of a 29 ms pass at 32 tokens of past, 8.0 of 36 at 148 and 14.3 of 34 at 300
// (onnxruntime's profiler), growing with the context while the rest does not.
//
// For a one-token pass the engine never fetches the presents (it takes the new columns alone,
// ./last-token-outputs.ts), so the copies are only there to feed the two products. Here each is
// split at the past/new boundary instead (K = the past's length):
//   scores   = Concat(q · pastᵀ × scale, q · newᵀ × scale)       ([rows, heads, 1, K + 1]: small)
//   attended = probs[…, :K] · past + probs[…, K:] × new
// Both are bit for bit the file's, where they run:
//  - scores: each is one dot product over the head dimension, whatever the columns around it,
//    once onnxruntime fuses the scaling into the product (FusedMatMul's alpha) in both versions
//    alike: so the scaling goes into the If with the product (measured equal for K = 1…300;
//    an unscaled product takes the M1 kernel below, equal for even K);
//  - attended: onnxruntime computes a one-row product (M = 1) with MLAS' M1 kernel, which sums K
//    in groups of four, then two, then one, each group's sum added to the total so far; with K
//    even, the split's last term is exactly the kernel's lone last term (measured over K =
//    2…300; odd K differ in the last bits).
// So the split runs only where it is exact: one-token passes over an even number of past columns
// (the padded layout's capacity is even) that fetch no present, chosen per pass by an input of
// the engine's own (SPLIT_INPUT); every other pass (prompts, odd past lengths) runs the file's
// own nodes. Each layer's two products (with grouped-query attention's repeat_kv between the
// Concat and them) become Ifs on that input, the Concats moved into their else branches. A
// load-time check (splitIsExact) compares both branches bit for bit at several past lengths; a
// graph that fails it never takes the split (on another CPU whose kernels sum otherwise, say).
// Graphs with a float16 cache are left as they are (see splitAttentionPlan).
import * as ort from "onnxruntime-node";
import onnxProto from "onnx-proto";
import { isPastInput } from "./graph-signature";
import { graphAttr, int, int64s, ints, node, type NodeProto } from "./onnx-nodes";
import type { GraphOps, ScannedNode } from "./onnx-scan";

const { onnx } = onnxProto;
type TensorProto = InstanceType<typeof onnx.TensorProto>;
type ValueInfoProto = InstanceType<typeof onnx.ValueInfoProto>;
const DataType = onnx.TensorProto.DataType;

/** The engine's bool [1] input: true for a pass that takes the split. */
export const SPLIT_INPUT = "lmp_split_attention";

/** One layer's values: MatMul(probs, Concat(past, columns) → [repeat]) = attended. */
export interface ValueSplit {
  present: string;
  past: string;
  columns: string;
  repeat: ScannedNode[];
  probs: string;
  attended: string;
}

/**
 * One layer's keys: Concat(past, columns) → [repeat] → Transpose(0, 1, 3, 2) → MatMul(query, ·)
 * = scores, then the scores' scaling when the MatMul's only reader multiplies or divides them by
 * a constant. That scaling goes into the If with the product: onnxruntime fuses the two
 * (FusedMatMul's alpha, another kernel than a plain product's), and must fuse them alike in both
 * branches; so fused, each score is the same dot product whatever the columns around it.
 */
export interface KeySplit {
  present: string;
  past: string;
  columns: string;
  repeat: ScannedNode[];
  transposed: string;
  query: string;
  scores: string;
  scale: { op: string; by: string; out: string } | null;
}

/** Ops of repeat_kv, which act on each position alone. */
const REPEAT_OPS = new Set([":Unsqueeze", ":Expand", ":Reshape"]);

export interface SplitAttentionPlan {
  keys: KeySplit[];
  values: ValueSplit[];
  /** A past input: its sequence length is K, the columns the split's probs are cut at. */
  past: string;
}

const SCALE_OPS = new Set([":Mul", ":Div"]);

/** What the graph may take besides the past for the split to be checked at load (splitIsExact). */
const PLAIN_INPUTS = new Set(["input_ids", "attention_mask", "position_ids"]);

/**
 * The products to split, given the presents that are Concat(past, new columns) (`concatenated`,
 * present → columns: ./last-token-outputs.ts concatenatedColumns). A present qualifies when the
 * Concat feeds one node, directly or through a repeat_kv chain: the values' MatMul (as its second
 * input), or the keys' Transpose that feeds one MatMul (as its second input). Null when none
 * does, the cache is not float32, or the graph takes inputs other than input_ids,
 * attention_mask, position_ids and the past.
 */
export function splitAttentionPlan(
  graph: GraphOps,
  concatenated: ReadonlyMap<string, string>,
): SplitAttentionPlan | null {
  if (graph.inputs.some((i) => !PLAIN_INPUTS.has(i) && !isPastInput(i))) return null;
  // A float16 cache: onnxruntime computes its products in float32 through Casts it inserts around
  // them, placed differently once the products sit in an If's branches (the file's numbers change).
  if (graph.inputs.some((i) => isPastInput(i) && graph.inputTypes.get(i) !== DataType.FLOAT)) return null;
  const readers = new Map<string, { node: ScannedNode; index: number }[]>();
  for (const node of graph.nodes)
    node.inputs.forEach((t, index) => {
      if (!t) return;
      const list = readers.get(t);
      if (list) list.push({ node, index });
      else readers.set(t, [{ node, index }]);
    });
  const onlyReader = (t: string) => {
    const list = readers.get(t);
    return list?.length === 1 ? list[0] : null;
  };
  const secondOfMatMul = (t: string) => {
    const r = onlyReader(t);
    return r && r.node.op === ":MatMul" && r.index === 1 ? r.node : null;
  };
  // Initializers (read, never made, not inputs) and Constant nodes' outputs.
  const producer = new Map(graph.nodes.flatMap((n) => n.outputs.map((o) => [o, n] as const)));
  const constant = (t: string) => (producer.has(t) ? producer.get(t)!.op === ":Constant" : !graph.inputs.includes(t));
  const keys: KeySplit[] = [];
  const values: ValueSplit[] = [];
  for (const n of graph.nodes) {
    const [present] = n.outputs;
    const columns = concatenated.get(present);
    if (n.op !== ":Concat" || !columns || n.inputs[1] !== columns) continue;
    const past = n.inputs[0];
    // repeat_kv, if any: a chain of single readers taking the cache at input 0.
    const repeat: ScannedNode[] = [];
    let cache = present;
    for (let r = onlyReader(cache); r && REPEAT_OPS.has(r.node.op) && r.index === 0; r = onlyReader(cache)) {
      repeat.push(r.node);
      cache = r.node.outputs[0];
    }
    const product = secondOfMatMul(cache);
    if (product) {
      values.push({ present, past, columns, repeat, probs: product.inputs[0], attended: product.outputs[0] });
      continue;
    }
    const t = onlyReader(cache)?.node;
    const scoring = t?.op === ":Transpose" && t.perm?.join() === "0,1,3,2" ? secondOfMatMul(t.outputs[0]) : null;
    if (!t || !scoring) continue;
    // A query scaled by a constant before the product: onnxruntime fuses that scaling into the
    // file's product (FusedMatMul's alpha) but could not into the If's, whose numbers would then
    // differ from the file's in both branches alike (the load check would not see it).
    const q = producer.get(scoring.inputs[0]);
    if (q && SCALE_OPS.has(q.op) && q.inputs.some((i) => i && constant(i))) continue;
    const s = onlyReader(scoring.outputs[0]);
    const by = s?.node.inputs[1];
    const scaled = s && SCALE_OPS.has(s.node.op) && s.index === 0 && by && constant(by) ? s.node : null;
    keys.push({
      present,
      past,
      columns,
      repeat,
      transposed: t.outputs[0],
      query: scoring.inputs[0],
      scores: scoring.outputs[0],
      scale: scaled ? { op: scaled.op.slice(1), by: by!, out: scaled.outputs[0] } : null,
    });
  }
  if (values.length === 0 && keys.length === 0) return null;
  return { keys, values, past: (values[0] ?? keys[0]).past };
}

/**
 * Rewrites the graph's nodes for `plan` as they stream by (./last-token-outputs.ts
 * modelWithWeightsByReference): the planned Concats, repeats, Transposes and scalings go, each
 * planned MatMul becomes an If on SPLIT_INPUT. Names are the served graph's (after `renames`).
 */
export class SplitAttentionGraph {
  /** First outputs of the nodes that go: the planned Concats (presents), repeats, Transposes, scalings. */
  private readonly dropped = new Set<string>();
  /** Tensors no longer made at the top level. */
  private readonly vanished = new Set<string>();
  private readonly values = new Map<string, ValueSplit>();
  private readonly keys = new Map<string, KeySplit>();
  private preludeDone = false;

  constructor(
    private readonly plan: SplitAttentionPlan,
    renames: ReadonlyMap<string, string>,
  ) {
    for (const v of plan.values) this.values.set(v.attended, { ...v, columns: renames.get(v.columns) ?? v.columns });
    for (const k of plan.keys) {
      this.keys.set(k.scores, { ...k, columns: renames.get(k.columns) ?? k.columns });
      // The Transpose, and the scaling (its output now the If's), go with the Concat.
      this.vanished.add(k.transposed);
      this.dropped.add(k.transposed);
      if (k.scale) {
        this.dropped.add(k.scale.out);
        this.vanished.add(k.scores);
      }
    }
    for (const x of [...plan.values, ...plan.keys]) {
      this.dropped.add(x.present);
      for (const r of x.repeat) {
        this.dropped.add(r.outputs[0]);
        this.vanished.add(r.outputs[0]);
      }
    }
  }

  /**
   * Tensors no longer made at the top level (repeats', Transposes' and scaled products' outputs:
   * their value_info, shape hints, must go); the presents and scores now come from the Ifs.
   */
  gone(tensor: string): boolean {
    return this.vanished.has(tensor);
  }

  /** What replaces node `n` (by its first output). */
  replace(n: NodeProto): NodeProto[] {
    const [out] = n.output;
    if (this.dropped.has(out)) return [];
    const value = this.values.get(out);
    const key = this.keys.get(out);
    if (!value && !key) return [n];
    const prelude = this.preludeDone ? [] : this.prelude();
    this.preludeDone = true;
    return [...prelude, value ? this.valueIf(value) : this.keyIf(key!)];
  }

  /** K (as a 1-D tensor): the past's sequence length, read by the values' branches. */
  private prelude(): NodeProto[] {
    return [
      node("Shape", [this.plan.past], [`${P}past_shape`]),
      node("Slice", [`${P}past_shape`, `${P}two`, `${P}three`], [PAST_LENGTH]),
    ];
  }

  private keyIf(k: KeySplit): NodeProto {
    const p = `${P}${k.scores}/`;
    const { past, columns, whole } = repeats(k, p);
    const perm = [ints("perm", [0, 1, 3, 2])];
    // query · keysᵀ, then the scaling when there is one, into `out`.
    const scores = (keys: string, out: string) =>
      k.scale
        ? [
            node("Transpose", [keys], [`${out}/t`], perm),
            node("MatMul", [k.query, `${out}/t`], [`${out}/unscaled`]),
            node(k.scale.op, [`${out}/unscaled`, k.scale.by], [out]),
          ]
        : [node("Transpose", [keys], [`${out}/t`], perm), node("MatMul", [k.query, `${out}/t`], [out])];
    const split = branch(`${p}split`, [
      ...past.nodes,
      ...columns.nodes,
      ...scores(past.out, `${p}past_scores`),
      ...scores(columns.out, `${p}new_scores`),
      node("Concat", [`${p}past_scores`, `${p}new_scores`], [`${p}scores`], [int("axis", -1)]),
      node("Identity", [k.columns], [`${p}present`]),
    ]);
    const file = branch(`${p}file`, [
      node("Concat", [k.past, k.columns], [`${p}whole`], [int("axis", 2)]),
      ...whole.nodes,
      ...scores(whole.out, `${p}whole_scores`),
    ]);
    return ifNode(`${p}if`, [k.scale?.out ?? k.scores, k.present], split, [`${p}scores`, `${p}present`], file, [
      `${p}whole_scores`,
      `${p}whole`,
    ]);
  }

  private valueIf(v: ValueSplit): NodeProto {
    const p = `${P}${v.attended}/`;
    const { past, columns, whole } = repeats(v, p);
    const split = branch(`${p}split`, [
      ...past.nodes,
      ...columns.nodes,
      node("Slice", [v.probs, `${P}zero`, PAST_LENGTH, `${P}last_axis`], [`${p}past_probs`]),
      node("Slice", [v.probs, PAST_LENGTH, `${P}end`, `${P}last_axis`], [`${p}new_probs`]),
      node("MatMul", [`${p}past_probs`, past.out], [`${p}past_part`]),
      node("Mul", [`${p}new_probs`, columns.out], [`${p}new_part`]),
      node("Add", [`${p}past_part`, `${p}new_part`], [`${p}attended`]),
      node("Identity", [v.columns], [`${p}present`]),
    ]);
    const file = branch(`${p}file`, [
      node("Concat", [v.past, v.columns], [`${p}whole`], [int("axis", 2)]),
      ...whole.nodes,
      node("MatMul", [v.probs, whole.out], [`${p}whole_attended`]),
    ]);
    return ifNode(`${p}if`, [v.attended, v.present], split, [`${p}attended`, `${p}present`], file, [
      `${p}whole_attended`,
      `${p}whole`,
    ]);
  }

  /** The constants the branches read. */
  initializers(): TensorProto[] {
    return [
      int64s(`${P}two`, [2]),
      int64s(`${P}three`, [3]),
      int64s(`${P}zero`, [0]),
      int64s(`${P}end`, [2 ** 31 - 1]),
      int64s(`${P}last_axis`, [3]),
    ];
  }

  /** The graph input that chooses the branch. */
  input(): ValueInfoProto {
    return onnx.ValueInfoProto.create({
      name: SPLIT_INPUT,
      type: { tensorType: { elemType: DataType.BOOL, shape: { dim: [{ dimValue: 1 }] } } },
    });
  }
}

const P = "lmp_split/";
const PAST_LENGTH = `${P}past_length`;

const branch = (name: string, nodes: NodeProto[]) => ({ name, nodes });

/**
 * A layer's repeat chain applied to its past, to its new columns, and to their Concat (`${p}whole`,
 * the file branch's), each under its own names.
 */
function repeats(x: KeySplit | ValueSplit, p: string) {
  return {
    past: repeated(x.repeat, x.past, `${p}past_r`),
    columns: repeated(x.repeat, x.columns, `${p}new_r`),
    whole: repeated(x.repeat, `${p}whole`, `${p}whole_r`),
  };
}

/** The repeat chain's nodes applied to `from` (their other inputs as in the file), names under `prefix`. */
function repeated(chain: readonly ScannedNode[], from: string, prefix: string): { nodes: NodeProto[]; out: string } {
  const nodes: NodeProto[] = [];
  let out = from;
  chain.forEach((c, i) => {
    const next = `${prefix}${i}`;
    nodes.push(node(c.op.slice(c.op.indexOf(":") + 1), [out, ...c.inputs.slice(1)], [next], c.attributes ?? []));
    out = next;
  });
  return { nodes, out };
}

function ifNode(
  name: string,
  outputs: string[],
  then: { name: string; nodes: NodeProto[] },
  thenOutputs: string[],
  otherwise: { name: string; nodes: NodeProto[] },
  elseOutputs: string[],
): NodeProto {
  const graph = (b: { name: string; nodes: NodeProto[] }, out: string[]) =>
    graphAttr(
      b === then ? "then_branch" : "else_branch",
      onnx.GraphProto.create({
        name: b.name,
        node: b.nodes,
        output: out.map((o) => onnx.ValueInfoProto.create({ name: o })),
      }),
    );
  return node("If", [SPLIT_INPUT], outputs, [graph(then, thenOutputs), graph(otherwise, elseOutputs)], name);
}

/** An LCG's values in [-1, 1): the check's past (any finite numbers will do). */
function noise(length: number, seed: number): Float32Array {
  const out = new Float32Array(length);
  let s = seed >>> 0;
  for (let i = 0; i < length; i++) {
    s = (Math.imul(s, 1_664_525) + 1_013_904_223) >>> 0;
    out[i] = s / 2 ** 31 - 1;
  }
  return out;
}

/**
 * Past lengths the load check tries: every even remainder by 4 of K, past one and several of the
 * kernel's groups of four (the sums it adds to). Longer pasts would only repeat those cases, and
 * each pass grows onnxruntime's arena: up to 130 columns, the check added 40-50 MiB to a load.
 */
const CHECKED_PAST_LENGTHS = [2, 4, 6, 8, 10, 12, 34];

/**
 * Whether a one-token pass gives the same outputs, bit for bit, through the split as through the
 * file's nodes, at each of CHECKED_PAST_LENGTHS columns of past (random numbers), with one row
 * and with two (a row-wise quantized graph runs those through different branches): run at load
 * on a graph served with `plan`. Its presents are not compared (the split does not make them).
 */
export async function splitIsExact(session: ort.InferenceSession, plan: SplitAttentionPlan): Promise<boolean> {
  try {
    return await comparesEqual(session, plan);
  } catch {
    return false; // a check that cannot run (a graph refusing these feeds) proves nothing
  }
}

async function comparesEqual(session: ort.InferenceSession, plan: SplitAttentionPlan): Promise<boolean> {
  const presents = new Set([...plan.keys, ...plan.values].map((s) => s.present));
  const fetched = session.outputNames.filter((o) => !presents.has(o));
  const ids = session.inputMetadata.find((m) => m.name === "input_ids");
  const oneRow = ids?.isTensor && ids.shape[0] === 1; // a graph that pins its batch to one row
  for (const [i, K] of CHECKED_PAST_LENGTHS.entries()) {
    const rows = oneRow ? 1 : 1 + (i % 2);
    const feeds: Record<string, ort.Tensor> = {};
    const shared: Record<string, Float32Array> = {};
    for (const m of session.inputMetadata) {
      if (!m.isTensor) return false;
      const filled = (n: number, value: bigint) =>
        new ort.Tensor("int64", new BigInt64Array(rows * n).fill(value), [rows, n]);
      if (m.name === "input_ids") feeds[m.name] = filled(1, 1n);
      else if (m.name === "attention_mask") feeds[m.name] = filled(K + 1, 1n);
      else if (m.name === "position_ids") feeds[m.name] = filled(1, BigInt(K));
      else if (isPastInput(m.name)) {
        const [, heads, , dim] = m.shape;
        if (typeof heads !== "number" || typeof dim !== "number") return false;
        // One buffer for every layer's past (they may share numbers): fewer bytes allocated.
        const values = (shared[`${m.type}/${heads}/${dim}`] ??= noise(rows * heads * K * dim, K * 7919));
        if (m.type !== "float32") return false; // (plans are made for float32 caches only)
        feeds[m.name] = new ort.Tensor("float32", values, [rows, heads, K, dim]);
      } else if (m.name !== SPLIT_INPUT) return false;
    }
    const run = (split: boolean) =>
      session.run({ ...feeds, [SPLIT_INPUT]: new ort.Tensor("bool", Uint8Array.of(split ? 1 : 0), [1]) }, fetched);
    const [file, split] = [await run(false), await run(true)];
    for (const o of fetched) {
      const a = file[o].data as ArrayLike<number>;
      const b = split[o].data as ArrayLike<number>;
      if (a.length !== b.length) return false;
      for (let i = 0; i < a.length; i++) if (!Object.is(a[i], b[i])) return false;
    }
  }
  return true;
}
