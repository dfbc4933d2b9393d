// Builders for the graph pieces the engine writes: what it adds to a model (./row-quantization.ts,
// ./split-attention.ts) and the small graph it builds of its own (../sampling-exps.ts).
import onnxProto from "onnx-proto";

const { onnx } = onnxProto;
const AttrType = onnx.AttributeProto.AttributeType;

export type NodeProto = InstanceType<typeof onnx.NodeProto>;
export type Attr = InstanceType<typeof onnx.AttributeProto>;

/** A node, named `${output[0]}.node` unless `name` is given. */
export function node(
  opType: string,
  input: string[],
  output: string[],
  attribute: Attr[] = [],
  name?: string,
): NodeProto {
  return onnx.NodeProto.create({ opType, input, output, attribute, name: name ?? `${output[0]}.node` });
}

export const int = (name: string, i: number) => onnx.AttributeProto.create({ name, type: AttrType.INT, i });
export const ints = (name: string, values: number[]) =>
  onnx.AttributeProto.create({ name, type: AttrType.INTS, ints: values });
export const graphAttr = (name: string, g: InstanceType<typeof onnx.GraphProto>) =>
  onnx.AttributeProto.create({ name, type: AttrType.GRAPH, g });

/** An int64 tensor of `values`, shaped [values.length]. */
export const int64s = (name: string, values: number[]) =>
  onnx.TensorProto.create({
    name,
    dims: [values.length],
    dataType: onnx.TensorProto.DataType.INT64,
    int64Data: values,
  });
