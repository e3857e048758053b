//! Building ONNX nodes and initializers: fresh names, attributes and
//! constant tensors.

use super::proto::{AttributeProto, NodeProto, TensorProto, attribute_type, data_type};
use crate::DType;

/// ONNX's element type for a dtype.
pub(super) fn onnx_type(d: DType) -> i32 {
    match d {
        DType::F32 => data_type::FLOAT,
        DType::F64 => data_type::DOUBLE,
        DType::F16 => data_type::FLOAT16,
        DType::BF16 => data_type::BFLOAT16,
        DType::I64 => data_type::INT64,
        DType::U8 => data_type::UINT8,
        DType::Bool => data_type::BOOL,
    }
}

/// Nodes and initializers as they are made, with fresh names.
#[derive(Default)]
pub(super) struct Builder {
    pub nodes: Vec<NodeProto>,
    pub inits: Vec<TensorProto>,
    fresh: usize,
}

pub(super) fn int(name: &str, v: i64) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        i: Some(v),
        r#type: Some(attribute_type::INT),
        ..Default::default()
    }
}
pub(super) fn float(name: &str, v: f64) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        f: Some(v as f32),
        r#type: Some(attribute_type::FLOAT),
        ..Default::default()
    }
}
pub(super) fn string(name: &str, v: &str) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        s: Some(v.as_bytes().to_vec()),
        r#type: Some(attribute_type::STRING),
        ..Default::default()
    }
}
pub(super) fn ints(name: &str, v: &[i64]) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        ints: v.to_vec(),
        r#type: Some(attribute_type::INTS),
        ..Default::default()
    }
}
pub(super) fn tensor_attr(name: &str, t: TensorProto) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        t: Some(t),
        r#type: Some(attribute_type::TENSOR),
        ..Default::default()
    }
}

/// A one-element tensor of `dtype` holding `v` (no name).
pub(super) fn scalar_proto(v: f64, dtype: DType, dims: Vec<i64>) -> TensorProto {
    let raw = match dtype {
        DType::F64 => v.to_le_bytes().to_vec(),
        DType::F16 => half::f16::from_f64(v).to_le_bytes().to_vec(),
        DType::BF16 => half::bf16::from_f64(v).to_le_bytes().to_vec(),
        DType::I64 => (v as i64).to_le_bytes().to_vec(),
        DType::U8 => vec![v as u8],
        DType::Bool => vec![(v != 0.0) as u8],
        DType::F32 => (v as f32).to_le_bytes().to_vec(),
    };
    TensorProto {
        dims,
        data_type: Some(onnx_type(dtype)),
        raw_data: Some(raw),
        ..Default::default()
    }
}

impl Builder {
    pub fn fresh(&mut self, hint: &str) -> String {
        self.fresh += 1;
        // A separator no op value name has (those are `{op}_{k}`), so a
        // fresh name never takes an op output's.
        format!("{hint}/{}", self.fresh)
    }

    pub fn node(
        &mut self,
        op: &str,
        inputs: &[&str],
        outputs: &[&str],
        attribute: Vec<AttributeProto>,
    ) {
        let name = self.fresh(op);
        self.nodes.push(NodeProto {
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: outputs.iter().map(|s| s.to_string()).collect(),
            name: Some(name),
            op_type: Some(op.into()),
            attribute,
            doc_string: None,
        });
    }

    /// A node with one output under a fresh name, which it returns.
    pub fn tmp(&mut self, op: &str, inputs: &[&str], attrs: Vec<AttributeProto>) -> String {
        let out = self.fresh(&format!("{op}_out"));
        self.node(op, inputs, &[&out], attrs);
        out
    }

    /// An int64 initializer (shapes, axes, starts) of the given dims.
    pub fn const_i64(&mut self, v: &[i64], dims: Vec<i64>) -> String {
        let name = self.fresh("const");
        self.inits.push(TensorProto {
            dims,
            data_type: Some(data_type::INT64),
            name: Some(name.clone()),
            raw_data: Some(v.iter().flat_map(|x| x.to_le_bytes()).collect()),
        });
        name
    }

    /// A 1-D int64 initializer.
    pub fn vec_i64(&mut self, v: &[i64]) -> String {
        self.const_i64(v, vec![v.len() as i64])
    }

    /// A 1-D float32 initializer.
    pub fn vec_f32(&mut self, v: &[f64]) -> String {
        let name = self.fresh("const");
        self.inits.push(TensorProto {
            dims: vec![v.len() as i64],
            data_type: Some(data_type::FLOAT),
            name: Some(name.clone()),
            raw_data: Some(v.iter().flat_map(|&x| (x as f32).to_le_bytes()).collect()),
        });
        name
    }

    /// A 0-d initializer of `dtype`.
    pub fn scalar(&mut self, v: f64, dtype: DType) -> String {
        let name = self.fresh("const");
        let mut t = scalar_proto(v, dtype, vec![]);
        t.name = Some(name.clone());
        self.inits.push(t);
        name
    }
}
