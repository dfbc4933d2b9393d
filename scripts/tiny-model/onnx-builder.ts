// Thin helper over onnx-proto (protobufjs classes) to build a graph node by node.
import onnxProto from "onnx-proto";

const { onnx } = onnxProto;
type Attr = number | number[] | string;

export class GraphBuilder {
  nodes: InstanceType<typeof onnx.NodeProto>[] = [];
  initializers: InstanceType<typeof onnx.TensorProto>[] = [];
  inputs: InstanceType<typeof onnx.ValueInfoProto>[] = [];
  outputs: InstanceType<typeof onnx.ValueInfoProto>[] = [];
  private counter = 0;

  fresh(prefix: string): string {
    return `${prefix}_${this.counter++}`;
  }

  op(opType: string, inputs: string[], attrs: Record<string, Attr> = {}, outName?: string): string {
    const out = outName ?? this.fresh(opType.toLowerCase());
    const attribute = Object.entries(attrs).map(([name, v]) => {
      if (typeof v === "string")
        return onnx.AttributeProto.create({
          name,
          type: onnx.AttributeProto.AttributeType.STRING,
          s: new TextEncoder().encode(v),
        });
      if (Array.isArray(v))
        return onnx.AttributeProto.create({ name, type: onnx.AttributeProto.AttributeType.INTS, ints: v });
      if (Number.isInteger(v) && name !== "epsilon" && name !== "alpha")
        return onnx.AttributeProto.create({ name, type: onnx.AttributeProto.AttributeType.INT, i: v });
      return onnx.AttributeProto.create({ name, type: onnx.AttributeProto.AttributeType.FLOAT, f: v });
    });
    this.nodes.push(onnx.NodeProto.create({ opType, input: inputs, output: [out], name: out, attribute }));
    return out;
  }

  floatTensor(name: string, dims: number[], data: Float32Array): string {
    this.initializers.push(
      onnx.TensorProto.create({
        name,
        dims,
        dataType: onnx.TensorProto.DataType.FLOAT,
        rawData: new Uint8Array(data.buffer, data.byteOffset, data.byteLength),
      }),
    );
    return name;
  }

  int64Tensor(name: string, dims: number[], values: number[]): string {
    const data = BigInt64Array.from(values.map((v) => BigInt(v)));
    this.initializers.push(
      onnx.TensorProto.create({
        name,
        dims,
        dataType: onnx.TensorProto.DataType.INT64,
        rawData: new Uint8Array(data.buffer),
      }),
    );
    return name;
  }

  scalarFloat(value: number): string {
    return this.floatTensor(this.fresh("const_f"), [], Float32Array.of(value));
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

  encode(opset: number): Uint8Array {
    const graph = onnx.GraphProto.create({
      name: "tiny_gpt2",
      node: this.nodes,
      initializer: this.initializers,
      input: this.inputs,
      output: this.outputs,
    });
    const model = onnx.ModelProto.create({
      irVersion: 8,
      producerName: "model-tiny",
      opsetImport: [{ domain: "", version: opset }],
      graph,
    });
    return onnx.ModelProto.encode(model).finish();
  }
}

export const FLOAT = onnx.TensorProto.DataType.FLOAT;
export const INT64 = onnx.TensorProto.DataType.INT64;
export const BOOL = onnx.TensorProto.DataType.BOOL;
