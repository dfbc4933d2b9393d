// Thin helper over onnx-proto (protobufjs classes) to build a graph node by node, with typed
// initializers, contrib-domain nodes and, optionally, weights in external data files.
import onnxProto from "onnx-proto";
import { toFloat16Array } from "../../workers/engine/model/float16";

const { onnx } = onnxProto;
type Attr = number | number[] | string;

export const FLOAT = onnx.TensorProto.DataType.FLOAT;
export const FLOAT16 = onnx.TensorProto.DataType.FLOAT16;
export const INT64 = onnx.TensorProto.DataType.INT64;
export const INT32 = onnx.TensorProto.DataType.INT32;
export const INT8 = onnx.TensorProto.DataType.INT8;
export const UINT8 = onnx.TensorProto.DataType.UINT8;
export const BOOL = onnx.TensorProto.DataType.BOOL;
export const MS_DOMAIN = "com.microsoft";

/** Attributes that are floats even when their value is a whole number. */
const FLOAT_ATTRS = new Set(["epsilon", "alpha", "scale", "mask_filter_value", "softcap"]);

export interface ExternalDataOptions {
  /** File name of the first data file, next to the graph (`model.onnx_data`); more are `_1`, `_2`… */
  location: string;
  /** How many files the weights are spread over (exports split past 2 GB). */
  chunks: number;
  /** Initializers smaller than this stay inside the graph. */
  minBytes: number;
}

export interface EncodedModel {
  graph: Uint8Array;
  data: { file: string; bytes: Uint8Array }[];
}

const bytesOf = (a: ArrayBufferView) => new Uint8Array(a.buffer, a.byteOffset, a.byteLength);

export class GraphBuilder {
  nodes: InstanceType<typeof onnx.NodeProto>[] = [];
  initializers: InstanceType<typeof onnx.TensorProto>[] = [];
  inputs: InstanceType<typeof onnx.ValueInfoProto>[] = [];
  outputs: InstanceType<typeof onnx.ValueInfoProto>[] = [];
  private counter = 0;

  fresh(prefix: string): string {
    return `${prefix}_${this.counter++}`;
  }

  op(opType: string, inputs: string[], attrs: Record<string, Attr> = {}, outName?: string, domain = ""): string {
    return this.opMulti(opType, inputs, 1, attrs, outName ? [outName] : undefined, domain)[0];
  }

  /** A node with several outputs (named, or fresh names when not given). */
  opMulti(
    opType: string,
    inputs: string[],
    outputs: number,
    attrs: Record<string, Attr> = {},
    outNames?: string[],
    domain = "",
  ): string[] {
    const out = outNames ?? Array.from({ length: outputs }, () => this.fresh(opType.toLowerCase()));
    const attribute = Object.entries(attrs).map(([name, v]) => {
      const T = onnx.AttributeProto.AttributeType;
      if (typeof v === "string")
        return onnx.AttributeProto.create({ name, type: T.STRING, s: new TextEncoder().encode(v) });
      if (Array.isArray(v)) return onnx.AttributeProto.create({ name, type: T.INTS, ints: v });
      if (Number.isInteger(v) && !FLOAT_ATTRS.has(name)) return onnx.AttributeProto.create({ name, type: T.INT, i: v });
      return onnx.AttributeProto.create({ name, type: T.FLOAT, f: v });
    });
    this.nodes.push(onnx.NodeProto.create({ opType, input: inputs, output: out, name: out[0], attribute, domain }));
    return out;
  }

  initializer(name: string, dataType: number, dims: number[], data: ArrayBufferView): string {
    this.initializers.push(onnx.TensorProto.create({ name, dims, dataType, rawData: bytesOf(data) }));
    return name;
  }

  /** A float initializer stored as `elemType` (FLOAT or FLOAT16). */
  floatTensor(name: string, dims: number[], data: Float32Array, elemType = FLOAT): string {
    return this.initializer(name, elemType, dims, elemType === FLOAT16 ? toFloat16Array(data) : data);
  }

  int64Tensor(name: string, dims: number[], values: number[]): string {
    return this.initializer(name, INT64, dims, BigInt64Array.from(values.map((v) => BigInt(v))));
  }

  scalarFloat(value: number, elemType = FLOAT): string {
    return this.floatTensor(this.fresh("const_f"), [], Float32Array.of(value), elemType);
  }

  valueInfo(name: string, elemType: number, shape: (number | string)[]) {
    return onnx.ValueInfoProto.create({
      name,
      type: {
        tensorType: {
          elemType,
          shape: { dim: shape.map((d) => (typeof d === "number" ? { dimValue: d } : { dimParam: d })) },
        },
      },
    });
  }

  encode(opset: number, opts: { name?: string; external?: ExternalDataOptions } = {}): EncodedModel {
    const data = opts.external ? this.moveToExternal(opts.external) : [];
    const graph = onnx.GraphProto.create({
      name: opts.name ?? "tiny_model",
      node: this.nodes,
      initializer: this.initializers,
      input: this.inputs,
      output: this.outputs,
    });
    const usesMs = this.nodes.some((n) => n.domain === MS_DOMAIN);
    const model = onnx.ModelProto.create({
      irVersion: 8,
      producerName: "model-tiny",
      opsetImport: [{ domain: "", version: opset }, ...(usesMs ? [{ domain: MS_DOMAIN, version: 1 }] : [])],
      graph,
    });
    return { graph: onnx.ModelProto.encode(model).finish(), data };
  }

  /** Moves large initializers' bytes into data files, in order, about equal bytes per file. */
  private moveToExternal(ext: ExternalDataOptions): { file: string; bytes: Uint8Array }[] {
    const big = this.initializers.filter((t) => (t.rawData?.length ?? 0) >= ext.minBytes);
    const total = big.reduce((a, t) => a + t.rawData.length, 0);
    const perChunk = Math.ceil(total / ext.chunks);
    const files = Array.from({ length: ext.chunks }, (_, i) => ({
      file: i === 0 ? ext.location : `${ext.location}_${i}`,
      parts: [] as Uint8Array[],
      size: 0,
    }));
    let chunk = 0;
    for (const t of big) {
      if (files[chunk].size >= perChunk && chunk < ext.chunks - 1) chunk++;
      const f = files[chunk];
      const offset = Math.ceil(f.size / 64) * 64; // aligned like onnx's own writer
      if (offset > f.size) f.parts.push(new Uint8Array(offset - f.size));
      f.parts.push(t.rawData);
      f.size = offset + t.rawData.length;
      t.externalData = [
        { key: "location", value: f.file },
        { key: "offset", value: String(offset) },
        { key: "length", value: String(t.rawData.length) },
      ];
      t.dataLocation = onnx.TensorProto.DataLocation.EXTERNAL;
      (t as { rawData?: Uint8Array | null }).rawData = null; // the bytes now live in the data file
    }
    return files.map((f) => ({ file: f.file, bytes: Buffer.concat(f.parts) }));
  }
}
